"""The engine's job lifecycle: objects, conditions, restarts, limits, cleanup, suspend."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tests.jobs import TYPICAL, job, v2beta1_job
from tests.sim import T0, Cluster
from trainop.api import KINDS, JobStatus
from trainop.api.conversion import WRITTEN_IN
from trainop.engine import EngineConfig, Plan, create_refused
from trainop.engine.objects import PLAN_BYTES, PLAN_OBJECTS, patch_of

ALL = sorted(KINDS)
EXIT_CODE = {"Worker": {"restartPolicy": "ExitCode"}}


def names(plan: Any, kind: str) -> list[str]:
    return [o["metadata"]["name"] for o in plan.to_create if o["kind"] == kind]


def deleted(plan: Any, kind: str = "Pod") -> list[str]:
    return [r.name for r in plan.delete if r.kind == kind]


# -- objects --------------------------------------------------------------------------

def _rtype(pod: str) -> str:
    return "Launcher" if pod.endswith("launcher") else pod.split("-")[1].capitalize()


def test_aggregated_events_name_the_objects_of_a_round() -> None:
    plan = Cluster(job("PyTorchJob"), config=EngineConfig(aggregate_events=True)).step()
    assert [(e.reason, e.message) for e in plan.on_created] == [
        ("SuccessfulCreatePod", "Created 3 pod(s): job-master-0, job-worker-0, job-worker-1"),
        ("SuccessfulCreateService",
         "Created 3 service(s): job-master-0, job-worker-0, job-worker-1")]


@pytest.mark.parametrize("aggregate", [False, True])
def test_every_deletion_is_told_aggregated_or_not(aggregate: bool) -> None:
    c = Cluster(job("PyTorchJob", {"Master": 1, "Worker": 1}, spec={"runPolicy": {
        "cleanPodPolicy": "All"}}), config=EngineConfig(aggregate_events=aggregate))
    c.step()
    c.all("Running")
    c.step()
    c.set("job-master-0", phase="Succeeded", exit_code=0)
    told = [(e.reason, e.message) for e in c.step().on_removed]
    if aggregate:
        assert told == [
            ("SuccessfulDeletePod", "Deleted 2 pod(s) (job finished): job-master-0, "
                                    "job-worker-0"),
            ("SuccessfulDeleteService", "Deleted 2 service(s) (job finished): job-master-0, "
                                        "job-worker-0")]
    else:  # upstream's, one per object
        assert told == [("SuccessfulDeletePod", "Deleted pod: job-master-0"),
                        ("SuccessfulDeletePod", "Deleted pod: job-worker-0"),
                        ("SuccessfulDeleteService", "Deleted service: job-master-0"),
                        ("SuccessfulDeleteService", "Deleted service: job-worker-0")]


@pytest.mark.parametrize("kind", ALL)
def test_first_reconcile_creates_every_replica(kind: str) -> None:
    c = Cluster(job(kind))
    plan = c.step()
    expected = sorted("job-launcher" if rt == "Launcher" else f"job-{rt.lower()}-{i}"
                      for rt, n in TYPICAL[kind].items() for i in range(n or 0))
    assert sorted(names(plan, "Pod")) == expected
    if kind == "MPIJob":  # training-operator v1's objects (test_mpi_v1.py has them all)
        assert names(plan, "Service") == []
        assert sorted(names(plan, "ConfigMap") + names(plan, "Role")) == [
            "job-config", "job-launcher"]
    else:
        assert sorted(names(plan, "Service")) == expected
    assert c.condition("Created").reason == f"{kind}Created"
    assert c.job.status.start_time == "2026-01-01T00:00:00Z"
    # told once the pods are made, not before (a refused create must not claim them): one
    # event per pod and service, as upstream (pod_control.go:162, service_control.go:106;
    # MPI's workers: mpijob_controller.go:891)
    told = [(e.reason, e.message) for e in plan.on_created]
    pod_word = {"Worker": "worker pod"} if kind == "MPIJob" else {}
    assert sorted(told) == sorted(
        [("SuccessfulCreatePod", f"Created {pod_word.get(_rtype(n), 'pod')}: {n}")
         for n in expected]
        + [("SuccessfulCreateService", f"Created service: {n}")
           for n in (expected if kind != "MPIJob" else [])])
    assert not any(e.reason == "SuccessfulCreatePod" for e in plan.events)
    if kind == "MPIJob":  # what the launcher mounts is made before any pod
        assert {o["kind"] for o in plan.prerequisites} == {
            "ConfigMap", "ServiceAccount", "Role", "RoleBinding"}
    assert {o["kind"] for o in plan.create} <= {"Pod", "Service"}


def test_pod_labels_owner_and_restart_policy() -> None:
    c = Cluster(job("PyTorchJob", uid="u-123"))
    c.step()
    pod = c.pod("job-master-0")
    assert pod["metadata"]["labels"] == {
        "training.kubeflow.org/job-name": "job",
        "training.kubeflow.org/operator-name": "pytorchjob-controller",
        "training.kubeflow.org/replica-type": "master",
        "training.kubeflow.org/replica-index": "0",
        "training.kubeflow.org/job-role": "master",
    }
    assert "training.kubeflow.org/job-role" not in c.pod("job-worker-1")["metadata"]["labels"]
    assert pod["metadata"]["ownerReferences"] == [{
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "job", "uid": "u-123",
        "controller": True, "blockOwnerDeletion": True}]
    assert pod["metadata"]["namespace"] == "default"
    assert pod["spec"]["restartPolicy"] == "OnFailure"


def test_template_labels_and_annotations_are_kept() -> None:
    extra = {"Worker": {"template": {"metadata": {"labels": {"team": "ml"},
                                                  "annotations": {"note": "x"}},
                                     "spec": {"containers": [{"name": "tensorflow",
                                                              "image": "i"}],
                                              "nodeSelector": {"gpu": "yes"}}}}}
    c = Cluster(job("TFJob", {"Worker": 1}, replica_extra=extra))
    c.step()
    pod = c.pod("job-worker-0")
    assert pod["metadata"]["labels"]["team"] == "ml"
    assert pod["metadata"]["annotations"] == {"note": "x"}
    assert pod["spec"]["nodeSelector"] == {"gpu": "yes"}


def test_service_is_headless_and_selects_its_pod() -> None:
    c = Cluster(job("TFJob", {"Worker": 2}))
    plan = c.step()
    svc = next(o for o in plan.create if o["kind"] == "Service"
               and o["metadata"]["name"] == "job-worker-1")
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["selector"]["training.kubeflow.org/replica-index"] == "1"
    assert svc["spec"]["selector"]["training.kubeflow.org/replica-type"] == "worker"
    assert svc["spec"]["ports"] == [{"name": "tfjob-port", "port": 2222, "targetPort": 2222}]
    assert svc["metadata"]["ownerReferences"][0]["kind"] == "TFJob"


@pytest.mark.parametrize(("policy", "pod_policy"), [
    ("Always", "Always"), ("OnFailure", "OnFailure"), ("Never", "Never"),
    ("ExitCode", "Never")])
def test_restart_policy_copied_to_the_pod(policy: str, pod_policy: str) -> None:
    c = Cluster(job("TFJob", {"Worker": 1}, replica_extra={"Worker": {"restartPolicy": policy}}))
    c.step()
    assert c.pod("job-worker-0")["spec"]["restartPolicy"] == pod_policy


# -- steady state and the condition machine -------------------------------------------

@pytest.mark.parametrize("kind", ALL)
def test_steady_state_plans_nothing(kind: str) -> None:
    c = Cluster(job(kind))
    c.step()
    assert c.plan().writes == 0
    c.all("Running", ready=True)
    c.step()
    assert c.last_condition() == "Running"
    again = c.plan()
    assert again.writes == 0 and not again.events and not again.on_created


@pytest.mark.parametrize("kind", ALL)
def test_running_then_succeeded(kind: str) -> None:
    c = Cluster(job(kind))
    c.step()
    c.all("Running", ready=True)
    c.step()
    running = c.condition("Running")
    assert running.status == "True" and running.reason == f"{kind}Running"
    c.advance(30)
    c.all("Succeeded", exit_code=0)
    plan = c.step()
    assert c.last_condition() == "Succeeded"
    assert c.condition("Succeeded").reason == f"{kind}Succeeded"
    assert c.condition("Running").status == "False"
    assert c.job.status.completion_time == "2026-01-01T00:00:30Z"
    assert "Succeeded" in plan.transitions
    assert c.plan().writes == 0


def test_replica_statuses_count_and_select() -> None:
    c = Cluster(job("PyTorchJob"))
    c.step()
    c.set("job-worker-0", phase="Running")
    c.set("job-master-0", phase="Running")
    c.step()
    rs = c.job.status.replica_statuses
    assert (rs["Worker"].active, rs["Worker"].succeeded, rs["Worker"].failed) == (1, 0, 0)
    assert rs["Worker"].selector == (
        "training.kubeflow.org/job-name=job,training.kubeflow.org/operator-name="
        "pytorchjob-controller,training.kubeflow.org/replica-type=worker")
    # upstream writes `selector` for the kinds with a scale subresource only
    # (pkg/controller.v1/pytorch/pytorchjob_controller.go:372), never `labelSelector`
    assert rs["Master"].label_selector is None
    # Running once the Master runs, one worker pending or not
    # (pkg/controller.v1/pytorch/pytorchjob_controller.go:384-388)
    assert c.condition("Running").message == "PyTorchJob job is running."
    tf = Cluster(job("TFJob", {"Worker": 1}))
    tf.step()
    assert tf.job.status.replica_statuses["Worker"].selector is None
    assert tf.job.status.last_reconcile_time is None  # only while a PodGroup holds pods


def test_conditions_keep_the_last_updated_last_and_times() -> None:
    c = Cluster(job("TFJob", {"Worker": 1}, replica_extra={
        "Worker": {"restartPolicy": "ExitCode"}}))
    c.step()
    c.all("Running")
    c.step()
    c.advance(10)
    c.all("Failed", exit_code=137, reason="OOMKilled")
    c.step()
    types = [x.type for x in c.job.status.conditions]
    assert types == ["Created", "Restarting"]  # Restarting replaced Running
    c.step()  # pod recreated
    c.advance(10)
    c.all("Running")
    c.step()
    types = [x.type for x in c.job.status.conditions]
    assert types == ["Created", "Running"]
    running = c.condition("Running")
    assert running.last_transition_time == "2026-01-01T00:00:20Z"


def test_nothing_changes_after_failed() -> None:
    c = Cluster(job("TFJob", {"Worker": 2}))
    c.step()
    c.set("job-worker-0", phase="Failed", exit_code=1)
    c.step()
    assert c.last_condition() == "Failed"
    before = c.job.status.to_dict()
    c.set("job-worker-1", phase="Succeeded")
    c.advance(60)
    assert c.plan().writes == 0
    c.step()
    assert c.job.status.to_dict() == before


# -- restarts ---------------------------------------------------------------------------

def test_exit_code_retryable_restarts_the_pod() -> None:
    c = Cluster(job("TFJob", {"Worker": 2}, replica_extra=EXIT_CODE))
    c.step()
    c.all("Running")
    c.step()
    c.set("job-worker-1", phase="Failed", exit_code=137, reason="OOMKilled")
    plan = c.step()
    assert deleted(plan) == ["job-worker-1"]
    restarting = c.condition("Restarting")
    assert restarting.reason == "TFJobRestarting"
    assert "pod job-worker-1 exited with code 137 (OOMKilled)" in restarting.message
    assert c.job.status.replica_statuses["Worker"].restarts == 1
    assert c.job.status.last_failure.exit_code == 137
    assert c.job.status.last_failure.pod == "job-worker-1"
    assert any(e.type == "Warning" and e.reason == "TFJobRestarting" for e in plan.events)
    plan = c.step()
    assert names(plan, "Pod") == ["job-worker-1"]


@pytest.mark.parametrize("code", [1, 2, 127])
def test_exit_code_permanent_fails_the_job(code: int) -> None:
    c = Cluster(job("TFJob", {"Worker": 2}, replica_extra=EXIT_CODE))
    c.step()
    c.set("job-worker-0", phase="Failed", exit_code=code, reason="Error")
    plan = c.step()
    failed = c.condition("Failed")
    assert failed.reason == "TFJobFailed"
    # upstream's words for a permanent exit code (pkg/controller.v1/common/pod.go:369)
    assert failed.message == ('job "job" is failing because "Worker" replica(s) failed. '
                              f"Last failure: pod job-worker-0 exited with code {code} (Error).")
    assert c.job.status.completion_time is not None
    assert deleted(plan) == []  # cleanPodPolicy None
    assert "Failed" in plan.transitions


@pytest.mark.parametrize("code", [128, 137, 143, 255])
def test_exit_code_signals_are_retryable(code: int) -> None:
    c = Cluster(job("TFJob", {"Worker": 1}, replica_extra=EXIT_CODE))
    c.step()
    c.set("job-worker-0", phase="Failed", exit_code=code)
    c.step()
    assert c.last_condition() == "Restarting"


def test_evicted_pod_under_onfailure_is_recreated() -> None:
    c = Cluster(job("PyTorchJob"))
    c.step()
    c.set("job-worker-0", phase="Failed", reason="Evicted")
    plan = c.step()
    assert deleted(plan) == ["job-worker-0"]
    assert c.last_condition() == "Restarting"
    assert "pod job-worker-0 failed (Evicted)" in c.condition("Restarting").message


def test_never_fails_on_any_failure() -> None:
    c = Cluster(job("XGBoostJob"))
    c.step()
    c.set("job-worker-1", phase="Failed", exit_code=137)
    c.step()
    assert c.last_condition() == "Failed"


def test_terminating_pod_blocks_its_slot() -> None:
    c = Cluster(job("TFJob", {"Worker": 1}, replica_extra=EXIT_CODE))
    c.step()
    c.set("job-worker-0", phase="Failed", exit_code=137, terminating=True)
    plan = c.plan()
    assert plan.create == [] and deleted(plan) == []


@pytest.mark.parametrize("policy", ["Never", "ExitCode", "OnFailure"])
def test_a_pod_being_deleted_counts_against_no_limit_even_if_it_failed(policy: str) -> None:
    # README, Differences: a pod the cluster takes away (evicted through the eviction API,
    # preempted, drained) is made again once gone, and counted nowhere, with no
    # podFailurePolicy and no --ignore-disruptions
    c = Cluster(job("PyTorchJob", replica_extra={"Worker": {"restartPolicy": policy}},
                    spec={"runPolicy": {"backoffLimit": 0}}))
    c.step()
    c.all("Running")
    c.step()
    c.set("job-worker-1", phase="Failed", exit_code=1, terminating=True)
    c.step()
    assert c.last_condition() == "Running"
    assert c.condition("Failed") is None and c.condition("Restarting") is None
    del c.pods["job-worker-1"]  # the deletion completes
    plan = c.step()
    assert [p["metadata"]["name"] for p in plan.to_create if p["kind"] == "Pod"] == [
        "job-worker-1"]
    assert c.last_condition() == "Running"
    assert c.job.status is not None
    assert all(not rs.restarts for rs in (c.job.status.replica_statuses or {}).values())
    assert not [e for p in c.plans for e in p.events if e.type == "Warning"]


# -- limits ---------------------------------------------------------------------------

def test_backoff_limit_counts_container_restarts() -> None:
    c = Cluster(job("PyTorchJob", spec={"runPolicy": {"backoffLimit": 3}}))
    c.step()
    c.all("Running")
    c.set("job-worker-0", restarts=2)
    c.step()
    assert c.last_condition() == "Running"
    c.set("job-worker-1", restarts=1)
    c.step()
    failed = c.condition("Failed")
    # upstream: pkg/controller.v1/common/job.go:210 and :245 (reason <Kind>Failed)
    assert failed.reason == "PyTorchJobFailed"
    assert failed.message.startswith(
        "Job job has failed because it has reached the specified backoff limit")
    assert "backoff limit (3)" in failed.message


def test_a_backoff_failure_in_place_names_the_pod_and_its_last_exit() -> None:
    # Under OnFailure the kubelet restarts the container in place: the pod stays Running,
    # its last exit is in lastState. The failure names that pod, code and reason, and
    # status.lastFailure holds them (before: neither).
    c = Cluster(job("PyTorchJob", spec={"runPolicy": {"backoffLimit": 2}}))
    c.step()
    c.all("Running")
    c.set("job-worker-0", restarts=1, last_run=(1, "Error"))
    c.set("job-worker-1", restarts=2, last_run=(137, "OOMKilled"))
    c.step()
    failed = c.condition("Failed")
    assert failed.message == (
        "Job job has failed because it has reached the specified backoff limit (2); last: "
        "pod job-worker-1 exited with code 137 (OOMKilled).")
    last = c.job.status.last_failure
    assert last is not None
    assert (last.pod, last.replica_type, last.index, last.exit_code, last.reason) == (
        "job-worker-1", "Worker", 1, 137, "OOMKilled")


def test_a_backoff_failure_names_a_pod_still_restarting_not_one_that_ended() -> None:
    # an ended pod's last run is its final one (the kubelet's state.terminated), not a
    # failure: the pod restarting in place is the one to name
    c = Cluster(job("PyTorchJob", spec={"runPolicy": {"backoffLimit": 2}}))
    c.step()
    c.all("Running")
    c.set("job-worker-0", phase="Succeeded", restarts=3, last_run=(0, "Completed"))
    c.set("job-worker-1", restarts=2, last_run=(1, "Error"))
    c.step()
    assert c.condition("Failed").message.endswith(
        "; last: pod job-worker-1 exited with code 1 (Error).")


@pytest.mark.parametrize("policy", ["Running", "None"])
def test_a_failed_jobs_pods_once_gone_are_not_counted_active(policy: str) -> None:
    # Seen on a real node: the job failed with its pods running, cleanup deleted them,
    # and replicaStatuses said `active: 1` for ever after (upstream leaves that count too).
    c = Cluster(job("PyTorchJob", {"Master": 1, "Worker": 1}, spec={
        "runPolicy": {"backoffLimit": 1, "cleanPodPolicy": policy}}))
    c.step()
    c.all("Running")
    c.set("job-worker-0", restarts=1, last_run=(1, "Error"))
    c.step()
    assert c.last_condition() == "Failed"
    c.step()  # the round after: the pods cleanup deleted are gone from what is observed
    statuses = c.job.status.replica_statuses
    if policy == "Running":
        assert not c.pods
        assert {r: s.active for r, s in statuses.items()} == {"Master": 0, "Worker": 0}
    else:  # kept running (cleanPodPolicy None): still active
        assert {r: s.active for r, s in statuses.items()} == {"Master": 1, "Worker": 1}


def test_backoff_limit_zero_fails_on_the_first_restart() -> None:
    c = Cluster(job("PyTorchJob", spec={"runPolicy": {"backoffLimit": 0}}))
    c.step()
    c.all("Running")
    c.step()
    assert c.last_condition() == "Running"
    c.set("job-worker-0", restarts=1)
    c.step()
    assert c.condition("Failed").reason == "PyTorchJobFailed"  # common/job.go:245


def test_backoff_limit_counts_recreations() -> None:
    c = Cluster(job("TFJob", {"Worker": 1}, spec={"runPolicy": {"backoffLimit": 2}},
                    replica_extra={"Worker": {"restartPolicy": "ExitCode"}}))
    c.step()
    for _ in range(2):
        c.set("job-worker-0", phase="Failed", exit_code=137)
        c.step()
        assert c.last_condition() == "Restarting"
        c.step()  # recreated
    c.set("job-worker-0", phase="Failed", exit_code=143)
    c.step()
    failed = c.condition("Failed")
    assert failed.reason == "TFJobFailed"  # upstream: common/job.go:245
    assert failed.message.startswith(  # common/job.go:210, then trainop's facts
        "Job job has failed because it has reached the specified backoff limit (2); last: ")
    assert "pod job-worker-0 exited with code 143" in failed.message
    assert c.job.status.replica_statuses["Worker"].restarts == 2


def test_restart_limit_per_replica_type() -> None:
    c = Cluster(job("TFJob", {"PS": 1, "Worker": 1}, replica_extra={
        "Worker": {"restartPolicy": "ExitCode", "restartLimit": 1},
        "PS": {"restartPolicy": "ExitCode"}}))
    c.step()
    c.set("job-ps-0", phase="Failed", exit_code=137)
    c.step()
    c.step()
    c.set("job-ps-0", phase="Failed", exit_code=137)
    c.step()
    c.step()
    assert c.last_condition() != "Failed"  # PS has no limit
    c.set("job-worker-0", phase="Failed", exit_code=137)
    c.step()
    c.step()
    c.set("job-worker-0", phase="Failed", exit_code=137)
    c.step()
    failed = c.condition("Failed")
    assert failed.reason == "RestartLimitExceeded"
    assert "Worker replicas reached their restart limit (1)" in failed.message


@pytest.mark.parametrize(("policy", "gone"), [
    ("None", []), ("Running", ["job-worker-0", "job-worker-1"])])
def test_active_deadline(policy: str, gone: list[str]) -> None:
    c = Cluster(job("TFJob", {"Worker": 2}, spec={"runPolicy": {
        "activeDeadlineSeconds": 60, "cleanPodPolicy": policy}}))
    plan = c.step()
    assert plan.requeue_after == 60
    c.all("Running")
    c.advance(45)
    plan = c.step()
    assert plan.requeue_after == 15
    c.advance(15)
    plan = c.step()
    failed = c.condition("Failed")
    # upstream: pkg/controller.v1/common/job.go:212 (message) and :245 (reason)
    assert failed.reason == "TFJobFailed"
    assert failed.message == ("Job job has failed because it was active longer than specified "
                              "deadline of 60s.")
    assert c.job.status.completion_time == "2026-01-01T00:01:00Z"
    # the event in upstream's words alone, Normal (job.go:226)
    assert [(e.type, e.message) for e in plan.events if e.reason == "TFJobFailed"] == [
        ("Normal", "Job job has failed because it was active longer than specified deadline")]
    # as the cleanPodPolicy says, as upstream since kubeflow/trainer#3419
    assert sorted(deleted(plan)) == gone
    assert sorted(deleted(plan, "Service")) == gone


def test_ttl_after_finished() -> None:
    c = Cluster(job("TFJob", {"Worker": 1}, spec={"runPolicy": {"ttlSecondsAfterFinished": 100}}))
    c.step()
    c.all("Succeeded")
    plan = c.step()
    assert plan.requeue_after == 100 and not plan.delete_job
    c.advance(40)
    plan = c.step()
    assert plan.requeue_after == 60 and not plan.delete_job and plan.writes == 0
    c.advance(60)
    plan = c.step()
    assert plan.delete_job
    # upstream's event and words, told once the delete is done (not by a retry)
    assert [(e.reason, e.message) for e in plan.on_deleted] == [
        ("SuccessfulDeletePod", "Deleted job: job")]
    assert not any(e.reason == "SuccessfulDeletePod" for e in plan.events)



@pytest.mark.parametrize("how", ["replica", "deadline", "backoff"])
def test_a_failed_job_waits_for_its_ttl_from_the_round_it_fails(how: str) -> None:
    # the round that fails the job asks to come back at the TTL: in a cluster, its own
    # status write brings no other round (the cache holds it), and nothing else may change
    policy: dict[str, Any] = {"ttlSecondsAfterFinished": 100}
    if how == "deadline":
        policy["activeDeadlineSeconds"] = 10
    if how == "backoff":
        policy["backoffLimit"] = 0
    c = Cluster(job("TFJob", {"Worker": 2}, spec={"runPolicy": policy}))
    c.step()
    c.all("Running", ready=True)
    c.step()
    c.advance(20 if how == "deadline" else 5)
    if how != "deadline":
        c.set("job-worker-0", phase="Failed", exit_code=1)
    plan = c.step()
    assert c.last_condition() == "Failed"
    assert plan.requeue_after == 100 and not plan.delete_job
    c.advance(100)
    assert c.step().delete_job


def test_a_refused_create_is_decided_again_at_once() -> None:
    # CreateFailed is written outside a reconcile: the next one cleans up and sets the TTL
    refused = create_refused(Plan(status=JobStatus()), "JAXJob", "ns/j", "taken", T0)
    assert refused.requeue_after == 0


INT64_MAX = 2**63 - 1


@pytest.mark.parametrize("field", ["activeDeadlineSeconds", "ttlSecondsAfterFinished"])
@pytest.mark.parametrize("seconds", [100_000_000_000_000, INT64_MAX], ids=["1e14", "int64-max"])
def test_a_far_deadline_or_ttl_is_just_far(field: str, seconds: int) -> None:
    # Any int64 the CRD admits: the job runs and finishes, is looked at again in a day,
    # and never fails or is deleted for it (no calendar overflow on every reconcile).
    c = Cluster(job("TFJob", {"Worker": 1}, spec={"runPolicy": {field: seconds}}))
    plan = c.step()
    assert plan.requeue_after == (86400 if field == "activeDeadlineSeconds" else None)
    c.all("Running")
    c.advance(10**6)
    c.step()
    assert c.last_condition() == "Running"
    c.all("Succeeded")
    plan = c.step()
    assert c.last_condition() == "Succeeded"
    assert not plan.delete_job and plan.requeue_after == 86400


# -- cleanup ----------------------------------------------------------------------------

@pytest.mark.parametrize(("policy", "expected"), [
    ("None", []),
    ("Running", ["job-ps-0"]),
    ("All", ["job-chief-0", "job-ps-0", "job-worker-0"]),
], ids=["None", "Running", "All"])
def test_clean_pod_policy_on_success(policy: str, expected: list[str]) -> None:
    c = Cluster(job("TFJob", {"Chief": 1, "PS": 1, "Worker": 1},
                    spec={"runPolicy": {"cleanPodPolicy": policy}}))
    c.step()
    c.all("Running")
    c.step()
    c.set("job-chief-0", phase="Succeeded")
    c.set("job-worker-0", phase="Succeeded")
    plan = c.step()
    assert c.last_condition() == "Succeeded"
    assert sorted(deleted(plan)) == expected
    assert sorted(deleted(plan, "Service")) == expected
    # the PS still active counts as succeeded, as upstream counts it
    # (pkg/controller.v1/common/job.go:131-135) on the round after, which its own status
    # write brings about; trainop's cache holds its write, so no round follows: at once
    ps = c.job.status.replica_statuses["PS"]
    assert (ps.active, ps.succeeded) == (0, 1)
    assert plan.status_changed
    c.step()
    ps = c.job.status.replica_statuses["PS"]
    assert (ps.active, ps.succeeded) == (0, 1)  # counted once
    assert c.plan().writes == 0


@pytest.mark.parametrize("policy", ["Running", "All"])
def test_clean_pod_policy_holds_when_a_limit_fails_the_job(policy: str) -> None:
    c = Cluster(job("PyTorchJob", spec={"runPolicy": {"cleanPodPolicy": policy,
                                                      "backoffLimit": 1}}))
    c.step()
    c.all("Running")
    c.set("job-worker-0", restarts=1)
    plan = c.step()
    assert c.condition("Failed").reason == "PyTorchJobFailed"
    assert sorted(deleted(plan)) == ["job-master-0", "job-worker-0", "job-worker-1"]


# -- suspend ----------------------------------------------------------------------------

def test_suspend_and_resume() -> None:
    c = Cluster(job("PyTorchJob"))
    c.step()
    c.all("Running")
    c.step()
    c.job.spec.run_policy.suspend = True
    c.advance(5)
    plan = c.step()
    assert sorted(deleted(plan)) == ["job-master-0", "job-worker-0", "job-worker-1"]
    assert len(deleted(plan, "Service")) == 3
    # upstream: pkg/controller.v1/common/job.go:146-161: Running False, then Suspended True
    # (last, for the State column), message "<Kind> <name> is suspended.", only `active`
    # zeroed, startTime kept
    assert c.last_condition() == "Suspended"
    assert c.condition("Suspended").status == "True"
    assert c.condition("Suspended").reason == "PyTorchJobSuspended"
    assert c.condition("Suspended").message == "PyTorchJob job is suspended."
    assert c.condition("Running").status == "False"
    assert c.condition("Running").reason == "PyTorchJobSuspended"
    assert c.job.status.start_time == "2026-01-01T00:00:00Z"
    assert {rt: rs.active for rt, rs in c.job.status.replica_statuses.items()} == {
        "Master": 0, "Worker": 0}
    assert c.plan().writes == 0
    c.job.spec.run_policy.suspend = False
    c.advance(5)
    plan = c.step()
    # common/job.go:167-172: Suspended False (reason Resumed), startTime reset
    assert c.condition("Suspended").status == "False"
    assert c.condition("Suspended").reason == "PyTorchJobResumed"
    assert c.condition("Suspended").message == "PyTorchJob job is resumed."
    assert c.job.status.start_time == "2026-01-01T00:00:10Z"
    assert len(names(plan, "Pod")) == 3


@pytest.mark.parametrize("gang", [None, "volcano", "scheduler-plugins-scheduler"])
def test_suspended_from_the_start_creates_nothing(gang: str | None) -> None:
    # (as a job Kueue queues is created: its webhook suspends it)
    c = Cluster(job("PyTorchJob", spec={"runPolicy": {"suspend": True}}),
                EngineConfig(gang_scheduler=gang))
    plan = c.step()
    assert plan.to_create == []  # no pods, services or PodGroup
    assert c.condition("Suspended").status == "True"


# -- managedBy ----------------------------------------------------------------------------

def test_a_job_managed_by_someone_else_is_left_alone() -> None:
    c = Cluster(job("PyTorchJob", spec={"runPolicy": {"managedBy": "kueue.x-k8s.io/multikueue"}}))
    plan = c.step()
    assert plan.writes == 0 and plan.events == [] and plan.on_created == []
    assert c.job.status.conditions is None


def test_a_job_whose_spec_managed_by_names_multikueue_is_left_alone() -> None:
    # trainop's spec.managedBy, which Kueue's MultiKueue generic adapter reads
    c = Cluster(job("MXJob", spec={"managedBy": "kueue.x-k8s.io/multikueue"}))
    plan = c.step()
    assert plan.writes == 0 and plan.events == [] and plan.on_created == []
    c = Cluster(job("MXJob", spec={"managedBy": "kubeflow.org/training-operator"}))
    assert len(names(c.step(), "Pod")) == 4


def test_a_job_managed_by_the_training_operator_name_is_ours() -> None:
    c = Cluster(job("PyTorchJob", spec={"runPolicy": {
        "managedBy": "kubeflow.org/training-operator"}}))
    assert len(names(c.step(), "Pod")) == 3


@pytest.mark.parametrize(("written_in", "managed_by", "ours"), [
    ("v2beta1", "kubeflow.org/mpi-operator", True),
    ("v2beta1", "kubeflow.org/training-operator", False),
    (None, "kubeflow.org/mpi-operator", False),
])
def test_a_job_answers_to_the_name_its_api_gives_the_operator(
        written_in: str | None, managed_by: str, ours: bool) -> None:
    # mpi-operator runs v2beta1 MPIJobs managed by its own name; training-operator v1 jobs
    # managed by its name: trainop is both, by the API the job was written in
    j = job("MPIJob", spec={"transport": "SSH", "runPolicy": {"managedBy": managed_by}})
    if written_in:
        j.metadata.annotations = {WRITTEN_IN: written_in}
    c = Cluster(j)
    assert bool(names(c.step(), "Pod")) is ours


def v2beta1_pods(extra: dict[str, Any] | None = None) -> tuple[Cluster, dict[str, Any]]:
    """The objects a v2beta1 MPIJob (its v1 form, as the conversion gives it) gets first."""
    c = Cluster(v2beta1_job(extra))
    return c, {f"{o['kind']}/{o['metadata']['name']}": o for o in c.step().to_create}


def test_a_v2beta1_jobs_pods_carry_mpi_operators_labels() -> None:
    # mpi-operator's defaultLabels (mpi_job_controller.go): its name, the role, no
    # replica-type; what Kueue's MPIJob integration and kueuectl select on
    c, made = v2beta1_pods()
    mine = {"training.kubeflow.org/job-name": "job",
            "training.kubeflow.org/operator-name": "mpi-operator"}
    assert made["Job/job-launcher"]["spec"]["template"]["metadata"]["labels"] == {
        **mine, "training.kubeflow.org/job-role": "launcher"}
    for i in (0, 1):
        assert made[f"Pod/job-worker-{i}"]["metadata"]["labels"] == {
            **mine, "training.kubeflow.org/job-role": "worker",
            "training.kubeflow.org/replica-index": str(i)}
    assert made["Service/job"]["spec"]["selector"] == mine  # launcher and workers
    # and the engine counts them as its own
    running_v2beta1(c)
    assert c.condition("Running").status == "True"
    assert {t: rs.active for t, rs in (c.job.status.replica_statuses or {}).items()} == {
        "Launcher": 1, "Worker": 2}


def test_a_v2beta1_launcher_as_worker_is_rank_0_in_the_replica_index() -> None:
    c, made = v2beta1_pods({"runLauncherAsWorker": True})
    index = "training.kubeflow.org/replica-index"
    assert c.pod("job-launcher")["metadata"]["labels"][index] == "0"
    assert [made[f"Pod/job-worker-{i}"]["metadata"]["labels"][index] for i in (0, 1)] == [
        "1", "2"]
    running_v2beta1(c)
    assert {t: rs.active for t, rs in (c.job.status.replica_statuses or {}).items()} == {
        "Launcher": 1, "Worker": 2}


def running_v2beta1(c: Cluster) -> Plan:
    """Every worker runs, and the launcher Job's pod."""
    c.all("Running")
    c.set_job("job-launcher", running=1, started=True)
    return c.step()


