"""MultiKueue: a manager cluster whose Kueue dispatches jobs to a worker cluster. On the
manager, Kueue's webhook sets `runPolicy.managedBy: kueue.x-k8s.io/multikueue` and Kueue
writes the job's status itself (copied from the worker): trainop leaves that job alone. On
the worker, the copy has no managedBy and is trainop's to run. And, for the kinds trainop
queues itself (--kueue-workloads), the same through MultiKueue's generic adapter, which
reads and clears trainop's `spec.managedBy`."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from testbed import kueue
from testbed.apiserver import TestAPIServer
from tests.integration.kube import Kube, wait_for
from tests.jobs import TYPICAL
from tests.kueue.conftest import EXTERNAL_KINDS, external_config, with_kueue
from tests.kueue.queues import API, Queues
from tests.kueue.test_kueue import (
    V2BETA1,
    mpijob_v2beta1,
    pods_of,
    queued,
    run,
    wait_pods_of,
)
from trainop.engine.queueing import PREBUILT_LABEL

pytestmark = pytest.mark.kueue

MULTIKUEUE = "kueue.x-k8s.io/multikueue"


def connect(manager: TestAPIServer, worker: TestAPIServer) -> None:
    """Make `worker` the MultiKueue worker cluster `worker` of `manager`'s Kueue (by a
    kubeconfig in a Secret, as MultiKueue reads it), behind the AdmissionCheck `workers`."""
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "worker",
        "clusters": [{"name": "worker", "cluster": {
            "server": worker.url, "certificate-authority-data":
                base64.b64encode(worker.ca_file.read_bytes()).decode()}}],
        "users": [{"name": "worker", "user": {"token": worker.admin_token}}],
        "contexts": [{"name": "worker", "context": {"cluster": "worker", "user": "worker"}}]}
    docs = [
        {"apiVersion": "v1", "kind": "Secret",
         "metadata": {"name": "worker", "namespace": kueue.NAMESPACE},
         "stringData": {"kubeconfig": yaml.safe_dump(config)}},
        {"apiVersion": API, "kind": "MultiKueueCluster", "metadata": {"name": "worker"},
         "spec": {"clusterSource": {"kubeConfig": {
             "locationType": "Secret", "location": "worker"}}}},
        {"apiVersion": API, "kind": "MultiKueueConfig", "metadata": {"name": "workers"},
         "spec": {"clusters": ["worker"]}},
        {"apiVersion": API, "kind": "AdmissionCheck", "metadata": {"name": "workers"},
         "spec": {"controllerName": MULTIKUEUE, "parameters": {
             "apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "workers"}}}]
    manager.kubectl("apply", "--server-side", "-f", "-",
                    input="---\n".join(yaml.safe_dump(d) for d in docs))
    wait_for("the worker cluster connected", lambda: manager.kubectl(
        "get", "multikueuecluster", "worker", "-o",
        "jsonpath={.status.conditions[?(@.type==\"Active\")].status}",
        check=False).stdout == "True", timeout=60)


def manager_of(worker: TestAPIServer, logs: Path, *flags: str, name: str,
               config: dict[str, Any], released: bool = False) -> Iterator[TestAPIServer]:
    """A manager cluster: another API server with trainop (`flags`) and a Kueue whose
    MultiKueue dispatches to `worker`."""
    started = with_kueue(logs, *flags, name=name, config=config, released=released)
    api = next(started)
    try:
        connect(api, worker)
        yield api
    finally:
        started.close()


@pytest.fixture(scope="module")
def manager_cluster(cluster: TestAPIServer, tmp_path_factory: pytest.TempPathFactory
                    ) -> Iterator[TestAPIServer]:
    """The manager cluster of the suite's cluster (Kueue's built-in integrations)."""
    yield from manager_of(cluster, tmp_path_factory.mktemp("multikueue"),
                          name="kueue-manager", config={})


@pytest.fixture(scope="module")
def external_manager(external: TestAPIServer, tmp_path_factory: pytest.TempPathFactory
                     ) -> Iterator[TestAPIServer]:
    """The manager cluster of the `external` cluster: Kueue as released plus the README's
    lines, MultiKueue's generic adapter for the kinds trainop keeps Workloads of included."""
    yield from manager_of(external, tmp_path_factory.mktemp("multikueue-external"),
                          "--kueue-workloads", "all", name="kueue-external-manager",
                          released=True, config=external_config(multikueue=True))


