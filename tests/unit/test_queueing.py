"""The steps of a queued job and its Workload (trainop/engine/queueing.py), each rule of
Kueue's job framework it follows (pkg/controller/jobframework/reconciler.go, v0.19.2) as a
scenario: what happens to the job's suspend, the Workload and the job's events."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

from tests.jobs import TYPICAL, manifest
from tests.jobs import job as tjob
from tests.sim import Cluster
from trainop.api import Job, parse_job
from trainop.api.types import PodFailurePolicy
from trainop.engine import queueing as q
from trainop.engine import workload as wl
from trainop.engine.plan import Event
from trainop.engine.queueing import JobState, Step

NOW = dt.datetime(2026, 12, 3, 9, 0, tzinfo=dt.UTC)
EARLIER = "2026-12-03T08:00:00Z"
QUEUED = JobState(suspended=True, active=False, running=False)
RUNNING = JobState(suspended=False, active=True, running=True)


def job(uid: str = "uid-1", workers: int = 2, **labels: str) -> Job:
    doc = manifest("PyTorchJob", {**TYPICAL["PyTorchJob"], "Worker": workers}, uid=uid)
    doc["metadata"]["labels"] = {wl.QUEUE_LABEL: "q", **labels}
    return parse_job(doc)


def workload_of(j: Job, *conditions: tuple[str, str, str], **meta: Any) -> dict[str, Any]:
    """`j`'s Workload as Kueue keeps it, with conditions (type, status, reason)."""
    made = wl.desired(j, wl.Priority())
    made["metadata"].update(meta)
    made["status"] = {"conditions": [
        {"type": t, "status": s, "reason": r, "message": f"{t} {r}",
         "lastTransitionTime": EARLIER} for t, s, r in conditions]}
    if any(t == "QuotaReserved" and s == "True" for t, s, _ in conditions):
        made["status"]["admission"] = {"clusterQueue": "cq", "podSetAssignments": []}
    return made


ADMITTED = (("QuotaReserved", "True", "QuotaReserved"), ("Admitted", "True", "Admitted"))


def decide(j: Job, state: JobState, *workloads: dict[str, Any],
           pods_ready: bool = False) -> Step:
    """The step, the Workloads read as the cache reads them."""
    return q.decide(j, state, [wl.read(w) for w in workloads], wl.PriorityClasses(),
                    wait_for_pods_ready=pods_ready, now=NOW)


def test_a_queued_job_gets_its_workload() -> None:
    j = job()
    step = decide(j, QUEUED)
    assert step.create == wl.desired(j, wl.Priority())
    assert step.suspend is None
    assert step.events == [Event("Normal", "CreatedWorkload",
                                 f"Created Workload: default/{wl.name(j)}")]


def test_no_workload_while_its_pods_still_run() -> None:
    step = decide(job(), JobState(suspended=True, active=True, running=False))
    assert step == Step()


def test_a_running_job_without_its_workload_is_stopped_then_queued() -> None:
    j = job()
    step = decide(j, RUNNING)  # its Workload was deleted by hand
    assert step.suspend is True and step.create is None
    assert step.events == [Event("Normal", "Stopped", "Missing Workload")]
    # once its pods are gone: a Workload again, and it waits for admission
    assert decide(j, QUEUED).create is not None


def test_a_new_job_not_yet_suspended_is_suspended_without_a_word() -> None:
    # created without Kueue's webhook (that suspends a queued job as it is created)
    step = decide(job(), JobState(suspended=False, active=False, running=False,
                                  started=False))
    assert step.suspend is True and step.events == [] and step.create is None


def test_a_pending_workload_keeps_the_job_waiting() -> None:
    j = job()
    assert decide(j, QUEUED, workload_of(j, ("QuotaReserved", "False", "Pending"))) == Step()


def test_admission_resumes_the_job() -> None:
    j = job()
    step = decide(j, QUEUED, workload_of(j, *ADMITTED))
    assert step.suspend is False
    assert step.events == [Event("Normal", "Started", "Admitted by clusterQueue cq")]
    # running and admitted: nothing more
    assert decide(j, RUNNING, workload_of(j, *ADMITTED)) == Step()


def test_a_running_job_whose_workload_is_not_admitted_is_stopped() -> None:
    j = job()
    step = decide(j, RUNNING, workload_of(j, ("QuotaReserved", "False", "Pending")))
    assert step.suspend is True
    assert step.events == [Event("Normal", "Stopped", "Not admitted by cluster queue")]


