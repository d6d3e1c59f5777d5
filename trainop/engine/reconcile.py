"""The job engine: observed state in, a plan out. Pure: no I/O, no clock, no globals.

A round (`Round`, engine/round.py) reads top to bottom here: a job that is another
controller's or being deleted is left alone; a new one is Created; a finished one is
cleaned up and waits for its TTL; a suspended one stops; a running one has its replica
statuses counted, its deadline checked, then each feature's step in turn (lost nodes, a
restart in place under way, failures, success, waiting replicas), and what is missing is
made. Each step lives in the module of its rules."""

from __future__ import annotations

import datetime as dt
from typing import Any

from trainop.api import ReplicaStatus
from trainop.api.defaults import manager_of, our_manager
from trainop.api.model import settled
from trainop.api.resources import HPAS
from trainop.api.types import Defaulted
from trainop.engine import (
    batchjob,
    clock,
    failures,
    gang,
    inplace,
    kubegang,
    lostnode,
    objects,
    progress,
    waiting,
)
from trainop.engine import conditions as cond
from trainop.engine.config import EngineConfig
from trainop.engine.framework import Addressing, Counts, Framework
from trainop.engine.labels import replica_labels, selector_string
from trainop.engine.observed import LIVE_PHASES, Observed, OwnedObject, PodState
from trainop.engine.plan import Event, ObjectRef, Plan
from trainop.engine.round import Round


def reconcile(job: Defaulted, observed: Observed, now: dt.datetime, framework: Framework[Any],
              addr: Addressing, config: EngineConfig | None = None) -> Plan:
    """Decide what to do for `job` (defaulted and valid) given what is observed of it."""
    return _run(Round(job, observed, now, framework, addr, config or EngineConfig()))


def _run(r: Round) -> Plan:
    job = r.job
    managed_by = manager_of(job)
    if managed_by and managed_by != our_manager(job):
        return r.plan  # another controller's job: observe, never act
    if job.metadata.deletion_timestamp:
        return r.plan  # being deleted: the garbage collector removes what it owns

    if cond.get(r.status, cond.CREATED) is None and r.report.condition(
            cond.CREATED, "True", f"{r.job.kind}Created", r.fw.wording.created(job),
            tell=False):
        r.plan.add_metric("created")
        r.report.also(cond.CREATED, f"{r.job.kind}Created")
        if (why := r.config.in_place_unavailable) and inplace.asked(job, r.config):
            r.report.event(inplace.UNAVAILABLE, f"{why}: {inplace.FALLBACK}")
    if r.fw.tells_exit_codes:
        # pkg/controller.v1/common/pod.go:343-346 (upstream tells it again on every
        # reconcile; trainop once, when the pod is seen to end)
        for pod, code in r.observed.exited:
            r.report.event("ExitedWithCode",
                           f"Pod: {r.job.namespace}.{pod} exited with code {code}")

    if cond.is_finished(r.status):
        _finished(r)
    elif job.spec.run_policy.suspend:
        _suspend(r)
    else:
        _active(r)
        if cond.is_finished(r.status):
            _finished(r, just_now=True)
    progress.step(r)
    inplace.tell(r)
    r.finish_status()
    return r.plan


def _active(r: Round) -> None:
    st = r.status
    if cond.is_true(st, cond.SUSPENDED):
        message = r.fw.wording.resumed(r.job)
        r.report.condition(cond.SUSPENDED, "False", f"{r.job.kind}Resumed", message)
        r.report.event(f"{r.job.kind}Resumed", message)
        st.start_time = r.now  # a resumed job starts again (deadlines count anew)
    if kubegang.hold(r):
        return  # the cluster cannot gang it: nothing made, told why
    if gang.gang_of(r.job, r.config).held(r.observed, r.job, r.config):
        r.acts.create_missing()  # the PodGroup (and what pods mount); no pods, no status
        return
    if st.start_time is None:
        st.start_time = r.now

    # The replica statuses describe the pods observed, whatever this round decides.
    counts = r.counts_by_type(r.observed.pods)
    if r.batch is not None:
        state = batchjob.observed_state(r)
        r.status.replica_statuses = batchjob.replica_statuses(
            counts, r.batch, state, stopped=state is not None and state.finished is not None)
        counts[r.batch] = batchjob.counts(state, counts[r.batch].replicas)
    else:
        _replica_statuses(r, counts)
    ads = r.job.spec.run_policy.active_deadline_seconds
    if ads is not None and r.batch is None:  # else the Job's own deadline
        left = ads - (r.now_dt - clock.parse(st.start_time)).total_seconds()
        if left <= 0:
            # upstream's words (job.go:214) in a Normal event (job.go:226); cleanup as
            # the cleanPodPolicy says, as upstream since kubeflow/trainer#3419
            words = (f"Job {r.job.name} has failed because it was active longer than "
                     f"specified deadline")
            r.report.fail(f"{r.job.kind}Failed", f"{words} of {ads}s.", words, warning=False)
            r.past_deadline = True
            return
        r.plan.requeue(left)

    _scale_down(r)
    if lostnode.step(r) or inplace.carry_on(r) or (
            batchjob.step(r) if r.batch is not None else failures.step(r)):
        return
    if r.fw.succeeded(r.job, counts):
        _succeed(r)
        return
    if waiting.step(r):
        return
    r.acts.create_missing()
    if r.fw.running(r.job, counts) and r.report.condition(
            cond.RUNNING, "True", f"{r.job.kind}Running", r.fw.wording.running(r.job),
            tell=False):
        r.report.also(cond.RUNNING, f"{r.job.kind}Running")


