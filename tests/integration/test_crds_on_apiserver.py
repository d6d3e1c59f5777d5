"""The generated CRDs and the examples against a real kube-apiserver."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from testbed.apiserver import TestAPIServer
from tests.jobs import manifest
from trainop.api import KINDS, read_documents
from trainop.api.crd import all_crds

pytestmark = pytest.mark.integration
GENERATED = all_crds()
EXAMPLES = sorted(
    path for path in Path(__file__).resolve().parents[2].joinpath("trainop/examples").glob(
        "*.yaml")
    # v1 only: a v2beta1 job is stored through the manager's conversion, which this shared
    # API server has not (test_mpijob_versions.py applies that one)
    if all(d["apiVersion"] == "kubeflow.org/v1" for d in read_documents(str(path))))


def _with_defaults(value: Any, schema: dict[str, Any]) -> Any:
    """`value` with the defaults of `schema` filled in where a field is left out, as the
    API server fills them."""
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        out = {k: _with_defaults(v, props.get(k) or schema.get("additionalProperties") or {})
               for k, v in value.items()}
        for name, sub in props.items():
            if name not in out and "default" in sub:
                out[name] = sub["default"]
        return out
    if isinstance(value, list):
        return [_with_defaults(v, schema.get("items") or {}) for v in value]
    return value


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
        # nothing pruned, nothing changed; added only what the CRD's schema defaults
        schema = GENERATED[f"kubeflow.org_{plural}.yaml"]["spec"]["versions"][0]["schema"][
            "openAPIV3Schema"]["properties"]["spec"]
        assert got["spec"] == _with_defaults(doc["spec"], schema)


@pytest.mark.parametrize(("change", "field"), [
    (lambda d: d["spec"]["pytorchReplicaSpecs"]["Worker"].update(replicas="two"),
     "spec.pytorchReplicaSpecs.Worker.replicas"),
    (lambda d: d["spec"].update(runPolicy={"suspend": "yes"}), "spec.runPolicy.suspend"),
    (lambda d: d["spec"].update(elasticPolicy={"minReplicas": "1"}),
     "spec.elasticPolicy.minReplicas"),
    # the pod template is a Kubernetes PodTemplateSpec, checked as upstream's CRD checks it:
    # a misspelled field is refused, not dropped, and containers are a map keyed by name
    # (server-side apply merges them so)
    (lambda d: d["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
     .update(imagee="x"),
     '.spec.pytorchReplicaSpecs.Worker.template.spec.containers[name="pytorch"].imagee: '
     "field not declared in schema"),
    (lambda d: d["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
     .update(ports=[{"containerPort": "http"}]),
     '.containers[name="pytorch"].ports[containerPort="http",protocol="TCP"].containerPort: '
     "expected numeric"),
    (lambda d: d["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"].update(
        containers=[{"image": "x"}]),
     '.template.spec.containers: element 0: associative list with keys has an element that '
     'omits all key fields ["name"]'),
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


@pytest.mark.parametrize("change", [
    lambda d: d["spec"]["pytorchReplicaSpecs"]["Worker"].update(restartPolicy="Sometimes"),
    lambda d: d["spec"].update(runPolicy={"cleanPodPolicy": "Later"}),
    lambda d: d["spec"].update(runPolicy={"restartScope": "Everything"}),
])
def test_schema_takes_any_string_where_upstreams_does(apiserver: TestAPIServer,
                                                      change: Any) -> None:
    # upstream's CRDs have no enums: the webhook (or, for kinds it does not cover, the
    # job's Failed condition) names the values, so the schema must not refuse first
    ns = namespace(apiserver)
    doc = manifest("PyTorchJob", {"Master": 1, "Worker": 2}, namespace=ns)
    del doc["metadata"]["uid"]
    change(doc)
    apiserver.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump(doc))


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