def pods_ready(step: Step) -> tuple[str, str, str]:
    patch, = step.status
    c = next(c for c in patch.conditions if c.type == "PodsReady")
    return c.status, c.reason, c.message


def test_pods_ready_follows_the_running_condition() -> None:
    j = job()
    admitted = workload_of(j, *ADMITTED)
    step = decide(j, RUNNING, admitted, pods_ready=True)
    assert pods_ready(step) == ("True", "Started",
                                "All pods reached readiness and the workload is running")
    started = workload_of(j, *ADMITTED, ("PodsReady", "True", "Started"))
    assert decide(j, RUNNING, started, pods_ready=True) == Step()  # already said
    failing = JobState(suspended=False, active=True, running=False)
    step = decide(j, failing, started, pods_ready=True)
    assert pods_ready(step)[:2] == ("False", "WaitForRecovery")
    recovering = workload_of(j, *ADMITTED, ("PodsReady", "False", "WaitForRecovery"))
    assert pods_ready(decide(j, RUNNING, recovering, pods_ready=True))[:2] == (
        "True", "Recovered")
    # not admitted: waiting to start; without waitForPodsReady: never written
    step = decide(j, QUEUED, workload_of(j, ("QuotaReserved", "False", "Pending")),
                  pods_ready=True)
    assert pods_ready(step)[:2] == ("False", "WaitForStart")
    assert decide(j, RUNNING, admitted) == Step()


def test_an_evicted_job_stops_and_gives_its_quota_back_once_its_pods_are_gone() -> None:
    j = job()
    evicted = workload_of(j, *ADMITTED, ("Evicted", "True", "Preempted"))
    step = decide(j, RUNNING, evicted)
    assert step.suspend is True and step.status == []
    assert step.events == [Event("Normal", "Stopped", "Evicted Preempted")]
    gone = JobState(suspended=True, active=False, running=False)
    step = decide(j, gone, evicted)
    assert step.suspend is None and step.events == []
    patch, = step.status
    assert patch.clear_admission
    by_type = {c.type: c for c in patch.conditions}
    assert (by_type["Requeued"].status, by_type["Requeued"].reason) == ("True", "Preempted")
    assert (by_type["QuotaReserved"].status, by_type["QuotaReserved"].reason,
            by_type["QuotaReserved"].message) == ("False", "Pending", "Evicted Preempted")
    assert (by_type["Admitted"].status, by_type["Admitted"].reason) == (
        "False", "NoReservation")
    assert by_type["Admitted"].last_transition_time == q.clock.fmt(NOW)
    assert by_type["Evicted"].last_transition_time == EARLIER  # untouched


def test_an_eviction_other_than_preemption_is_not_requeued_by_the_job() -> None:
    j = job()
    evicted = workload_of(j, *ADMITTED, ("Evicted", "True", "PodsReadyTimeout"))
    patch, = decide(j, QUEUED, evicted).status
    requeued = next(c for c in patch.conditions if c.type == "Requeued")
    assert (requeued.status, requeued.reason) == ("False", "PodsReadyTimeout")


def test_a_finished_job_finishes_its_workload_which_is_then_let_go() -> None:
    j = job()
    ended = JobState(suspended=False, active=False, running=False,
                     ended=(False, "PyTorchJob job is failed because 1 Master replica(s) failed."))
    step = decide(j, ended, workload_of(j, *ADMITTED))
    patch, = step.status
    finished = patch.conditions[-1]
    assert (finished.type, finished.status, finished.reason, finished.message) == (
        "Finished", "True", "Failed",
        "PyTorchJob job is failed because 1 Master replica(s) failed.")
    assert step.events == [Event("Normal", "FinishedWorkload",
                                 f"Workload 'default/{wl.name(j)}' is declared finished")]
    done = workload_of(j, *ADMITTED, ("Finished", "True", "Failed"))
    step = decide(j, ended, done)
    assert step.release == [wl.read(done)] and step.status == [] and step.events == []
    # its finalizer gone: nothing more, and no Workload made again
    done["metadata"]["finalizers"] = []
    assert decide(j, ended, done) == Step()
    assert decide(j, ended) == Step()