def _scale_down(r: Round) -> None:
    """Pods and services past the replica count, or of a type no longer in the spec."""
    pods, services = objects.surplus(r.job, r.observed, r.fw)
    r.acts.delete_pods(pods, "scaled down")
    r.acts.delete_services(services, "scaled down")


def _succeed(r: Round) -> None:
    state = batchjob.observed_state(r)
    if state is not None and state.completion_time and not cond.is_finished(r.status):
        r.status.completion_time = state.completion_time  # the Job's (mpi-operator)
    if r.report.condition(cond.SUCCEEDED, "True", f"{r.job.kind}Succeeded",
                   r.fw.wording.succeeded(r.job)):
        r.plan.add_metric("successful")


def _replica_statuses(r: Round, counts: dict[str, Counts]) -> None:
    old = r.status.replica_statuses or {}
    new: dict[str, ReplicaStatus] = {}
    # As upstream: `selector` only for the kinds with a scale subresource
    # (pkg/controller.v1/{pytorch,paddlepaddle,jax}/*_controller.go: status.Selector);
    # the deprecated `labelSelector` is never written.
    scaled = r.job.info.scale_replica_type is not None
    for rtype, c in counts.items():
        prev = old.get(rtype)
        new[rtype] = ReplicaStatus(
            active=c.active, succeeded=c.succeeded, failed=c.failed,
            selector=selector_string(replica_labels(r.job, rtype)) if scaled else None,
            restarts=prev.restarts if prev else None,
        )
    r.status.replica_statuses = new


def _finished(r: Round, just_now: bool = False) -> None:
    """A finished job, the one way every job ends: clean up as its policy says, then
    wait for the TTL (`just_now`: it finished in this round, whose counts stand, and
    the TTL is only waited for)."""
    doomed = _clean_up(r, deadline=r.past_deadline)
    r.status.waiting_replicas = None
    message = r.fw.wording.never_running(r.job)
    if message is not None and cond.get(r.status, cond.RUNNING) is None:
        cond.append_after_end(r.status, cond.RUNNING, "False", f"{r.job.kind}Running",
                              message, r.now)
    if r.batch is not None:
        # mpi-operator lists the other pods no more: their counts are gone; the Job's
        # replica keeps what its Job told as the job ended
        for rtype, rs in (r.status.replica_statuses or {}).items():
            if rtype != r.batch:
                rs.active = rs.succeeded = rs.failed = 0
    elif not just_now and cond.is_true(r.status, cond.FAILED):
        # pods cleanup deletes, or that are gone, are no longer active (upstream leaves
        # the count of the moment the job failed, however long ago its pods went)
        remaining = r.counts_by_type([p for p in r.observed.live_pods() if p not in doomed])
        for rtype, rs in (r.status.replica_statuses or {}).items():
            rs.active = remaining[rtype].active if rtype in remaining else 0
    elif cond.is_true(r.status, cond.SUCCEEDED):
        _active_count_as_succeeded(r)
    ttl = r.job.spec.run_policy.ttl_seconds_after_finished
    done = r.status.completion_time
    if ttl is not None and done and r.batch is None:  # else the Job's own TTL
        # seconds, not datetimes: a TTL of any int64 must not overflow the calendar
        left = ttl - (r.now_dt - clock.parse(done)).total_seconds()
        if left <= 0 and not just_now:
            r.plan.delete_job = True
            # upstream's words and reason (e.g. pytorchjob_controller.go DeleteJob)
            r.plan.on_deleted.append(Event("Normal", "SuccessfulDeletePod",
                                           f"Deleted job: {r.job.name}"))
        else:
            r.plan.requeue(max(left, 0))