def test_a_job_dispatched_by_multikueue_runs_on_the_worker_only(
        manager_cluster: TestAPIServer, kube: Kube, queues: Queues) -> None:
    # the same namespace and LocalQueue on both clusters, as MultiKueue requires
    local = Kube(manager_cluster, kube.ns)
    queues.create()
    Queues(local).create(admission_checks=["workers"])
    doc = queued("PyTorchJob", spec={"runPolicy": {"startupDeadlineSeconds": 600}})
    doc["spec"]["pytorchReplicaSpecs"]["Worker"].update(restartLimit=3,
                                                        restartPolicy="ExitCode")
    local.apply(doc)

    job = local.job("PyTorchJob", "job")
    assert job["spec"]["runPolicy"]["managedBy"] == MULTIKUEUE  # Kueue's webhook set it
    # the worker's copy: no managedBy, so trainop there runs it
    wait_pods_of(kube, "job", 3, timeout=60)
    remote = kube.job("PyTorchJob", "job")
    assert "managedBy" not in remote["spec"]["runPolicy"]
    # Kueue copies the job through upstream's Go types: trainop's own fields are not there
    assert "startupDeadlineSeconds" not in remote["spec"]["runPolicy"]
    assert "restartLimit" not in remote["spec"]["pytorchReplicaSpecs"]["Worker"]
    run(kube, "PyTorchJob", "job")
    kube.set_pod("job-worker-0", "Failed", exit_code=137)  # restarted: retryable
    wait_for("the restart in the worker's status", lambda: kube.job("PyTorchJob", "job")[
        "status"].get("lastFailure"))
    assert kube.job("PyTorchJob", "job")["status"]["replicaStatuses"]["Worker"][
        "restarts"] == 1
    wait_for("the worker remade", lambda: (kube.get("pod", "job-worker-0") or {}).get(
        "status", {}).get("phase") == "Pending")
    run(kube, "PyTorchJob", "job")
    for pod in pods_of(kube, "job"):
        kube.set_pod(pod["metadata"]["name"], "Succeeded", exit_code=0)

    # The worker's job succeeds; Kueue writes its status onto the manager's job (trainop's
    # words), finishes the manager's Workload and deletes the worker's copy
    copied = local.wait_condition("PyTorchJob", "job", "Succeeded", timeout=60)
    assert copied["message"] == "PyTorchJob job is successfully completed."
    Queues(local).wait_condition("PyTorchJob", "job", "Finished", timeout=60)
    wait_for("the worker's copy deleted", lambda: kube.get("pytorchjobs.kubeflow.org",
                                                           "job") is None, timeout=60)
    # ... through upstream's Go types: trainop's own status fields stayed on the worker
    status = local.job("PyTorchJob", "job")["status"]
    assert "lastFailure" not in status and "restarts" not in status["replicaStatuses"][
        "Worker"]
    assert pods_of(local, "job") == [] and local.names("services") == []
    told = [e["reason"] for e in local.items("events")
            if e["source"].get("component") == "pytorchjob-controller"]
    assert told == []


@pytest.mark.parametrize("clusters", [("manager_cluster", "kube", "queues"),
                                      ("external_manager", "ext_kube", "ext_queues")],
                         ids=["builtin", "released"])