def test_a_workload_being_deleted_stops_the_job_and_is_let_go() -> None:
    j = job()
    going = workload_of(j, *ADMITTED, deletionTimestamp=EARLIER)
    step = decide(j, RUNNING, going)
    assert step.suspend is True and step.release == [wl.read(going)]
    assert step.events == [Event("Normal", "Stopped", "Workload is deleted")]


def test_workloads_not_the_jobs_are_deleted() -> None:
    j = job()
    mine = workload_of(j, ("QuotaReserved", "False", "Pending"))
    stale = workload_of(job(workers=5), ("QuotaReserved", "False", "Pending"),
                        name="stale")
    step = decide(j, QUEUED, stale, mine)
    assert step.delete == [wl.read(stale)] and step.create is None and step.replace_spec == []
    assert step.events == [Event("Normal", "DeletedWorkload",
                                 "Deleted not matching Workload: default/stale")]


def test_a_suspended_jobs_changed_spec_is_written_into_its_pending_workload() -> None:
    before = job(workers=2)
    pending = workload_of(before, ("QuotaReserved", "False", "Pending"))
    after = job(workers=4)  # scaled while queued
    step = decide(after, QUEUED, pending)
    (target, spec), = step.replace_spec
    assert target == wl.read(pending) and [p["count"] for p in spec["podSets"]] == [1, 4]
    assert step.create is None and step.delete == []
    assert step.events == [Event("Normal", "UpdatedWorkload",
                                 "Updated not matching Workload for suspended job: "
                                 f"default/{wl.name(before)}")]
    # one holding quota is not rewritten: it goes, and a new one is made next
    holding = workload_of(before, *ADMITTED)
    step = decide(after, QUEUED, holding)
    assert step.delete == [wl.read(holding)] and step.replace_spec == []


def test_a_running_job_whose_workload_no_longer_matches_is_stopped() -> None:
    before = job(workers=2)
    admitted = workload_of(before, *ADMITTED)
    step = decide(job(workers=4), RUNNING, admitted)
    assert step.suspend is True and step.delete == [wl.read(admitted)]
    assert step.events[0] == Event("Normal", "Stopped", "No matching Workload")


def test_a_prebuilt_workload_is_adopted_checked_and_waited_for() -> None:
    j = job(**{q.PREBUILT_LABEL: "from-manager"})
    made = workload_of(j, name="from-manager")
    unowned = copy.deepcopy(made)
    unowned["metadata"]["ownerReferences"] = []
    assert decide(j, QUEUED, unowned).adopt == wl.read(unowned)
    # not there yet: the job waits, suspended, and no Workload of its own is made
    step = decide(j, QUEUED)
    assert step == Step()
    step = decide(j, RUNNING)
    assert step.suspend is True and step.create is None
    # another object's: not touched
    theirs = copy.deepcopy(made)
    theirs["metadata"]["ownerReferences"][0]["uid"] = "someone-else"
    assert decide(j, QUEUED, theirs) == Step()
    # out of sync with the job: finished, as Kueue finishes it
    other = workload_of(job(workers=5), name="from-manager")
    other["metadata"]["ownerReferences"][0]["uid"] = "uid-1"
    patch, = decide(j, QUEUED, other).status
    assert (patch.conditions[-1].reason, patch.conditions[-1].message) == (
        "OutOfSync", "The prebuilt workload is out of sync with its user job")
    # in sync and admitted: it starts
    admitted = workload_of(j, *ADMITTED, name="from-manager")
    assert decide(j, QUEUED, admitted).suspend is False


def test_a_condition_keeps_its_transition_time_while_its_status_stays() -> None:
    j = job()
    before = wl.read(workload_of(j, ("PodsReady", "False", "WaitForStart")))
    same = q.conditions_with(before, "PodsReady", "False", "WaitForRecovery", "m", NOW)
    assert same[-1].last_transition_time == EARLIER
    flipped = q.conditions_with(before, "PodsReady", "True", "Started", "m", NOW)
    assert flipped[-1].last_transition_time == q.clock.fmt(NOW)
    long = q.conditions_with(before, "Finished", "True", "Failed", "x" * 40000, NOW)
    assert len(long[-1].message) == q.MAX_CONDITION_MESSAGE