def _clean_up(r: Round, deadline: bool) -> list[PodState]:
    """Delete what the job's cleanPodPolicy says (`deadline`: the job failed by its
    deadline, which the events name), and the framework's grants; returns the pods."""
    policy = settled(r.job.spec.run_policy.clean_pod_policy,
                     "spec.runPolicy.cleanPodPolicy")
    live = r.observed.live_pods()
    if policy == "All":
        doomed = live
    elif policy == "Running":
        doomed = [p for p in live if p.phase in LIVE_PHASES]
    else:
        doomed = []
    launcher = r.fw.launcher
    stop = set(launcher.stops_on_finish(r.job) if launcher else ())
    doomed += [p for p in live if p.replica_type in stop and p not in doomed
               and p.phase in LIVE_PHASES]
    why = "job finished" if not deadline else "deadline exceeded"
    r.acts.delete_pods(doomed, why)
    r.acts.delete_services(r.acts.services(None if policy == "All" else doomed), why)
    for resource in launcher.grants if launcher else ():
        # (upstream keeps them until the job is deleted: a finished job's names may be
        # taken by another workload's pods, or were never its own if it failed on them)
        r.acts.delete_kind(resource)
    told = gang.gang_of(r.job, r.config).told_at_end(r.job, policy)
    if r.config.gang_scheduler and told is not None:
        removed = [r.plan.remove(ObjectRef(res.kind, r.job.name, res.api_version))
                   for res in gang.resources(r.config)
                   if r.observed.object(res.kind, r.job.name) is not None]
        if any(removed):
            for reason, message in told:
                r.acts.removed(reason, message)
    return doomed


def _active_count_as_succeeded(r: Round) -> None:
    """Replicas still active when the job succeeded count as succeeded, as upstream
    counts them (pkg/controller.v1/common/job.go:131-135; upstream on the reconcile
    after, which its own status write brings about)."""
    for rs in (r.status.replica_statuses or {}).values():
        rs.succeeded = (rs.succeeded or 0) + (rs.active or 0)
        rs.active = 0


def _suspend(r: Round) -> None:
    live = r.observed.live_pods()
    r.acts.delete_pods(live, "job suspended")
    if r.batch is None:
        r.acts.delete_services(r.acts.services(), "job suspended")
    else:  # what the pods need stays, and the launcher's Job is made, suspended
        kept = objects.kept_while_suspended(r.job, r.observed, r.fw, r.addr, r.config)
        r.plan.prerequisites.extend(kept.prerequisites)
        r.plan.update.extend(kept.update)
        r.plan.create.extend(kept.replicas)
    if r.config.gang_scheduler:
        for resource in gang.resources(r.config):
            r.acts.delete_kind(resource)
    seen = batchjob.observed_job(r)
    if seen is not None and seen.job is not None and not seen.job.suspended:
        # its Job stops its pod (mpi-operator's syncHandler)
        r.plan.update.append(batchjob.update(r.job, seen.name, True, None))
    hpa = r.observed.object("HorizontalPodAutoscaler", r.job.name)
    if hpa is not None:
        r.plan.remove(ObjectRef(HPAS.kind, hpa.name, HPAS.api_version))
    # The conditions as the kind's words order them; startTime stays until the job
    # resumes.
    for ctype, value, message in r.fw.wording.suspended(
            r.job, cond.is_true(r.status, cond.RUNNING)):
        r.report.condition(ctype, value, f"{r.job.kind}Suspended", message)
    if r.batch is not None:  # mpi-operator's, even for a job suspended from the start
        r.status.replica_statuses = batchjob.replica_statuses(
            r.counts_by_type(r.observed.pods), r.batch, batchjob.observed_state(r), stopped=True)
    else:
        # every pod is gone or going; what ended stays counted (a job suspended from
        # the start has no replica statuses, as upstream writes none for it)
        for rs in (r.status.replica_statuses or {}).values():
            rs.active = 0
    r.status.waiting_replicas = None


__all__ = ["Counts", "OwnedObject", "reconcile"]
