"""The generated CRDs and the examples against a real kube-apiserver."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.jobs import manifest
from trainop.api import KINDS, read_documents
from trainop.testing.apiserver import TestAPIServer

pytestmark = pytest.mark.integration
EXAMPLES = sorted(Path(__file__).resolve().parents[2].joinpath("trainop/examples").glob("*.yaml"))


def namespace(api: TestAPIServer) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    api.kubectl("create", "namespace", name)
    return name


def test_every_crd_is_established(apiserver: TestAPIServer) -> None:
    out = json.loads(apiserver.kubectl("get", "crd", "-o", "json").stdout)
    crds = {c["spec"]["names"]["kind"]: c for c in out["items"]}
    for kind in KINDS:
        conditions = {c["type"]: c["status"] for c in crds[kind]["status"]["conditions"]}
        assert conditions.get("Established") == "True", kind
        assert conditions.get("NamesAccepted") == "True", kind
        assert conditions.get("NonStructuralSchema") is None, kind


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_apply_server_side_and_read_back(apiserver: TestAPIServer, path: Path) -> None:
    ns = namespace(apiserver)
    apiserver.kubectl("apply", "--server-side", "-n", ns, "-f", str(path))
    for doc in read_documents(str(path)):
        plural = KINDS[doc["kind"]].plural
        got = json.loads(apiserver.kubectl(
            "get", f"{plural}.kubeflow.org", doc["metadata"]["name"], "-n", ns, "-o", "json"
        ).stdout)
        assert got["spec"] == doc["spec"]  # nothing pruned, nothing changed


@pytest.mark.parametrize(("change", "field"), [
    (lambda d: d["spec"]["pytorchReplicaSpecs"]["Worker"].update(replicas="two"),
     "spec.pytorchReplicaSpecs.Worker.replicas"),
    (lambda d: d["spec"]["pytorchReplicaSpecs"]["Worker"].update(restartPolicy="Sometimes"),
     "spec.pytorchReplicaSpecs.Worker.restartPolicy"),
    (lambda d: d["spec"].update(runPolicy={"cleanPodPolicy": "Later"}),
     "spec.runPolicy.cleanPodPolicy"),
    (lambda d: d["spec"].update(runPolicy={"suspend": "yes"}), "spec.runPolicy.suspend"),
    (lambda d: d["spec"].update(elasticPolicy={"minReplicas": "1"}),
     "spec.elasticPolicy.minReplicas"),
    (lambda d: d["spec"].update(runPolicy={"restartScope": "Everything"}),
     "spec.runPolicy.restartScope"),
])
def test_schema_rejects_what_it_can_tell(apiserver: TestAPIServer, change: Any,
                                         field: str) -> None:
    ns = namespace(apiserver)
    doc = manifest("PyTorchJob", {"Master": 1, "Worker": 2}, namespace=ns)
    del doc["metadata"]["uid"]
    change(doc)
    out = apiserver.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump(doc),
                            check=False)
    assert out.returncode != 0
    assert field in out.stderr, out.stderr


def test_status_and_scale_subresources(apiserver: TestAPIServer) -> None:
    ns = namespace(apiserver)
    doc = manifest("PyTorchJob", {"Master": 1, "Worker": 2}, namespace=ns, name="scaled")
    del doc["metadata"]["uid"]
    apiserver.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump(doc))
    apiserver.kubectl("scale", "pytorchjob", "scaled", "-n", ns, "--replicas=5")
    got = json.loads(apiserver.kubectl("get", "pytorchjob", "scaled", "-n", ns,
                                       "-o", "json").stdout)
    assert got["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 5
    # status is a subresource: a write to the main resource does not change it
    doc["status"] = {"conditions": [{"type": "Running", "status": "True"}]}
    apiserver.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-",
                      input=yaml.safe_dump(doc))
    got = json.loads(apiserver.kubectl("get", "pytorchjob", "scaled", "-n", ns,
                                       "-o", "json").stdout)
    assert "status" not in got or not got["status"].get("conditions")
