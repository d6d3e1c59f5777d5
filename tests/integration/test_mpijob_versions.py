"""One MPIJob CRD serving v1 (stored) and mpi-operator's v2beta1, converted by the
manager's webhook, on a real kube-apiserver: a job written at either version reads at both,
what one version lacks survives the other, a v2beta1 job runs, and the shipped RBAC lets
the manager give the CRD its CA."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from testbed.apiserver import TestAPIServer
from tests.conftest import CRDS, SA_GROUPS, SA_TOKEN, SA_USER
from tests.integration.kube import REPO, Kube, converting_manager, install_rbac, wait_for
from trainop.api.conversion import WRITTEN_IN, fields_annotation

pytestmark = pytest.mark.integration
CRD = "mpijobs.kubeflow.org"
V1, V2 = "mpijobs.v1.kubeflow.org", "mpijobs.v2beta1.kubeflow.org"
TEMPLATE = {"spec": {"containers": [{"name": "mpi", "image": "mpi:1"}]}}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestAPIServer]:
    """An API server of its own (its MPIJob CRD converts through this module's manager),
    with the install's CRDs and RBAC; the manager runs as the install's ServiceAccount."""
    tmp = tmp_path_factory.mktemp("versions")
    with TestAPIServer(users={SA_TOKEN: (SA_USER, SA_GROUPS)}) as api:
        api.kubectl("apply", "--server-side", "-k", str(CRDS))
        api.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        install_rbac(api)
        manager = converting_manager(api, tmp)
        try:
            api.manager_log = manager.log  # type: ignore[attr-defined]
            yield api
        finally:
            manager.stop()


def apply(kube: Kube, doc: dict[str, Any]) -> None:
    doc = json.loads(json.dumps(doc))
    doc["metadata"]["namespace"] = kube.ns
    kube.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump(doc))


def read(kube: Kube, version: str, name: str) -> dict[str, Any]:
    return dict(json.loads(kube.kubectl("get", version, name, "-o", "json")))


def test_a_v2beta1_job_reads_at_v1_as_written_in_v2beta1(cluster: TestAPIServer) -> None:
    kube = Kube(cluster)
    apply(kube, {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
                 "metadata": {"name": "pi"},
                 "spec": {"slotsPerWorker": 2, "mpiImplementation": "Intel",
                          "mpiReplicaSpecs": {"Launcher": {"replicas": 1, "template": TEMPLATE},
                                              "Worker": {"replicas": 2, "template": TEMPLATE}}}})
    at_v1 = read(kube, V1, "pi")
    assert at_v1["apiVersion"] == "kubeflow.org/v1"
    assert at_v1["metadata"]["annotations"] == {WRITTEN_IN: "v2beta1"}
    # mpi-operator's CRD defaults, then what the v1 form says the v2beta1 API leaves unsaid
    assert {k: v for k, v in at_v1["spec"].items() if k != "mpiReplicaSpecs"} == {
        "slotsPerWorker": 2, "mpiImplementation": "Intel", "launcherCreationPolicy":
        "AtStartup", "runLauncherAsWorker": False, "sshAuthMountPath": "/root/.ssh",
        "transport": "SSH"}
    at_v2 = read(kube, V2, "pi")
    assert "annotations" not in at_v2["metadata"]
    assert at_v2["spec"]["mpiImplementation"] == "Intel"
    # and trainop runs it, as the SSH design it was written in: a key, no kubectl
    wait_for("the job's workers", lambda: kube.names("pods") == ["pi-worker-0", "pi-worker-1"]
             or None)
    # its launcher is mpi-operator's batch/v1 Job (its pod is the Job controller's to make)
    launcher = wait_for("its launcher Job", lambda: kube.get("jobs.batch", "pi-launcher"))
    assert launcher["spec"]["template"]["metadata"]["labels"][
        "training.kubeflow.org/job-role"] == "launcher"
    assert kube.get("secret", "pi-ssh") is not None
    hostfile = kube.get("configmap", "pi-config")["data"]["hostfile"]
    assert hostfile == (f"pi-worker-0.pi.{kube.ns}.svc:2\npi-worker-1.pi.{kube.ns}.svc:2\n")
    assert read(kube, V2, "pi")["status"]["conditions"][0]["type"] == "Created"


def test_v1_fields_survive_a_v2beta1_client(cluster: TestAPIServer) -> None:
    kube = Kube(cluster)
    apply(kube, {"apiVersion": "kubeflow.org/v1", "kind": "MPIJob",
                 "metadata": {"name": "old"},
                 "spec": {"mainContainer": "mpi", "runPolicy": {"suspend": True,
                                                                "restartScope": "Job"},
                          "mpiReplicaSpecs": {
                              "Launcher": {"replicas": 1, "template": TEMPLATE},
                              "Worker": {"replicas": 1, "restartLimit": 2,
                                         "template": TEMPLATE}}}})
    at_v2 = read(kube, V2, "old")
    annotations = at_v2["metadata"]["annotations"]
    assert annotations[WRITTEN_IN] == "v1"
    assert json.loads(annotations[fields_annotation("v1")]) == {"spec": {
        "mainContainer": "mpi", "runPolicy": {"restartScope": "Job"},
        "mpiReplicaSpecs": {"Worker": {"restartLimit": 2}}}}
    assert "mainContainer" not in at_v2["spec"]
    # a v2beta1 client (Kueue's MPIJob integration) resumes it: a write at v2beta1
    at_v2["spec"]["runPolicy"]["suspend"] = False
    kube.kubectl("replace", "-f", "-", input=json.dumps(at_v2))
    at_v1 = read(kube, V1, "old")
    assert at_v1["spec"]["runPolicy"] == {"suspend": False, "restartScope": "Job"}
    assert at_v1["spec"]["mainContainer"] == "mpi"
    assert at_v1["spec"]["mpiReplicaSpecs"]["Worker"]["restartLimit"] == 2
    assert "annotations" not in at_v1["metadata"]


def test_a_field_of_the_other_version_is_refused_by_the_api_server(
        cluster: TestAPIServer) -> None:
    kube = Kube(cluster)
    doc = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
           "metadata": {"name": "mixed", "namespace": kube.ns},
           "spec": {"mainContainer": "mpi", "mpiReplicaSpecs": {
               "Launcher": {"replicas": 1, "template": TEMPLATE}}}}
    created = cluster.kubectl("create", "-f", "-", input=yaml.safe_dump(doc), check=False)
    assert created.returncode != 0
    assert 'unknown field "spec.mainContainer"' in created.stderr, created.stderr
    applied = cluster.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump(doc),
                              check=False)
    assert applied.returncode != 0
    assert ".spec.mainContainer: field not declared in schema" in applied.stderr
    assert kube.get(V1, "mixed") is None


def test_a_conversion_that_cannot_be_done_is_refused_and_nothing_is_stored(
        cluster: TestAPIServer) -> None:
    kube = Kube(cluster)
    doc = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
           "metadata": {"name": "bad", "namespace": kube.ns,
                        "annotations": {fields_annotation("v1"): "{not json"}},
           "spec": {"mpiReplicaSpecs": {"Launcher": {"replicas": 1, "template": TEMPLATE}}}}
    out = cluster.kubectl("create", "-f", "-", input=yaml.safe_dump(doc), check=False)
    assert out.returncode != 0
    assert "trainop.kubeflow.org/v1-fields is not JSON" in out.stderr, out.stderr
    assert kube.get(V1, "bad") is None


def test_the_manager_gave_the_crd_its_ca_as_the_installs_service_account(
        cluster: TestAPIServer, tmp_path: Path) -> None:
    # the fixture's manager runs with the install's RBAC and no more
    crd = json.loads(cluster.kubectl("get", "crd", CRD, "-o", "json").stdout)
    assert crd["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"]
    assert "CA bundle patched into the conversion webhook of CRD mpijobs.kubeflow.org" in \
        cluster.manager_log()  # type: ignore[attr-defined]


def test_the_v2beta1_example_applies_and_reads_back(cluster: TestAPIServer) -> None:
    kube = Kube(cluster)
    path = REPO / "trainop" / "examples" / "mpi-v2beta1.yaml"
    kube.kubectl("apply", "--server-side", "-f", str(path))
    written = yaml.safe_load(path.read_text())
    got = read(kube, V2, written["metadata"]["name"])
    # nothing pruned, nothing changed; added only what mpi-operator's schema defaults
    assert got["spec"] == {**written["spec"], "launcherCreationPolicy": "AtStartup",
                           "mpiImplementation": "OpenMPI", "runLauncherAsWorker": False,
                           "sshAuthMountPath": "/root/.ssh",
                           "runPolicy": {**written["spec"]["runPolicy"], "suspend": False}}


def test_the_manager_runs_over_an_mpijob_crd_that_converts_nothing(tmp_path: Path) -> None:
    # a cluster whose MPIJob CRD serves v1 only (an install before v2beta1, or
    # training-operator's CRD kept): the manager has no CA to give it, says so, and runs
    with TestAPIServer() as api:
        api.kubectl("apply", "--server-side", "-k", str(CRDS))
        crd = yaml.safe_load((CRDS / f"kubeflow.org_{CRD.split('.')[0]}.yaml").read_text())
        crd["spec"]["versions"] = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
        crd["spec"]["conversion"] = {"strategy": "None"}
        api.kubectl("replace", "-f", "-", input=yaml.safe_dump(crd))
        api.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        manager = converting_manager(api, tmp_path, crd_converts=False)
        try:
            kube = Kube(api)
            apply(kube, {"apiVersion": "kubeflow.org/v1", "kind": "MPIJob",
                         "metadata": {"name": "pi"}, "spec": {"mpiReplicaSpecs": {
                             "Launcher": {"replicas": 1, "template": TEMPLATE},
                             "Worker": {"replicas": 1, "template": TEMPLATE}}}})
            wait_for("its launcher and worker", lambda: kube.names("pods") == [
                "pi-launcher", "pi-worker-0"])
            assert "CRD mpijobs.kubeflow.org converts no versions (strategy None)" in \
                manager.log_path.read_text()
        finally:
            manager.stop()