def test_a_workload_kueues_own_integration_keeps_is_not_the_jobs_to_keep() -> None:
    # Kueue's kubeflow.org/mpijob owns an MPIJob's Workload at v2beta1, under the name
    # trainop's would have: where it holds one, trainop keeps none for the job
    doc = manifest("MPIJob", TYPICAL["MPIJob"], uid="uid-1")
    doc["metadata"]["labels"] = {wl.QUEUE_LABEL: "q"}
    mpi = parse_job(doc)
    ours = wl.desired(mpi, wl.Priority())
    kueues = copy.deepcopy(ours)
    kueues["metadata"]["ownerReferences"][0]["apiVersion"] = "kubeflow.org/v2beta1"
    assert kueues["metadata"]["name"] == ours["metadata"]["name"]
    assert q.kept_by_another(mpi, [wl.read(kueues)]) == wl.read(kueues)
    assert q.kept_by_another(mpi, [wl.read(ours)]) is None
    # a Workload at another version of another job is no sign
    other = copy.deepcopy(kueues)
    other["metadata"]["ownerReferences"][0]["uid"] = "uid-2"
    assert q.kept_by_another(mpi, [wl.read(other)]) is None


def test_replicas_that_are_done_give_their_quota_back_and_never_take_it_again() -> None:
    j = job()
    admitted = workload_of(j, *ADMITTED)
    done = JobState(suspended=False, active=True, running=True, succeeded={"Worker": 1})
    patch, = decide(j, done, admitted).status
    assert patch.conditions is None and patch.reclaimable_pods == [
        {"name": "worker", "count": 1}]
    # told: nothing more until another is done; a count never goes down
    admitted["status"]["reclaimablePods"] = [{"name": "worker", "count": 1}]
    assert decide(j, done, admitted) == Step()
    fewer = JobState(suspended=False, active=True, running=True, succeeded={})
    assert decide(j, fewer, admitted) == Step()
    # nor to another count above 0 (Kueue refuses any lower count while it holds quota)
    three = workload_of(j, *ADMITTED)
    three["status"]["reclaimablePods"] = [{"name": "worker", "count": 2}]
    one = JobState(suspended=False, active=True, running=True, succeeded={"Worker": 1})
    assert decide(j, one, three) == Step()
    both = JobState(suspended=False, active=True, running=True,
                    succeeded={"Worker": 2, "Master": 1})
    patch, = decide(j, both, admitted).status
    assert patch.reclaimable_pods == [{"name": "master", "count": 1},
                                      {"name": "worker", "count": 2}]


def test_no_replica_is_reclaimable_that_would_run_again() -> None:
    done = JobState(suspended=False, active=True, running=True, succeeded={"Worker": 2})
    # restartPolicy Always: a pod that succeeded is made again
    always = job()
    always.spec.replica_specs["Worker"].restart_policy = "Always"
    assert decide(always, done, workload_of(always, *ADMITTED)) == Step()
    # restartScope Job: a restart runs every replica again
    whole = job()
    whole.spec.run_policy.restart_scope = "Job"
    assert decide(whole, done, workload_of(whole, *ADMITTED)) == Step()
    # not admitted, or evicted: nothing to give back
    j = job()
    pending = decide(j, done, workload_of(j, ("QuotaReserved", "False", "Pending")))
    assert all(p.reclaimable_pods is None for p in pending.status)
    evicted = workload_of(j, *ADMITTED, ("Evicted", "True", "Preempted"))
    evicted["status"]["reclaimablePods"] = [{"name": "worker", "count": 2}]
    gone = JobState(suspended=True, active=False, running=False)
    patch, = decide(j, gone, evicted).status
    assert patch.clear_admission and patch.reclaimable_pods == []  # readmitted, all run


def test_no_replica_is_reclaimable_of_a_job_with_a_rule_that_restarts_every_replica() -> None:
    done = JobState(suspended=False, active=True, running=True, succeeded={"Worker": 2})
    j = job()
    j.spec.run_policy.pod_failure_policy = PodFailurePolicy.model_validate({"rules": [
        {"action": "RestartJob", "onExitCodes": {"operator": "In", "values": [3]}}]})
    assert decide(j, done, workload_of(j, *ADMITTED)) == Step()
    counted = job()
    counted.spec.run_policy.pod_failure_policy = PodFailurePolicy.model_validate({"rules": [
        {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [3]}}]})
    patch, = decide(counted, done, workload_of(counted, *ADMITTED)).status
    assert patch.reclaimable_pods == [{"name": "worker", "count": 2}]