def told(plan: Plan) -> list[tuple[str, str]]:
    return [(e.reason, e.message) for e in plan.events]


def test_a_v2beta1_jobs_launcher_is_a_batch_job() -> None:
    # mpi-operator's newLauncherJob: the job's limits go to the Job, which its controller
    # keeps; made after the workers; no pod of the engine's own
    c, made = v2beta1_pods({"runPolicy": {"backoffLimit": 3, "activeDeadlineSeconds": 600,
                                          "ttlSecondsAfterFinished": 60}})
    launcher = made["Job/job-launcher"]
    assert launcher["apiVersion"] == "batch/v1"
    assert {k: v for k, v in launcher["spec"].items() if k != "template"} == {
        "backoffLimit": 3, "activeDeadlineSeconds": 600, "ttlSecondsAfterFinished": 60,
        "podReplacementPolicy": "Failed"}
    # its owner named at the version the job was written in, as mpi-operator's
    # controller reference does (Kueue tells a managed job's launcher Job by it)
    assert {k: launcher["metadata"]["ownerReferences"][0][k] for k in ("apiVersion", "kind")
            } == {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob"}
    assert {o["metadata"]["ownerReferences"][0]["apiVersion"] for o in made.values()} == {
        "kubeflow.org/v2beta1"}
    pod = launcher["spec"]["template"]["spec"]
    assert pod["hostname"] == "job-launcher" and pod["subdomain"] == "job"
    assert pod["restartPolicy"] == "OnFailure"
    assert "Pod/job-launcher" not in made
    assert list(made)[-1] == "Job/job-launcher"
    assert c.step().to_create == []  # made once
    # its pods are the Job's: the workers running is not the job running
    c.all("Running")
    c.step()
    assert c.condition("Running") is None
    running_v2beta1(c)
    assert c.condition("Running").status == "True"


def test_a_v2beta1_job_runs_once_every_worker_runs_too() -> None:
    c, _ = v2beta1_pods()
    c.set_job("job-launcher", running=1, started=True)
    c.set("job-worker-0", phase="Running")
    c.step()
    assert c.condition("Running") is None  # mpi-operator: the launcher and every worker
    c.set("job-worker-1", phase="Running")
    c.step()
    assert c.condition("Running").status == "True"


def test_a_v2beta1_job_succeeds_when_its_launcher_job_completes() -> None:
    c, _ = v2beta1_pods()
    running_v2beta1(c)
    c.set_job("job-launcher", finished="Complete", running=0,
              completion_time="2026-01-01T00:00:42Z")
    plan = c.step()
    assert c.condition("Succeeded").status == "True"
    assert c.job.status.completion_time == "2026-01-01T00:00:42Z"  # the Job's
    assert c.job.status.replica_statuses["Launcher"].succeeded == 1
    assert plan.metrics == {"successful": 1}


def test_a_v2beta1_job_fails_with_its_launcher_jobs_reason() -> None:
    # mpi-operator's updateMPIJobFailedStatus: the Job's reason and message, and past its
    # backoffLimit those of its newest failed pod
    c, _ = v2beta1_pods()
    running_v2beta1(c)
    c.set_job("job-launcher", finished="Failed", reason="BackoffLimitExceeded",
              message="Job has reached the specified backoff limit", failed=2,
              last_failed=("", ""))
    plan = c.step()
    failed = c.condition("Failed")
    assert (failed.reason, failed.message) == (
        "BackoffLimitExceeded/", "Job has reached the specified backoff limit: ")
    assert [(e.type, e.reason, e.message) for e in plan.events] == [
        ("Warning", "BackoffLimitExceeded/", "Job has reached the specified backoff limit: ")]
    assert plan.metrics == {"failed": 1}
    assert c.job.status.replica_statuses["Launcher"].failed == 2
    d, _ = v2beta1_pods()
    d.set_job("job-launcher", finished="Failed", reason="DeadlineExceeded",
              message="Job was active longer than specified deadline")
    d.step()
    assert (d.condition("Failed").reason, d.condition("Failed").message) == (
        "DeadlineExceeded", "Job was active longer than specified deadline")
    e, _ = v2beta1_pods()
    e.set_job("job-launcher", finished="Failed", last_failed=("Evicted", "x" * 2000))
    e.step()
    assert (e.condition("Failed").reason, e.condition("Failed").message) == (
        "MPIJobFailed", f"MPIJob {e.job.key} has failed")


def test_a_v2beta1_message_past_1024_bytes_is_cut() -> None:
    c, _ = v2beta1_pods()
    c.set_job("job-launcher", finished="Failed", reason="BackoffLimitExceeded",
              message="m", last_failed=("Error", "x" * 2000))
    c.step()
    message = c.condition("Failed").message
    assert len(message) == 1024 and message.startswith("m: xx") and message.endswith("x...")


def test_a_v2beta1_workers_failure_decides_nothing() -> None:
    # mpi-operator: a failed worker is counted, never made again, and the job goes on
    c, _ = v2beta1_pods({"runPolicy": {"backoffLimit": 0}})
    running_v2beta1(c)
    c.set("job-worker-1", phase="Failed", exit_code=1)
    plan = c.step()
    assert plan.delete == [] and c.condition("Failed") is None
    assert c.job.status.replica_statuses["Worker"].failed == 1


def test_a_v2beta1_job_never_seen_running_ends_with_running_false() -> None:
    # mpi-operator's updateMPIJobStatus: appended after the end, dated its completionTime
    c, _ = v2beta1_pods()
    c.set_job("job-launcher", finished="Failed", reason="DeadlineExceeded",
              message="Job was active longer than specified deadline")
    c.step()
    *_, failed, running = c.job.status.conditions
    assert (failed.type, running.type, running.status, running.reason, running.message) == (
        "Failed", "Running", "False", "MPIJobRunning",
        f"MPIJob {c.job.key} is finished but Running condition was never set.")
    assert running.last_transition_time == c.job.status.completion_time
    assert c.step().status_changed is False  # once
    v1 = Cluster(job("MPIJob", {"Launcher": 1, "Worker": 1}))
    v1.step()
    v1.all("Succeeded")
    v1.step()
    assert v1.condition("Running") is None  # upstream v1: none


def test_a_v2beta1_job_with_an_evicted_worker_fails_uncounted() -> None:
    # mpi-operator's updateMPIJobStatus: MPIJobEvicted, and not in the failed counter
    c, _ = v2beta1_pods()
    running_v2beta1(c)
    c.set("job-worker-0", phase="Failed", reason="Evicted")
    plan = c.step()
    failed = c.condition("Failed")
    assert (failed.reason, failed.message) == ("MPIJobEvicted", "1/2 workers are evicted")
    assert [(e.type, e.reason, e.message) for e in plan.events] == [
        ("Warning", "MPIJobEvicted", "1/2 workers are evicted")]
    assert plan.metrics == {}


def test_a_v2beta1_jobs_deadline_and_ttl_are_its_launcher_jobs() -> None:
    c, _ = v2beta1_pods({"runPolicy": {"activeDeadlineSeconds": 10,
                                       "ttlSecondsAfterFinished": 0}})
    running_v2beta1(c)
    c.advance(60)
    c.step()
    assert c.condition("Failed") is None  # the Job's controller ends it
    c.set_job("job-launcher", finished="Complete", running=0)
    c.step()
    c.advance(60)
    c.step()
    assert not c.deleted_job  # the TTL deletes the Job, not the MPIJob


def test_a_v2beta1_jobs_launcher_job_is_suspended_and_resumed() -> None:
    c, _ = v2beta1_pods()
    running_v2beta1(c)
    c.job.spec.run_policy.suspend = True
    plan = c.step()
    assert [(o["metadata"]["name"], o["spec"]) for o in plan.update if o["kind"] == "Job"] == [
        ("job-launcher", {"suspend": True})]
    assert sorted(deleted(plan)) == ["job-worker-0", "job-worker-1"]  # the Service stays
    assert [o for o in c.step().update if o["kind"] == "Job"] == []  # once
    c.job.spec.run_policy.suspend = False
    plan = c.step()
    # it ran: only resumed (Kubernetes keeps the template of a Job that ran)
    assert [o["spec"] for o in plan.update if o["kind"] == "Job"] == [{"suspend": False}]
    assert names(plan, "Pod") == ["job-worker-0", "job-worker-1"]


def test_a_v2beta1_launcher_job_that_never_ran_gets_the_templates_scheduling() -> None:
    # Kueue admits a job by writing node selectors into its templates and resuming it;
    # mpi-operator copies them to a launcher Job that never ran
    c, _ = v2beta1_pods({"runPolicy": {"suspend": True}})  # queued
    c.job.spec.run_policy.suspend = False
    c.job.spec.replica_specs["Launcher"].template["spec"]["nodeSelector"] = {"flavor": "a"}
    plan = c.step()
    [update] = [o for o in plan.update if o["kind"] == "Job"]
    assert update["spec"]["suspend"] is False
    assert update["spec"]["template"]["spec"]["nodeSelector"] == {"flavor": "a"}
    assert update["spec"]["template"]["metadata"]["labels"][
        "training.kubeflow.org/job-role"] == "launcher"
    assert patch_of(update) == {"spec": {"suspend": False, "template": {
        "metadata": {"labels": update["spec"]["template"]["metadata"]["labels"]},
        "spec": {"nodeSelector": {"flavor": "a"}}}}}


@pytest.mark.parametrize("wait_for_dns", [False, True])
def test_a_v2beta1_launcher_waits_for_dns_only_under_the_flag(wait_for_dns: bool) -> None:
    # mpi-operator's launcher pod has no init container: trainop's wait for the workers'
    # names is --wait-for-dns's (on in the shipped Deployment)
    c = Cluster(v2beta1_job(), EngineConfig(wait_for_dns=wait_for_dns))
    c.step()
    inits = c.pod("job-launcher")["spec"].get("initContainers") or []
    assert [i["name"] for i in inits] == (["wait-for-dns"] if wait_for_dns else [])
    assert "initContainers" not in c.pod("job-worker-0")["spec"]


def test_a_v2beta1_job_run_locally_keeps_its_launcher_a_pod() -> None:
    # no Job controller on one machine: the launcher is a process under the engine's rules
    made = Cluster(v2beta1_job(workers=1), EngineConfig(batch_jobs=False)).step().to_create
    assert [(o["kind"], o["metadata"]["name"]) for o in made if o["kind"] in ("Pod", "Job")
            ] == [("Pod", "job-launcher"), ("Pod", "job-worker-0")]


def test_a_v2beta1_job_is_told_in_mpi_operators_words() -> None:
    # mpi-operator's conditions and events (mpi_job_controller.go:615-620,
    # mpi_job_controller_status.go, docs/mpi-operator-v0.8.2.md 4.1 and 5)
    c, _ = v2beta1_pods()
    key = c.job.key
    assert (c.condition("Created").reason, c.condition("Created").message) == (
        "MPIJobCreated", f"MPIJob {key} is created.")
    plan = running_v2beta1(c)
    assert c.condition("Running").message == f"MPIJob {key} is running."
    assert told(plan) == [("MPIJobRunning", f"MPIJob {key} is running")]
    assert told(c.step()) == []  # once (mpi-operator: on every reconcile)
    c.job.spec.run_policy.suspend = True
    plan = c.step()
    assert told(plan) == [("MPIJobSuspended", "MPIJob suspended")]
    assert (c.condition("Suspended").reason, c.condition("Suspended").message) == (
        "MPIJobSuspended", "MPIJob suspended")
    assert (c.condition("Running").status, c.condition("Running").reason,
            c.condition("Running").message) == (
        "False", "MPIJobSuspended", f"MPIJob {key} is suspended.")
    assert c.last_condition() == "Running"  # set after Suspended (v1: before it)
    c.job.spec.run_policy.suspend = False
    plan = c.step()
    assert ("MPIJobResumed", "MPIJob resumed") in told(plan)
    assert (c.condition("Suspended").status, c.condition("Suspended").message) == (
        "False", "MPIJob resumed")
    running_v2beta1(c)
    c.set_job("job-launcher", finished="Complete")
    c.step()
    assert c.condition("Succeeded").message == f"MPIJob {key} successfully completed."


def test_a_v2beta1_jobs_pods_are_made_and_deleted_untold() -> None:
    # mpi-operator tells no event of its pods (v1: SuccessfulCreatePod, SuccessfulDeletePod)
    c, _ = v2beta1_pods()
    first = c.plans[-1]
    assert first.on_created == [] and told(first) == [
        ("MPIJobCreated", f"MPIJob {c.job.key} is created.")]
    running_v2beta1(c)
    c.job.spec.run_policy.suspend = True
    plan = c.step()
    assert len(deleted(plan)) == 2 and plan.on_removed == [] and plan.on_deleted == []
    v1 = Cluster(job("MPIJob", {"Launcher": 1, "Worker": 1}, spec={"transport": "SSH"}))
    assert [e.reason for e in v1.step().on_created] == ["SuccessfulCreatePod"] * 2


def test_a_v2beta1_job_suspended_from_the_start_is_not_running() -> None:
    # mpi-operator sets Running False on every suspended job (v1: only one that ran)
    c, made = v2beta1_pods({"runPolicy": {"suspend": True}})
    # what the pods need, and the launcher Job, suspended; no pod (mpi-operator's
    # syncHandler: what Kueue resumes on admission)
    assert sorted(made) == ["ConfigMap/job-config", "Job/job-launcher", "Secret/job-ssh",
                            "Service/job"]
    assert made["Job/job-launcher"]["spec"]["suspend"] is True
    assert c.step().to_create == []  # once
    assert [(x.type, x.status) for x in c.job.status.conditions or []] == [
        ("Created", "True"), ("Suspended", "True"), ("Running", "False")]


def test_a_v2beta1_jobs_first_round_tells_it_created() -> None:
    j = job("MPIJob", {"Launcher": 1, "Worker": 1}, spec={"transport": "SSH"})
    j.metadata.annotations = {WRITTEN_IN: "v2beta1"}
    assert ("MPIJobCreated", f"MPIJob {j.key} is created.") in told(Cluster(j).step())
    v1 = Cluster(job("MPIJob", {"Launcher": 1, "Worker": 1}, spec={"transport": "SSH"}))
    assert [r for r, _ in told(v1.step()) if r == "MPIJobCreated"] == []  # upstream v1: none


def test_a_v1_mpijobs_pods_keep_training_operators_labels() -> None:
    made = {o["metadata"]["name"]: o["metadata"]["labels"] for o in Cluster(job(
        "MPIJob", {"Launcher": 1, "Worker": 1}, spec={"transport": "SSH"})).step().to_create
        if o["kind"] == "Pod"}
    assert made["job-launcher"] == {
        "training.kubeflow.org/job-name": "job",
        "training.kubeflow.org/operator-name": "mpijob-controller",
        "training.kubeflow.org/replica-type": "launcher",
        "training.kubeflow.org/job-role": "master"}
    assert made["job-worker-0"]["training.kubeflow.org/replica-type"] == "worker"


# -- scaling ------------------------------------------------------------------------------

def test_scale_down_deletes_the_highest_indexes_first_then_scale_up() -> None:
    c = Cluster(job("PyTorchJob", {"Master": 1, "Worker": 4}))
    c.step()
    c.all("Running")
    c.step()
    c.job.spec.replica_specs["Worker"].replicas = 2
    plan = c.step()
    assert deleted(plan) == ["job-worker-3", "job-worker-2"]
    assert sorted(deleted(plan, "Service")) == ["job-worker-2", "job-worker-3"]
    c.job.spec.replica_specs["Worker"].replicas = 3
    plan = c.step()
    assert names(plan, "Pod") == ["job-worker-2"]
    assert c.env("job-worker-2")["WORLD_SIZE"] == "4"


# -- job-wide restart ---------------------------------------------------------------------

def test_job_wide_restart_restarts_every_replica() -> None:
    c = Cluster(job("PyTorchJob", spec={"runPolicy": {"restartScope": "Job", "backoffLimit": 5}}))
    c.step()
    assert all(c.pod(n)["spec"]["restartPolicy"] == "Never"
               for n in ("job-master-0", "job-worker-0"))
    c.all("Running")
    c.step()
    c.set("job-worker-1", phase="Failed", exit_code=137, reason="OOMKilled")
    plan = c.step()
    assert sorted(deleted(plan)) == ["job-master-0", "job-worker-0", "job-worker-1"]
    assert c.job.status.replica_statuses["Worker"].restarts == 1
    msg = c.condition("Restarting").message
    assert "all replicas restart" in msg and "job-worker-1 exited with code 137" in msg
    plan = c.step()
    assert len(names(plan, "Pod")) == 3


def test_job_wide_restart_counts_against_backoff_limit() -> None:
    c = Cluster(job("PyTorchJob", spec={"runPolicy": {"restartScope": "Job", "backoffLimit": 1}}))
    c.step()
    c.set("job-worker-1", phase="Failed", exit_code=1)
    c.step()
    c.step()
    c.set("job-master-0", phase="Failed", exit_code=1)
    c.step()
    assert c.condition("Failed").reason == "PyTorchJobFailed"


def _told(plan: Any, suffix: str) -> list[tuple[str, str]]:
    return [(e.type, e.message) for e in plan.events if e.reason.endswith(suffix)]


def test_failure_events_say_upstreams_words_as_upstream_tells_them() -> None:
    # events carry upstream's words alone (clients match on them); the condition adds facts
    exit_code = {rt: {"restartPolicy": "ExitCode"} for rt in ("Master", "Worker")}
    c = Cluster(job("PyTorchJob", replica_extra=exit_code))
    c.step()
    c.all("Running")
    c.step()
    c.set("job-worker-0", phase="Failed", exit_code=137)
    plan = c.step()
    # pod.go:362-364 per pod deleted, then pytorchjob_controller.go:431, both Warnings
    assert _told(plan, "Restarting") == [
        ("Warning", "job job is restarting because Worker replica(s) failed."),
        ("Warning", "PyTorchJob job is restarting because 1 Worker replica(s) failed.")]
    assert "Last failure: pod job-worker-0 exited with code 137" in \
        c.condition("Restarting").message
    c.step()
    c.all("Running")
    c.step()
    c.set("job-worker-1", phase="Failed", exit_code=1)
    plan = c.step()
    # ExitCode's permanent failure: pod.go:371, a Warning
    assert _told(plan, "Failed") == [
        ("Warning", 'job "job" is failing because "Worker" replica(s) failed.')]

    never = Cluster(job("PyTorchJob", replica_extra={"Worker": {"restartPolicy": "Never"}}))
    never.step()
    never.all("Running")
    never.step()
    never.set("job-worker-1", phase="Failed", exit_code=3)
    plan = never.step()
    # pytorchjob_controller.go:436: a Normal event
    assert _told(plan, "Failed") == [
        ("Normal", "PyTorchJob job is failed because 1 Worker replica(s) failed.")]
    assert never.condition("Failed").message == (
        "PyTorchJob job is failed because 1 Worker replica(s) failed. Last failure: pod "
        "job-worker-1 exited with code 3.")  # the simulated pod gives no reason


def test_a_huge_job_is_planned_in_bounded_batches() -> None:
    # 10,000 TF workers: each pod's TF_CONFIG names every replica (311 KiB); all at once
    # that is 3 GiB in one plan. One plan holds at most PLAN_BYTES of environment.
    c = Cluster(job("TFJob", {"Worker": 10_000}))
    for _ in range(2):
        plan = c.step()
        pods = [o for o in plan.create if o["kind"] == "Pod"]
        assert 0 < len(pods) < 200 and plan.requeue_after == 0
        size = sum(len(orjson.dumps(p)) for p in pods)  # as sent: JSON escapes TF_CONFIG
        assert PLAN_BYTES * 0.9 < size <= PLAN_BYTES * 1.1, size
    names = [o["metadata"]["name"] for p in c.plans for o in p.create if o["kind"] == "Pod"]
    assert len(names) == len(set(names))  # the second batch goes on where the first ended


def test_a_job_of_a_large_template_is_planned_in_bounded_batches() -> None:
    # a 1 MB template (arguments, not environment) copied into 500 pods is half a GiB of
    # JSON in one plan, several GiB decoded: one plan holds about 32 MiB of it
    args = ["x" * 1000] * 1000
    c = Cluster(job("JAXJob", {"Worker": 500}, replica_extra={"Worker": {"template": {
        "spec": {"containers": [{"name": "jax", "image": "i", "args": args}]}}}}))
    plan = c.step()
    pods = [o for o in plan.create if o["kind"] == "Pod"]
    size = sum(len(orjson.dumps(p)) for p in pods)
    assert 28 * 2**20 < size <= 36 * 2**20, size
    assert plan.requeue_after == 0  # the next batch once the cache shows this one


def test_every_replica_of_a_big_job_is_made_once_across_batches() -> None:
    c = Cluster(job("PyTorchJob", {"Master": 1, "Worker": 1_199}))
    while c.step().create:
        pass
    made = [(o["kind"], o["metadata"]["name"]) for p in c.plans for o in p.create]
    assert len(made) == len(set(made)) == 2 * 1_200  # pods and their services
    assert max(len(p.create) for p in c.plans) == PLAN_OBJECTS
    assert len(c.plans) == 6  # five batches, and the plan that finds nothing missing
    assert c.plans[-1].requeue_after != 0


def statuses(c: Cluster) -> dict[str, dict[str, int]]:
    """The job's replicaStatuses as a client reads them (zero counts left out)."""
    return {t: rs.model_dump(exclude_none=True)
            for t, rs in (c.job.status.replica_statuses or {}).items()}


def test_v2beta1_replica_statuses_are_mpi_operators() -> None:
    # mpi-operator's updateMPIJobStatus: no Launcher entry until its Job exists; the
    # workers counted while the job runs, running ones only
    c = Cluster(v2beta1_job())
    c.step()  # makes the launcher Job, which it does not see yet
    assert statuses(c) == {"Worker": {}}
    c.set("job-worker-0", phase="Running")
    c.step()
    assert statuses(c) == {"Launcher": {}, "Worker": {"active": 1}}
    running_v2beta1(c)
    assert statuses(c) == {"Launcher": {"active": 1}, "Worker": {"active": 2}}
    # once its launcher Job completes it lists no worker: `Worker: {}`, not the running
    # workers counted as succeeded
    c.set_job("job-launcher", finished="Complete", running=0)
    c.step()
    assert statuses(c) == {"Launcher": {"succeeded": 1}, "Worker": {}}
    c.step()
    assert statuses(c) == {"Launcher": {"succeeded": 1}, "Worker": {}}
    # a failed one keeps the Job's failed count
    d, _ = v2beta1_pods()
    running_v2beta1(d)
    d.set("job-worker-1", phase="Failed", exit_code=1)
    d.step()
    assert statuses(d) == {"Launcher": {"active": 1}, "Worker": {"active": 1, "failed": 1}}
    d.set_job("job-launcher", finished="Failed", running=0, failed=3, reason="x", message="y")
    d.step()
    assert statuses(d) == {"Launcher": {"failed": 3}, "Worker": {}}


def test_a_v2beta1_job_suspended_from_creation_has_both_entries_empty() -> None:
    # mpi-operator makes its launcher Job suspended and writes {Launcher: {}, Worker: {}}
    c, made = v2beta1_pods({"runPolicy": {"suspend": True}})
    assert made["Job/job-launcher"]["spec"]["suspend"] is True
    assert statuses(c) == {"Worker": {}}
    c.step()
    assert statuses(c) == {"Launcher": {}, "Worker": {}}
    # and a running job suspended: the same, whatever ran
    d, _ = v2beta1_pods()
    running_v2beta1(d)
    d.job.spec.run_policy.suspend = True
    d.set_job("job-launcher", running=0, started=True, suspended=True)
    d.step()
    assert statuses(d) == {"Launcher": {}, "Worker": {}}