def test_a_v2beta1_mpijob_dispatched_by_multikueue_runs_on_the_worker_only(
        clusters: tuple[str, str, str], request: pytest.FixtureRequest) -> None:
    # on Kueue's built-in configuration, and on its release's (kubeflow.org/mpijob on, the
    # README's lines added); kubernetes-sigs/kueue#13035: a worker cluster must serve
    # MPIJob at v2beta1
    manager, kube, queues = (request.getfixturevalue(name) for name in clusters)
    local = Kube(manager, kube.ns)
    queues.create(cpu="3")
    Queues(local).create(cpu="3", admission_checks=["workers"])
    local.apply(mpijob_v2beta1())
    job = local.get(V2BETA1, "mpi")
    assert job["spec"]["runPolicy"]["managedBy"] == MULTIKUEUE  # Kueue's webhook set it
    wait_pods_of(kube, "mpi", 3, timeout=60)
    assert "managedBy" not in kube.get(V2BETA1, "mpi")["spec"]["runPolicy"]
    run(kube, "MPIJob", "mpi")
    for pod in pods_of(kube, "mpi"):
        kube.set_pod(pod["metadata"]["name"], "Succeeded", exit_code=0)

    # Not read on the worker: Kueue may copy the status back and delete the worker's copy
    # before a poll there sees it succeed
    copied = local.wait_condition("MPIJob", "mpi", "Succeeded", timeout=60)
    assert copied["message"] == f"MPIJob {kube.ns}/mpi successfully completed."
    Queues(local).wait_condition("MPIJob", "mpi", "Finished", timeout=60)
    wait_for("the worker's copy deleted", lambda: kube.get(V2BETA1, "mpi") is None,
             timeout=60)
    assert pods_of(local, "mpi") == [] and local.names("configmaps") == []
    told = [e["reason"] for e in local.items("events")
            if e["source"].get("component") == "mpijob-controller"]
    assert told == []


@pytest.mark.parametrize("kind", [k for k in EXTERNAL_KINDS if k in ("PyTorchJob", "MXJob")])
def test_multikueue_dispatches_a_job_trainop_queues_through_its_generic_adapter(
        external_manager: TestAPIServer, ext_kube: Kube, ext_queues: Queues,
        kind: str) -> None:
    # On the manager, trainop keeps the job's Workload and leaves the job to MultiKueue
    # (spec.managedBy, which the generic adapter reads); on the worker, the copy (its whole
    # spec, managedBy cleared) is queued against the prebuilt Workload and run by trainop
    kube, local = ext_kube, Kube(external_manager, ext_kube.ns)
    ext_queues.create()
    Queues(local).create(admission_checks=["workers"])
    doc = queued(kind, spec={"managedBy": MULTIKUEUE,
                             "runPolicy": {"startupDeadlineSeconds": 600}})
    local.apply(doc)
    made = Queues(local).wait_workload(kind, "job")
    replicas = sum(TYPICAL[kind].values())  # type: ignore[arg-type]
    wait_pods_of(kube, "job", replicas, timeout=60)
    remote = kube.job(kind, "job")
    assert "managedBy" not in remote["spec"]
    # the generic adapter copies the spec as it is: trainop's own fields too
    assert remote["spec"]["runPolicy"]["startupDeadlineSeconds"] == 600
    # Kueue (WorkloadIdentifierAnnotations, on since v0.18) names it in an annotation
    assert remote["metadata"]["annotations"][PREBUILT_LABEL] == made["metadata"]["name"]
    adopted = Queues(kube).wait_workload(kind, "job")
    assert adopted["metadata"]["name"] == made["metadata"]["name"]
    for pod in pods_of(kube, "job"):
        assert pod["metadata"]["labels"][
            "kueue.x-k8s.io/multikueue-worker-workload-pod"] == "true"
    run(kube, kind, "job")
    for pod in pods_of(kube, "job"):
        kube.set_pod(pod["metadata"]["name"], "Succeeded", exit_code=0)

    # Kueue copies the worker's whole status onto the manager's job, trainop finishes the
    # manager's Workload, and Kueue deletes the worker's copy
    copied = local.wait_condition(kind, "job", "Succeeded", timeout=60)
    assert copied["reason"] == f"{kind}Succeeded"
    assert Queues(local).wait_condition(kind, "job", "Finished", timeout=60)[
        "reason"] == "Succeeded"
    wait_for("the worker's copy deleted", lambda: kube.get(f"{kind.lower()}s.kubeflow.org", "job")
             is None,
             timeout=60)
    assert pods_of(local, "job") == [] and local.names("services") == []
