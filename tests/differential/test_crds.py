"""trainop's CRDs against upstream's, read from upstream's module: every schema path of
upstream's has the same type, format, list and map types, defaults, required fields and
rules in trainop's (trainop may have more: its own fields, pod fields of a newer
release), with the same names, scope, printer columns and subresources."""

from __future__ import annotations

import json

import pytest

from testbed import kubeschema, mpioperator, upstream
from testbed.apiserver import release
from trainop.api import KINDS
from trainop.api.crd import all_crds
from trainop.api.kubeschema import SCHEMAS_FILE

pytestmark = pytest.mark.differential
OURS = {crd["spec"]["names"]["kind"]: crd for crd in all_crds().values()}


@pytest.fixture(scope="module")
def theirs() -> dict[str, dict[str, object]]:
    return upstream.crds()


def test_upstream_has_the_kinds_trainop_serves_but_mxjob(theirs: dict[str, object]) -> None:
    # v1.9 dropped MXJob's controller and CRD; trainop still serves it
    assert set(theirs) == set(KINDS) - {"MXJob"}


@pytest.mark.parametrize("kind", sorted(set(KINDS) - {"MXJob"}))
def test_the_crd_says_what_upstreams_says(theirs: dict[str, dict[str, object]],
                                          kind: str) -> None:
    paths = upstream.schema_paths(theirs[kind]["spec"]["versions"][0][  # type: ignore[index]
        "schema"]["openAPIV3Schema"])
    assert len(paths) > 1300, "upstream's CRD carries the whole pod template"
    assert upstream.crd_differences(OURS[kind], theirs[kind]) == []


def test_the_comparison_finds_a_difference(theirs: dict[str, dict[str, object]]) -> None:
    ours = json.loads(json.dumps(OURS["PyTorchJob"]))
    spec = ours["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    template = spec["properties"]["pytorchReplicaSpecs"]["additionalProperties"][
        "properties"]["template"]
    del template["properties"]["spec"]["properties"]["containers"]["x-kubernetes-list-type"]
    assert upstream.crd_differences(ours, theirs["PyTorchJob"]) == [
        ".spec.pytorchReplicaSpecs{}.template.spec.containers: "
        "x-kubernetes-list-type None != 'map'"]


def test_a_column_in_the_default_output_is_a_difference(
        theirs: dict[str, dict[str, object]]) -> None:
    ours = json.loads(json.dumps(OURS["TFJob"]))
    columns = ours["spec"]["versions"][0]["additionalPrinterColumns"]
    assert [c["name"] for c in columns if c.get("priority")] == ["Progress"]
    for c in columns:
        c.pop("priority", None)
    assert [d.split(":")[0] for d in upstream.crd_differences(ours, theirs["TFJob"])] == [
        "versions[v1].additionalPrinterColumns"]
    # and a column of priority 1 that is not the one documented
    ours = json.loads(json.dumps(OURS["TFJob"]))
    ours["spec"]["versions"][0]["additionalPrinterColumns"].append(
        {"jsonPath": ".status.startTime", "name": "Started", "type": "date", "priority": 1})
    assert [d.split(":")[0] for d in upstream.crd_differences(ours, theirs["TFJob"])] == [
        "versions[v1].additionalPrinterColumns"]


def test_the_stored_kubernetes_schemas_are_the_suites_release() -> None:
    # what `make crds` would write now, from k8s.io/api of the release the suites run
    stored = json.loads(SCHEMAS_FILE.read_text())
    assert stored["release"] == release()
    assert kubeschema.generate(release()) == stored, "run: make crds"


def test_the_mpijob_crd_serves_what_mpi_operator_serves() -> None:
    # v2beta1 path by path as mpi-operator's CRD, but for two differences: v1 is the version
    # stored (a cluster's v1 jobs stay as they are; a v2beta1 one is converted), and the pod
    # template is the suites' Kubernetes release's (1.37), whose PodSpec has no
    # workloadRef, the alpha field of k8s.io/api v0.35 that mpi-operator builds on (1.37's
    # has schedulingGroup in its place)
    theirs = mpioperator.crd()
    paths = upstream.schema_paths(theirs["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
    assert len(paths) > 1300, "mpi-operator's CRD carries the whole pod template"
    workload_ref = ".spec.mpiReplicaSpecs{}.template.spec.workloadRef"
    assert upstream.crd_differences(OURS["MPIJob"], theirs) == [
        "versions[v2beta1].storage: False != True",
        *(f"{workload_ref}{leaf}: missing"
          for leaf in ("", ".name", ".podGroup", ".podGroupReplicaKey"))]
