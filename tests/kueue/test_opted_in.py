"""The `opted_in` cluster: Kueue as released, configured to manage jobs that name no queue
too (`manageJobsWithoutQueueName: true`) and trainop started to match: such a job waits
with a Workload that names no queue until it is given one; Kueue's
managedJobsNamespaceSelector (its default: not in kube-system or kueue-system) leaves a
namespace's jobs unqueued, whatever they name. Its Kueue leaves MPIJob to trainop too, and
gives a job less time to turn ready."""

from __future__ import annotations

from typing import Any

import pytest

from testbed.apiserver import TestAPIServer
from tests.integration.kube import Kube, wait_for
from tests.jobs import TYPICAL
from tests.kueue.conftest import OPTED_IN_READY_TIMEOUT
from tests.kueue.queues import QUEUE, Queues
from tests.kueue.test_external import events
from tests.kueue.test_kueue import pods_of, queued, run, succeed, wait_pods_of
from trainop.engine.workload import QUEUE_LABEL

pytestmark = pytest.mark.kueue


def unlabelled(kind: str, name: str = "job") -> dict[str, Any]:
    doc = queued(kind, name)
    del doc["metadata"]["labels"]
    return doc


def test_a_job_naming_no_queue_waits_until_it_is_given_one(opted_in: TestAPIServer) -> None:
    kube = Kube(opted_in)
    queues = Queues(kube)
    queues.create()
    kube.apply(unlabelled("TFJob"))
    made = queues.wait_workload("TFJob", "job")
    assert "queueName" not in made["spec"]
    wait_for("the job suspended", lambda: kube.job("TFJob", "job")["spec"]["runPolicy"].get(
        "suspend"))
    assert pods_of(kube, "job") == [] and queues.condition("TFJob", "job", "Admitted") is None
    said = f"Workload {kube.ns}/{made['metadata']['name']}: LocalQueue  doesn't exist"
    wait_for("why it waits said", lambda: ("Pending", said) in events(kube, "job"))
    # given a queue: the same Workload names it, is admitted, and the job runs to its end
    kube.kubectl("label", "tfjob", "job", f"{QUEUE_LABEL}={QUEUE}")
    admitted = queues.wait_condition("TFJob", "job", "Admitted")
    assert queues.workload("TFJob", "job")["metadata"]["uid"] == made["metadata"]["uid"]
    assert admitted["reason"] == "Admitted"
    wait_pods_of(kube, "job", sum(TYPICAL["TFJob"].values()))  # type: ignore[arg-type]
    run(kube, "TFJob", "job")
    succeed(kube, "TFJob", "job")
    queues.wait_condition("TFJob", "job", "Finished")


def test_a_namespace_kueue_does_not_manage_runs_its_jobs_unqueued(
        opted_in: TestAPIServer) -> None:
    kube = Kube(opted_in, "kube-system", existing=True)
    kube.apply(queued("PyTorchJob", "named"))  # names a queue that is not even there
    kube.apply(unlabelled("PyTorchJob", "unnamed"))
    try:
        for name in ("named", "unnamed"):
            wait_pods_of(kube, name, sum(TYPICAL["PyTorchJob"].values()))  # type: ignore
            assert "suspend" not in kube.job("PyTorchJob", name)["spec"].get("runPolicy", {})
        assert kube.items("workloads.kueue.x-k8s.io") == []
    finally:
        kube.kubectl("delete", "pytorchjobs", "named", "unnamed", "--wait=false")


def test_a_job_not_ready_in_time_gives_its_quota_back_and_is_admitted_again(
        opted_in: TestAPIServer) -> None:
    # Kueue's waitForPodsReady on a Workload trainop keeps: evicted, the job stopped and its
    # quota given back, then requeued after Kueue's back-off, admitted and run again
    kube = Kube(opted_in)
    queues = Queues(kube)
    queues.create()
    kube.apply(queued("JAXJob"))
    replicas = sum(TYPICAL["JAXJob"].values())  # type: ignore[arg-type]
    first = {p["metadata"]["uid"] for p in wait_pods_of(kube, "job", replicas)}
    evicted = queues.wait_condition("JAXJob", "job", "Evicted",
                                    timeout=OPTED_IN_READY_TIMEOUT + 30)
    assert evicted["reason"] == "PodsReadyTimeout"
    assert ("Stopped", evicted["message"]) in events(kube, "job")
    status = kube.wait_condition("JAXJob", "job", "Suspended")
    assert status["reason"] == "JAXJobSuspended"
    # admitted again once Kueue's back-off is over: new pods, and this time they run
    again = wait_for("new pods", lambda: (lambda pods: pods if len(pods) == replicas and not {
        p["metadata"]["uid"] for p in pods} & first else None)(pods_of(kube, "job")),
        timeout=60)
    assert len(again) == replicas
    requeued = queues.condition("JAXJob", "job", "Requeued")
    assert requeued is not None and requeued["reason"] == "BackoffFinished"
    run(kube, "JAXJob", "job")
    succeed(kube, "JAXJob", "job")
    assert queues.wait_condition("JAXJob", "job", "Finished")["reason"] == "Succeeded"
    # counted against nothing: the job's restarts are untouched
    assert "restarts" not in kube.job("JAXJob", "job")["status"]["replicaStatuses"]["Worker"]


def test_an_mpijob_is_queued_through_trainops_workload_where_kueue_leaves_it(
        opted_in: TestAPIServer) -> None:
    # Kueue without its kubeflow.org/mpijob, MPIJob.v1.kubeflow.org among its external
    # frameworks, and --kueue-workloads mpijob: one Workload, trainop's, at v1
    kube = Kube(opted_in)
    queues = Queues(kube)
    queues.create()
    kube.apply(queued("MPIJob"))
    made = queues.wait_workload("MPIJob", "job")
    owner = made["metadata"]["ownerReferences"][0]
    assert (owner["apiVersion"], owner["kind"]) == ("kubeflow.org/v1", "MPIJob")
    assert [ps["name"] for ps in made["spec"]["podSets"]] == ["launcher", "worker"]
    assert len(kube.items("workloads.kueue.x-k8s.io")) == 1
    queues.wait_condition("MPIJob", "job", "Admitted")
    wait_pods_of(kube, "job", sum(TYPICAL["MPIJob"].values()))  # type: ignore[arg-type]
    run(kube, "MPIJob", "job")
    succeed(kube, "MPIJob", "job")
    assert queues.wait_condition("MPIJob", "job", "Finished")["reason"] == "Succeeded"
