"""A manifest read and written back keeps every field the user wrote."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.jobs import TYPICAL, manifest
from trainop.api import KINDS, parse_job, read_documents
from trainop.api.conversion import convert

EXAMPLES = sorted(Path(__file__).resolve().parents[2].joinpath("trainop/examples").glob("*.yaml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_round_trip_unchanged(path: Path) -> None:
    # (a v2beta1 job is read as its v1 form: back at v2beta1, it is what was written)
    for doc in read_documents(str(path)):
        assert convert(parse_job(doc).to_dict(), doc["apiVersion"]) == doc


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_unknown_fields_survive_everywhere(kind: str) -> None:
    doc = manifest(kind, TYPICAL[kind])
    field = KINDS[kind].replica_specs_field
    rtype = next(iter(TYPICAL[kind]))
    template = doc["spec"][field][rtype]["template"]
    template["metadata"] = {"labels": {"team": "ml"}, "annotations": {"a": "b"}}
    template["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": 1}}
    template["spec"]["tolerations"] = [{"key": "gpu", "operator": "Exists"}]
    template["spec"]["futureField"] = {"nested": [1, 2, {"x": None}]}
    doc["spec"]["runPolicy"] = {"futurePolicy": True, "backoffLimit": 2}
    doc["spec"]["futureSpecField"] = "kept"
    doc["metadata"]["labels"] = {"a": "b"}
    doc["metadata"]["finalizers"] = ["x/y"]
    doc["status"] = {"conditions": [{"type": "Created", "status": "True",
                                     "reason": "R", "message": "m", "future": 1}]}
    assert parse_job(doc).to_dict() == doc


def test_aliases_in_yaml_do_not_share_state(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(
        "apiVersion: kubeflow.org/v1\nkind: TFJob\nmetadata: {name: a}\nspec:\n"
        "  tfReplicaSpecs:\n    Chief:\n      template: &t {spec: {containers: "
        "[{name: tensorflow, image: i}]}}\n    Worker:\n      template: *t\n")
    (doc,) = read_documents(str(path))
    chief = doc["spec"]["tfReplicaSpecs"]["Chief"]["template"]
    assert chief is not doc["spec"]["tfReplicaSpecs"]["Worker"]["template"]
