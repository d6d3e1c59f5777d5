"""Replicas that cannot start: status.waitingReplicas, its events, the startup deadline,
and names an earlier job's objects still hold (delete and apply again)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.jobs import job, manifest
from tests.sim import Cluster
from trainop.api import InvalidJob, load_job
from trainop.engine import Held, Phase, Waiting
from trainop.engine import conditions as cond

PULL = Waiting("ErrImagePull", 'init container init-pytorch: failed to pull image "nope:1"',
               'Error pod job-worker-1 container init-pytorch waiting message: failed to pull '
               'image "nope:1"')


def waiting(c: Cluster) -> list[dict[str, Any]]:
    assert c.job.status is not None
    return [w.to_dict() for w in c.job.status.waiting_replicas or []]


def told(c: Cluster) -> list[tuple[str, str, str]]:
    return [(e.type, e.reason, e.message) for e in c.plans[-1].events]


def started(run_policy: dict[str, Any] | None = None) -> Cluster:
    c = Cluster(job("PyTorchJob", {"Master": 1, "Worker": 2},
                    spec={"runPolicy": run_policy} if run_policy else None))
    c.step()
    return c


def test_a_replica_that_cannot_start_is_named_with_its_cause_and_told_once() -> None:
    c = started()
    c.set("job-master-0", phase=Phase.RUNNING)
    c.set("job-worker-1", waiting=PULL)
    c.step()
    # the job runs (its master does) and says which replica waits, and why
    assert c.condition(cond.RUNNING).status == "True"
    assert waiting(c) == [{"replicaType": "Worker", "index": 1, "pod": "job-worker-1",
                           "reason": "ErrImagePull", "message": PULL[1],
                           "since": "2026-01-01T00:00:00Z"}]
    # in upstream's words (pkg/core/job.go:35-78)
    assert ("Warning", "ErrImagePull", PULL.event_message) in told(c)
    c.advance(30)
    c.step()
    assert not [e for e in told(c) if e[1] == "ErrImagePull"]  # once, not every round
    assert waiting(c)[0]["since"] == "2026-01-01T00:00:00Z"
    # the kubelet's back-off between pulls is the same cause: shown, not told again
    c.set("job-worker-1", waiting=Waiting("ImagePullBackOff", "Back-off pulling image", "b"))
    c.step()
    assert told(c) == []
    assert (waiting(c)[0]["reason"], waiting(c)[0]["since"]) == (
        "ImagePullBackOff", "2026-01-01T00:00:00Z")
    # a new cause is told, and counted from now
    c.set("job-worker-1",
          waiting=Waiting("CreateContainerConfigError", 'secret "s" not found', "c"))
    c.step()
    assert [e[1] for e in told(c)] == ["CreateContainerConfigError"]
    assert waiting(c)[0]["since"] == "2026-01-01T00:00:30Z"
    # once it runs, nothing waits
    c.set("job-worker-1", phase=Phase.RUNNING, waiting=None)
    c.step()
    assert c.job.status is not None and c.job.status.waiting_replicas is None


def test_without_a_startup_deadline_a_job_waits_for_ever() -> None:
    c = started()
    c.all(Phase.PENDING, waiting=Waiting("Unschedulable", "0/1 nodes are available", "u"))
    c.advance(10 * 86400)
    plan = c.step()
    assert not cond.is_finished(c.job.status)
    assert plan.requeue_after is None
    assert [w["reason"] for w in waiting(c)] == ["Unschedulable"] * 3


def test_the_startup_deadline_fails_a_job_whose_pod_has_not_started_and_cleans_up() -> None:
    c = started({"startupDeadlineSeconds": 300, "cleanPodPolicy": "All"})
    c.set("job-master-0", phase=Phase.RUNNING)
    c.set("job-worker-0", phase=Phase.RUNNING)
    c.advance(100)
    c.set("job-worker-1",
          waiting=Waiting("CreateContainerConfigError", 'configmap "cfg" not found', "c"))
    plan = c.step()
    assert plan.requeue_after == 200  # the deadline is looked at again then, unasked
    c.advance(200)
    c.step()
    failed = c.condition(cond.FAILED)
    assert failed.reason == "StartupDeadlineExceeded"
    assert failed.message == (
        "PyTorchJob job has failed because pod job-worker-1 did not start within 300s "
        "(CreateContainerConfigError: configmap \"cfg\" not found).")
    assert ("Warning", "StartupDeadlineExceeded", failed.message) in told(c)
    # cleanup as the cleanPodPolicy says, and no replica is said to wait any more
    assert sorted(r.name for r in c.plans[-1].delete if r.kind == "Pod") == [
        "job-master-0", "job-worker-0", "job-worker-1"]
    assert c.job.status is not None and c.job.status.waiting_replicas is None


def test_a_pod_that_started_is_past_the_startup_deadline_for_good() -> None:
    c = started({"startupDeadlineSeconds": 60})
    c.all(Phase.RUNNING)
    c.advance(3600)
    c.step()
    assert not cond.is_finished(c.job.status)


def test_a_startup_deadline_must_be_a_second_or_more() -> None:
    with pytest.raises(InvalidJob, match=r"spec\.runPolicy\.startupDeadlineSeconds: must be 1 "
                                         "or more, got 0"):
        load_job(manifest("PyTorchJob", {"Master": 1},
                          spec={"runPolicy": {"startupDeadlineSeconds": 0}}))


def test_a_name_an_earlier_job_of_the_same_name_still_holds_is_waited_for() -> None:
    c = Cluster(job("PyTorchJob", {"Master": 1, "Worker": 1}))
    # the job was deleted and applied again: the old master pod is still terminating, the
    # old worker's service not yet collected
    c.held = (Held("Service", "job-master-0", False, "PyTorchJob", "job"),
              Held("Pod", "job-master-0", True, "PyTorchJob", "job"),
              Held("Service", "job-worker-0", False, "PyTorchJob", "job"))
    plan = c.step()
    assert plan.to_create == []
    assert not cond.is_finished(c.job.status)
    assert plan.requeue_after == 1.0
    assert [(w["pod"], w["reason"]) for w in waiting(c)] == [
        ("job-master-0", "NameInUse"), ("job-worker-0", "NameInUse")]
    assert ("Normal", "NameInUse", "pod job-master-0 is waiting: Pod job-master-0 of an "
            "earlier PyTorchJob job is still there; it is made once that is gone") in told(c)
    c.step()
    assert not [e for e in told(c) if e[1] == "NameInUse"]
    c.held = ()
    plan = c.step()
    assert sorted(o["metadata"]["name"] for o in plan.to_create if o["kind"] == "Pod") == [
        "job-master-0", "job-worker-0"]
    assert c.job.status is not None and c.job.status.waiting_replicas is None


def test_a_name_another_live_job_holds_is_left_to_the_api_server() -> None:
    # a cache can lag behind a deletion: the create is tried, and the applier reads the
    # holder afresh before it fails the job (test_applier: not adopted, CreateFailed)
    c = Cluster(job("PyTorchJob", {"Master": 1, "Worker": 1}))
    c.held = (Held("Pod", "job-worker-0", False, "TFJob", "job"),)
    plan = c.step()
    assert not cond.is_finished(c.job.status)
    assert "job-worker-0" in [o["metadata"]["name"] for o in plan.to_create if o["kind"] == "Pod"]
    assert c.job.status is not None and c.job.status.waiting_replicas is None


def test_a_name_of_a_job_being_deleted_is_waited_for_whatever_job_it_was() -> None:
    c = Cluster(job("PyTorchJob", {"Master": 1}))
    c.held = (Held("Pod", "job-master-0", True, "TFJob", "job"),)
    c.step()
    assert waiting(c)[0]["message"] == ("Pod job-master-0 of TFJob job is being deleted; it "
                                        "is made once that is gone")
    assert not cond.is_finished(c.job.status)


def test_a_holder_only_the_api_server_showed_is_named_and_waited_for_as_long_as_said() -> None:
    """A bare pod of the user's, kept by its finalizer after its deletion: no job owns it,
    no cache shows it. The replica names it, nothing is made for its name, and the job is
    decided again when the runtime will look at it next, not every second."""
    c = Cluster(job("JAXJob", {"Worker": 2}))
    c.held = (Held("Pod", "job-worker-0", True, None, None, look_again=16.0),)
    plan = c.step()
    assert "job-worker-0" not in [o["metadata"]["name"] for o in plan.to_create]
    assert waiting(c)[0]["message"] == ("Pod job-worker-0 is being deleted; it is made once "
                                        "that is gone")
    assert ("Normal", "NameInUse", "pod job-worker-0 is waiting: Pod job-worker-0 is being "
            "deleted; it is made once that is gone") in told(c)
    assert plan.requeue_after == 16.0


def test_a_replica_held_back_by_a_going_service_says_so_whatever_else_holds_the_name() -> None:
    c = Cluster(job("PyTorchJob", {"Master": 1}))
    c.held = (Held("Service", "job-master-0", False, "PyTorchJob", "job"),  # the old job's
              Held("Pod", "job-master-0", False, "TFJob", "job"))  # another live job's
    plan = c.step()
    assert [o for o in plan.to_create if o["metadata"]["name"] == "job-master-0"] == []
    assert waiting(c)[0]["message"].startswith("Service job-master-0 of an earlier PyTorchJob")