def test_what_a_workload_holding_quota_gave_back_is_read_strictly() -> None:
    j = job()
    given = workload_of(j, *ADMITTED)
    given["status"]["reclaimablePods"] = [
        {"name": "worker", "count": 2}, {"name": "master", "count": "1"},
        {"name": "ps", "count": 0}, "junk"]
    assert q.given_back([wl.read(given)]) == (("worker", 2),)
    waiting = workload_of(j, ("QuotaReserved", "False", "Pending"))
    waiting["status"]["reclaimablePods"] = [{"name": "worker", "count": 2}]
    assert q.given_back([wl.read(waiting)]) == ()


def test_replicas_given_back_never_run_again_whichever_is_deleted() -> None:
    # five workers, four done and given back: one worker's quota is left
    c = Cluster(tjob("PyTorchJob", {"Master": 1, "Worker": 5},
                     replica_extra={"Worker": {"restartPolicy": "ExitCode"}}))
    c.step()
    c.all("Running")
    c.step()
    for i in range(4):
        c.set(f"job-worker-{i}", phase="Succeeded", exit_code=0)
    c.step()
    c.reclaimed = (("worker", 4),)
    # their author deletes the four that are done: none runs again beside worker 4
    for i in range(4):
        del c.pods[f"job-worker-{i}"]
    assert created(c.step()) == []
    # worker 4 fails retryably and is deleted: one worker is made again, in the one slot
    # of quota left (which index did not succeed is not known once its pod is gone: the
    # lowest missing one runs first)
    c.set("job-worker-4", phase="Failed", exit_code=137)
    c.step()
    assert "job-worker-4" not in c.pods
    assert created(c.step()) == ["job-worker-0"]
    assert created(c.step()) == []
    # once that one is done, the next: never two at once
    c.set("job-worker-0", phase="Succeeded", exit_code=0)
    assert created(c.step()) == ["job-worker-1"]
    # a master is no worker: its pod set gave nothing back
    del c.pods["job-master-0"]
    assert created(c.step()) == ["job-master-0"]


def created(plan: Any) -> list[str]:
    return [o["metadata"]["name"] for o in plan.to_create if o["kind"] == "Pod"]


def test_a_jobs_changed_queue_name_moves_its_waiting_workload() -> None:
    waiting = workload_of(job(), ("QuotaReserved", "False", "Inadmissible"))
    moved = job(**{wl.QUEUE_LABEL: "other"})
    step = decide(moved, QUEUED, waiting)
    assert step.replace_spec == [(wl.read(waiting), {"queueName": "other"})] and step.events == []
    # the label taken off: the Workload names no queue either (and waits for one)
    unnamed = job()
    del unnamed.metadata.labels[wl.QUEUE_LABEL]  # type: ignore[union-attr]
    assert decide(unnamed, QUEUED, waiting).replace_spec == [
        (wl.read(waiting), {"queueName": None})]
    # not while it holds an admission (Kueue's validation refuses it)
    admitted = workload_of(job(), ("QuotaReserved", "True", "QuotaReserved"))
    assert decide(moved, QUEUED, admitted).replace_spec == []


def test_kueue_queues_only_in_the_namespaces_it_manages() -> None:
    named, unnamed = job(), job()
    del unnamed.metadata.labels[wl.QUEUE_LABEL]  # type: ignore[union-attr]
    assert q.queued(named, managed_namespace=True, without_queue_name=False)
    assert not q.queued(named, managed_namespace=False, without_queue_name=True)
    assert not q.queued(unnamed, managed_namespace=True, without_queue_name=False)
    assert q.queued(unnamed, managed_namespace=True, without_queue_name=True)
    # ... and its Workload then names no queue (Kueue's pattern refuses an empty name)
    assert "queueName" not in wl.desired(unnamed, wl.Priority())["spec"]


def test_only_a_new_job_naming_no_queue_is_given_the_default_one() -> None:
    unnamed = job()
    del unnamed.metadata.labels[wl.QUEUE_LABEL]  # type: ignore[union-attr]
    assert q.wants_default_queue(unnamed) and not q.wants_default_queue(job())
    doc = unnamed.model_dump(by_alias=True, exclude_none=True)
    doc["status"] = {"conditions": [{"type": "Created", "status": "True",
                                     "reason": "PyTorchJobCreated", "message": "m",
                                     "lastUpdateTime": EARLIER,
                                     "lastTransitionTime": EARLIER}]}
    assert not q.wants_default_queue(parse_job(doc))  # it ran before: left as it is
