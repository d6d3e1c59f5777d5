"""The CRDs are generated from the models; the checked-in ones must match."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from trainop.api import KINDS
from trainop.api.crd import all_crds

CRD_DIR = Path(__file__).resolve().parents[2] / "config" / "crd"
GENERATED = all_crds()


def test_checked_in_crds_match_the_models() -> None:
    on_disk = {p.name for p in CRD_DIR.glob("kubeflow.org_*.yaml")}
    assert on_disk == set(GENERATED), "run: trainop crds --config config"
    for name, crd in GENERATED.items():
        assert yaml.safe_load((CRD_DIR / name).read_text()) == crd, \
            f"config/crd/{name} drifted from the models; run: trainop crds --config config"


def _crd(kind: str) -> dict[str, Any]:
    return GENERATED[f"kubeflow.org_{KINDS[kind].plural}.yaml"]


def _walk(schema: Any) -> list[dict[str, Any]]:
    out = []
    if isinstance(schema, dict):
        out.append(schema)
        for v in schema.values():
            out.extend(_walk(v))
    elif isinstance(schema, list):
        for v in schema:
            out.extend(_walk(v))
    return out


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_names_and_printer_columns(kind: str) -> None:
    crd = _crd(kind)
    names = crd["spec"]["names"]
    assert names == {"kind": kind, "listKind": f"{kind}List",
                     "plural": KINDS[kind].plural, "singular": kind.lower()}
    version = crd["spec"]["versions"][0]
    assert version["name"] == "v1" and version["served"] and version["storage"]
    cols = {c["name"]: (c["jsonPath"], c.get("priority", 0))
            for c in version["additionalPrinterColumns"]}
    # upstream's two in the default output; trainop's Progress only with -o wide
    assert cols == {"State": (".status.conditions[-1:].type", 0),
                    "Age": (".metadata.creationTimestamp", 0),
                    "Progress": (".status.progress.percent", 1)}
    assert version["subresources"]["status"] == {}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_schema_is_structural(kind: str) -> None:
    schema = _crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for node in _walk(schema):
        if "properties" in node or "additionalProperties" in node:
            assert node.get("type") == "object"
        assert "$ref" not in node
    field = KINDS[kind].replica_specs_field
    replica = schema["properties"]["spec"]["properties"][field]["additionalProperties"]
    template = replica["properties"]["template"]
    assert not any(n.get("x-kubernetes-preserve-unknown-fields") for n in _walk(template))
    containers = template["properties"]["spec"]["properties"]["containers"]
    # a Kubernetes pod template: containers merge by name under server-side apply
    assert containers["x-kubernetes-list-type"] == "map"
    assert containers["x-kubernetes-list-map-keys"] == ["name"]
    assert {"image", "env", "ports"} <= set(containers["items"]["properties"])
    assert set(template["properties"]["metadata"]["properties"]) == {
        "annotations", "finalizers", "labels", "name", "namespace"}
    assert schema["properties"]["spec"]["required"] == [field]
    min_res = (schema["properties"]["spec"]["properties"]["runPolicy"]["properties"]
               ["schedulingPolicy"]["properties"]["minResources"]["additionalProperties"])
    assert min_res["x-kubernetes-int-or-string"] is True


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_scale_subresource_where_upstream_has_it(kind: str) -> None:
    sub = _crd(kind)["spec"]["versions"][0]["subresources"]
    if kind in ("PyTorchJob", "PaddleJob", "JAXJob"):
        field = KINDS[kind].replica_specs_field
        assert sub["scale"] == {
            "specReplicasPath": f".spec.{field}.Worker.replicas",
            "statusReplicasPath": ".status.replicaStatuses.Worker.active",
            "labelSelectorPath": ".status.replicaStatuses.Worker.selector",
        }
    else:
        assert "scale" not in sub


def test_extensions_are_in_the_schema() -> None:
    schema = _crd("PyTorchJob")["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    spec = schema["properties"]["spec"]["properties"]
    # no enums, as upstream's: trainop's validation names the values it takes
    assert spec["runPolicy"]["properties"]["restartScope"] == {
        "description": spec["runPolicy"]["properties"]["restartScope"]["description"],
        "type": "string"}
    replica = spec["pytorchReplicaSpecs"]["additionalProperties"]["properties"]
    assert replica["restartLimit"]["type"] == "integer"
    status = schema["properties"]["status"]["properties"]
    assert set(status["lastFailure"]["properties"]) >= {"replicaType", "index", "pod", "exitCode"}
    assert spec["runPolicy"]["properties"]["startupDeadlineSeconds"]["type"] == "integer"
    waiting = status["waitingReplicas"]
    assert waiting["type"] == "array"
    assert set(waiting["items"]["properties"]) == {"replicaType", "index", "pod", "reason",
                                                   "message", "since"}


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_queue_carries_upstreams_immutability_rule(kind: str) -> None:
    run_policy = _crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"][
        "spec"]["properties"]["runPolicy"]
    queue = run_policy["properties"]["schedulingPolicy"]["properties"]["queue"]
    assert queue["x-kubernetes-validations"] == [
        {"message": "spec.runPolicy.schedulingPolicy.queue is immutable",
         "rule": "self == oldSelf"}]
