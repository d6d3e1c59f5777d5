"""trainop's jobs under a real Kueue: queued (suspended by Kueue's webhook), admitted (one
merge patch of suspend and the templates), run, finished, preempted and admitted again,
evicted when not ready in time. Kueue reads only the job's API, decoded with upstream's Go
types, so everything it relies on is checked here as Kueue sees it: its Workload."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from testbed.kueue import QUEUE_LABEL
from tests.integration.kube import REPO, Kube, condition_of, wait_for
from tests.jobs import TYPICAL, manifest
from tests.kueue.conftest import PODS_READY_TIMEOUT
from tests.kueue.queues import QUEUE, Queues
from trainop.api import KINDS

pytestmark = pytest.mark.kueue

KUEUE_KINDS = ("PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob")
"""The kinds Kueue integrates (it has no integration for MPIJob v1)."""


def queued(kind: str, name: str = "job", cpu: str = "1", spec: dict[str, Any] | None = None,
           template: dict[str, Any] | None = None) -> dict[str, Any]:
    """A job of `kind` (its typical replicas) for the LocalQueue QUEUE, each pod asking for
    `cpu` CPUs; `template`: merged into each replica's pod template's spec."""
    doc = manifest(kind, TYPICAL[kind], name=name, spec=spec)
    doc["metadata"]["labels"] = {QUEUE_LABEL: QUEUE}
    for rs in doc["spec"][KINDS[kind].replica_specs_field].values():
        pod = rs["template"]["spec"]
        pod["containers"][0]["resources"] = {"requests": {"cpu": cpu, "memory": "1Gi"}}
        pod.update(copy.deepcopy(template or {}))
    return doc


def pods_of(kube: Kube, job: str) -> list[dict[str, Any]]:
    return [p for p in kube.items("pods")
            if p["metadata"]["labels"].get("training.kubeflow.org/job-name") == job]


def wait_pods_of(kube: Kube, job: str, count: int, timeout: float = 30
                 ) -> list[dict[str, Any]]:
    return wait_for(f"{count} pods of {job}", lambda: (lambda pods: pods if len(pods) == count
                    else None)(pods_of(kube, job)), timeout)


def run(kube: Kube, kind: str, job: str) -> None:
    """Every pod of `job` Running, as a kubelet would report it, until the job is Running."""
    for pod in pods_of(kube, job):
        kube.set_pod(pod["metadata"]["name"], "Running")
    kube.wait_condition(kind, job, "Running")


def succeed(kube: Kube, kind: str, job: str) -> dict[str, Any]:
    for pod in pods_of(kube, job):
        kube.set_pod(pod["metadata"]["name"], "Succeeded", exit_code=0)
    return kube.wait_condition(kind, job, "Succeeded")


def test_a_queued_job_is_suspended_and_nothing_is_made_for_it(
        kube: Kube, queues: Queues) -> None:
    queues.create(cpu="1")  # too little for the job's three pods: it stays queued
    kube.apply(queued("PyTorchJob"))
    workload = queues.wait_workload("PyTorchJob", "job")
    # Kueue's PodSets: one per replica type, named by it in lowercase, in upstream's order
    assert [(ps["name"], ps["count"]) for ps in workload["spec"]["podSets"]] == [
        ("master", 1), ("worker", 2)]
    job = kube.job("PyTorchJob", "job")
    assert job["spec"]["runPolicy"]["suspend"] is True  # Kueue's webhook suspended it
    suspended = kube.wait_condition("PyTorchJob", "job", "Suspended")
    assert suspended["reason"] == "PyTorchJobSuspended"
    pending = wait_for("the Workload pending", lambda: condition_of(
        queues.workload("PyTorchJob", "job"), "QuotaReserved", "False"))
    assert pending["reason"] == "Pending"
    assert kube.names("pods") == [] and kube.names("services") == []


def test_admission_reaches_every_pod_through_trainops_webhook(
        kube: Kube, queues: Queues) -> None:
    toleration = {"key": "pool", "operator": "Equal", "value": "a", "effect": "NoSchedule"}
    queues.create(flavor={"nodeLabels": {"pool": "a"}, "tolerations": [toleration]})
    kube.apply(queued("PyTorchJob"))
    pods = wait_pods_of(kube, "job", 3)
    # Kueue's admission is one merge patch of the job (through trainop's webhook, which
    # failed closed would have refused it): unsuspended, each template given the flavor
    assert kube.job("PyTorchJob", "job")["spec"]["runPolicy"]["suspend"] is False
    workload = queues.wait_condition("PyTorchJob", "job", "Admitted")
    assert workload["reason"] == "Admitted"
    for pod in pods:
        labels, spec = pod["metadata"]["labels"], pod["spec"]
        rtype = labels["training.kubeflow.org/replica-type"]
        assert spec["nodeSelector"] == {"pool": "a"}
        assert toleration in spec["tolerations"]
        assert labels["kueue.x-k8s.io/podset"] == rtype  # lowercase, as Kueue names PodSets
        # what Kueue's TAS orders ranks by, and kueuectl selects pods on
        assert labels["training.kubeflow.org/replica-index"] in ("0", "1")
        assert labels["training.kubeflow.org/job-name"] == "job"
        assert labels["training.kubeflow.org/operator-name"] == "pytorchjob-controller"
    assert sorted(p["metadata"]["labels"]["training.kubeflow.org/replica-type"]
                  for p in pods) == ["master", "worker", "worker"]


@pytest.mark.parametrize("kind", KUEUE_KINDS)
def test_every_kind_is_admitted_runs_and_finishes(kube: Kube, queues: Queues,
                                                  kind: str) -> None:
    queues.create()
    kube.apply(queued(kind))
    replicas = sum(TYPICAL[kind].values())  # type: ignore[arg-type]
    wait_pods_of(kube, "job", replicas)
    run(kube, kind, "job")
    # waitForPodsReady reads the job's Running condition
    assert queues.wait_condition(kind, "job", "PodsReady")["reason"] == "Started"
    succeeded = succeed(kube, kind, "job")
    finished = queues.wait_condition(kind, "job", "Finished")
    assert (finished["reason"], finished["message"]) == ("Succeeded", succeeded["message"])


def test_a_failed_job_finishes_its_workload_with_the_failure(kube: Kube,
                                                             queues: Queues) -> None:
    queues.create()
    kube.apply(queued("PyTorchJob", spec={"runPolicy": {"backoffLimit": 0}}, template={
        "restartPolicy": "Never"}))
    wait_pods_of(kube, "job", 3)
    run(kube, "PyTorchJob", "job")
    kube.set_pod("job-master-0", "Failed", exit_code=1)
    failed = kube.wait_condition("PyTorchJob", "job", "Failed")
    finished = queues.wait_condition("PyTorchJob", "job", "Finished")
    assert (finished["reason"], finished["message"]) == ("Failed", failed["message"])


def priority_class(kube: Kube, name: str, value: int) -> None:
    kube.api.kubectl("create", "priorityclass", name, f"--value={value}")


def test_a_preempted_job_stops_frees_its_quota_and_runs_again(
        kube: Kube, queues: Queues) -> None:
    low, high = f"{kube.ns}-low", f"{kube.ns}-high"
    priority_class(kube, low, 100)
    priority_class(kube, high, 1000)
    queues.create(cpu="3", preemption={"withinClusterQueue": "LowerPriority"})
    # one priority from schedulingPolicy.priorityClass, one from the first template's
    kube.apply(queued("PyTorchJob", "low", spec={"runPolicy": {"schedulingPolicy": {
        "priorityClass": low}}}))
    wait_pods_of(kube, "low", 3)
    assert queues.wait_workload("PyTorchJob", "low")["spec"]["priority"] == 100
    run(kube, "PyTorchJob", "low")
    first_start = kube.job("PyTorchJob", "low")["status"]["startTime"]

    kube.apply(queued("PyTorchJob", "high", template={"priorityClassName": high}))
    assert queues.wait_workload("PyTorchJob", "high")["spec"]["priority"] == 1000
    evicted = queues.wait_condition("PyTorchJob", "low", "Evicted")
    assert evicted["reason"] == "Preempted"
    # Kueue suspends it; trainop deletes its pods and counts none active, which is what
    # Kueue waits for to release the quota
    wait_for("the low job's pods gone", lambda: pods_of(kube, "low") == [])
    job = kube.job("PyTorchJob", "low")
    assert job["spec"]["runPolicy"]["suspend"] is True
    assert {t: rs.get("active", 0) for t, rs in job["status"]["replicaStatuses"].items()
            } == {"Master": 0, "Worker": 0}
    running = next(c for c in job["status"]["conditions"] if c["type"] == "Running")
    assert running["status"] == "False"
    # Kueue put the template back as it was before admission
    template = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]
    assert "kueue.x-k8s.io/podset" not in (template.get("metadata") or {}).get("labels", {})

    wait_pods_of(kube, "high", 3)
    run(kube, "PyTorchJob", "high")
    succeed(kube, "PyTorchJob", "high")
    queues.wait_condition("PyTorchJob", "high", "Finished")

    # admitted again: new pods from the template as Kueue patched it this time
    pods = wait_pods_of(kube, "low", 3, timeout=60)
    assert all(p["metadata"]["labels"]["kueue.x-k8s.io/podset"] in ("master", "worker")
               for p in pods)
    run(kube, "PyTorchJob", "low")
    assert kube.job("PyTorchJob", "low")["status"]["startTime"] > first_start
    succeed(kube, "PyTorchJob", "low")
    assert queues.wait_condition("PyTorchJob", "low", "Finished")["reason"] == "Succeeded"


def test_a_job_not_ready_in_time_is_evicted_and_stopped(kube: Kube, queues: Queues) -> None:
    queues.create()
    kube.apply(queued("PyTorchJob"))
    wait_pods_of(kube, "job", 3)  # and left Pending: the job never turns Running
    evicted = queues.wait_condition("PyTorchJob", "job", "Evicted",
                                    timeout=PODS_READY_TIMEOUT + 60)
    assert evicted["reason"] == "PodsReadyTimeout"
    wait_for("the pods gone", lambda: pods_of(kube, "job") == [])
    job = kube.wait_condition("PyTorchJob", "job", "Suspended")
    assert job["reason"] == "PyTorchJobSuspended"
    status = kube.job("PyTorchJob", "job")["status"]
    assert all(rs.get("active", 0) == 0 for rs in status["replicaStatuses"].values())


V2BETA1 = "mpijobs.v2beta1.kubeflow.org"


def mpijob_v2beta1(name: str = "mpi", cpu: str = "1",
                   run_policy: dict[str, Any] | None = None) -> dict[str, Any]:
    """The v2beta1 example's MPIJob (a launcher, two workers) for the LocalQueue QUEUE, each
    pod asking for `cpu` CPUs."""
    doc = yaml.safe_load((REPO / "examples" / "mpi-v2beta1.yaml").read_text())
    doc["metadata"] = {"name": name, "labels": {QUEUE_LABEL: QUEUE}}
    doc["spec"]["runPolicy"].update(run_policy or {})
    for rs in doc["spec"]["mpiReplicaSpecs"].values():
        rs["template"]["spec"]["containers"][0]["resources"] = {
            "requests": {"cpu": cpu, "memory": "1Gi"}}
    return dict(doc)


def test_a_v2beta1_mpijob_is_queued_admitted_run_and_finished(
        kube: Kube, queues: Queues) -> None:
    queues.create(cpu="2")  # too little for its three pods: it stays queued
    kube.apply(mpijob_v2beta1())
    workload = queues.wait_workload("MPIJob", "mpi")
    # Kueue reads it at v2beta1 (through trainop's conversion): its PodSets
    assert [(ps["name"], ps["count"]) for ps in workload["spec"]["podSets"]] == [
        ("launcher", 1), ("worker", 2)]
    assert kube.get(V2BETA1, "mpi")["spec"]["runPolicy"]["suspend"] is True
    assert kube.wait_condition("MPIJob", "mpi", "Suspended")["reason"] == "MPIJobSuspended"
    pending = wait_for("the Workload pending", lambda: condition_of(
        queues.workload("MPIJob", "mpi"), "QuotaReserved", "False"))
    assert pending["reason"] == "Pending"
    assert pods_of(kube, "mpi") == []

    queues.create(cpu="3")  # now it fits
    pods = wait_pods_of(kube, "mpi", 3)
    assert queues.wait_condition("MPIJob", "mpi", "Admitted")["reason"] == "Admitted"
    assert kube.get(V2BETA1, "mpi")["spec"]["runPolicy"]["suspend"] is False
    assert sorted(p["metadata"]["labels"]["kueue.x-k8s.io/podset"] for p in pods) == [
        "launcher", "worker", "worker"]
    run(kube, "MPIJob", "mpi")
    assert queues.wait_condition("MPIJob", "mpi", "PodsReady")["reason"] == "Started"
    succeeded = succeed(kube, "MPIJob", "mpi")
    finished = queues.wait_condition("MPIJob", "mpi", "Finished")
    assert (finished["reason"], finished["message"]) == ("Succeeded", succeeded["message"])


def test_a_preempted_v2beta1_mpijob_stops_and_runs_again(kube: Kube, queues: Queues) -> None:
    low, high = f"{kube.ns}-low", f"{kube.ns}-high"
    priority_class(kube, low, 100)
    priority_class(kube, high, 1000)
    queues.create(cpu="3", preemption={"withinClusterQueue": "LowerPriority"})
    kube.apply(mpijob_v2beta1("low", run_policy={"schedulingPolicy": {"priorityClass": low}}))
    wait_pods_of(kube, "low", 3)
    assert queues.wait_workload("MPIJob", "low")["spec"]["priority"] == 100
    run(kube, "MPIJob", "low")

    kube.apply(queued("PyTorchJob", "high", template={"priorityClassName": high}))
    assert queues.wait_condition("MPIJob", "low", "Evicted")["reason"] == "Preempted"
    # Kueue suspends it at v2beta1; trainop deletes its pods and counts none active, which
    # is what Kueue waits for (IsActive reads replicaStatuses) to release the quota
    wait_for("the low job's pods gone", lambda: pods_of(kube, "low") == [])
    job = kube.get(V2BETA1, "low")
    assert job["spec"]["runPolicy"]["suspend"] is True
    assert {t: rs.get("active", 0) for t, rs in job["status"]["replicaStatuses"].items()
            } == {"Launcher": 0, "Worker": 0}
    wait_pods_of(kube, "high", 3)
    run(kube, "PyTorchJob", "high")
    succeed(kube, "PyTorchJob", "high")

    pods = wait_pods_of(kube, "low", 3, timeout=60)  # admitted again
    assert sorted(p["metadata"]["labels"]["kueue.x-k8s.io/podset"] for p in pods) == [
        "launcher", "worker", "worker"]
    run(kube, "MPIJob", "low")
    succeed(kube, "MPIJob", "low")
    assert queues.wait_condition("MPIJob", "low", "Finished")["reason"] == "Succeeded"


def test_a_v1_mpijob_is_queued_as_well(kube: Kube, queues: Queues) -> None:
    # Kueue's MPIJob integration reads and writes v2beta1, and the API server converts a
    # v1 job for it (its webhooks' matchPolicy is Equivalent): a v1 MPIJob labelled for a
    # queue is queued too
    queues.create(cpu="2")  # too little for its three pods
    kube.apply(queued("MPIJob", "mpi"))
    workload = queues.wait_workload("MPIJob", "mpi")
    assert [(ps["name"], ps["count"]) for ps in workload["spec"]["podSets"]] == [
        ("launcher", 1), ("worker", 2)]
    assert kube.job("MPIJob", "mpi")["spec"]["runPolicy"]["suspend"] is True
    wait_for("the Workload pending", lambda: condition_of(
        queues.workload("MPIJob", "mpi"), "QuotaReserved", "False"))
    assert pods_of(kube, "mpi") == []
    queues.create(cpu="3")
    wait_pods_of(kube, "mpi", 3)
    assert kube.job("MPIJob", "mpi")["spec"]["runPolicy"]["suspend"] is False
