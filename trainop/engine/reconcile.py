"""The job engine: observed state in, a plan out. Pure: no I/O, no clock, no globals."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from trainop.api import FailureInfo, Job, JobStatus, ReplicaStatus
from trainop.api.defaults import manager_of, our_manager
from trainop.api.model import settled
from trainop.api.resolved import resolve
from trainop.api.resources import HPAS, JOBS, Resource
from trainop.engine import (
    batchjob,
    clock,
    failures,
    gang,
    inplace,
    lostnode,
    objects,
    podfailure,
    waiting,
)
from trainop.engine import conditions as cond
from trainop.engine.config import EngineConfig
from trainop.engine.framework import (
    Addressing,
    Counts,
    Framework,
    PlanAddressing,
    batch_type,
)
from trainop.engine.labels import replica_labels, replica_name, selector_string
from trainop.engine.observed import (
    LIVE_PHASES,
    BatchJob,
    Observed,
    OwnedObject,
    Phase,
    PodState,
)
from trainop.engine.plan import Event, ObjectRef, Plan


class _Run:
    """One reconcile: the state shared by its steps."""

    def __init__(self, job: Job, observed: Observed, now: dt.datetime, framework: Framework[Any],
                 addr: Addressing, config: EngineConfig):
        self.job = job
        self.observed = observed
        self.now = clock.fmt(now)
        self.now_dt = now
        self.fw = framework
        self.addr = PlanAddressing(addr)
        self.config = config
        self.before = (job.status or JobStatus()).to_dict()
        self.plan = Plan(status=JobStatus.model_validate(self.before))
        self.kind = job.kind
        self.past_deadline = False
        """The job failed by its activeDeadlineSeconds in this round."""
        self.tells_objects = framework.wording.tells_objects(job)
        """Whether its pods and services being made and deleted are told."""
        self.batch = batch_type(framework, job, config)
        """The replica type a batch/v1 Job makes (engine/batchjob.py): the Job, not the
        engine, holds the job's backoffLimit, deadline and TTL, and its end is the job's."""
        self.attempts: inplace.Attempts | None = None
        """The attempts to tell the job's pods, where they restart in place
        (engine/inplace.py); told at the end of the round (tell_attempts)."""
        if inplace.applies(job, observed.pods, framework, config):
            self.attempts = inplace.attempts(self.live_pods())
        self.lost = lostnode.Decision()
        """Its pods on nodes that stopped reporting (engine/lostnode.py)."""

    # -- helpers ----------------------------------------------------------------------
    @property
    def status(self) -> JobStatus:
        return self.plan.status

    def condition(self, ctype: str, value: str, reason: str, message: str,
                  warning: bool = False, tell: bool = True) -> bool:
        """Set a condition; True when it became True just now (and then its event is told,
        unless `tell` is False: upstream v1.9 tells no event for Created or Running)."""
        event = Event("Warning" if warning else "Normal", reason, message) if tell else None
        return self.plan.set_condition(ctype, value, reason, message, self.now, event)

    def event(self, reason: str, message: str, warning: bool = False) -> None:
        self.plan.events.append(Event("Warning" if warning else "Normal", reason, message))

    def tell_also(self, ctype: str, reason: str) -> None:
        """The event a condition that just turned True tells in the kind's words, where it
        tells one (Wording.told)."""
        if (message := self.fw.wording.told(self.job, ctype)) is not None:
            self.event(reason, message)

    def removed(self, reason: str, message: str) -> None:
        """A Normal event of a deletion this plan makes (Plan.on_removed)."""
        self.plan.on_removed.append(Event("Normal", reason, message))

    def delete_pods(self, pods: list[PodState], reason: str, force: bool = False) -> None:
        """Delete `pods` (`force`: with grace 0, those being deleted too)."""
        pods = [p for p in sorted(pods, key=lambda p: (p.replica_type, -p.index))
                if (force or not p.terminating) and self.plan.remove(
                    ObjectRef("Pod", p.name, grace=0 if force else None))]
        if not pods or not self.tells_objects:
            return
        if self.config.aggregate_events:
            self.removed("SuccessfulDeletePod",
                         f"Deleted {len(pods)} pod(s) ({reason}): {shown(p.name for p in pods)}")
        else:  # pkg/controller.v1/control/pod_control.go:190
            for p in pods:
                self.removed("SuccessfulDeletePod", f"Deleted pod: {p.name}")

    def delete_services(self, names: Iterable[str], reason: str) -> None:
        gone = [n for n in names if self.plan.remove(ObjectRef("Service", n))]
        if not self.tells_objects:
            return
        if gone and self.config.aggregate_events:
            self.removed("SuccessfulDeleteService",
                         f"Deleted {len(gone)} service(s) ({reason}): {shown(gone)}")
        else:  # pkg/controller.v1/control/service_control.go:133
            for name in gone:
                self.removed("SuccessfulDeleteService", f"Deleted service: {name}")

    def services(self, of: list[PodState] | None = None) -> list[str]:
        """The names of the job's services (those of the pods `of` where given)."""
        names = None if of is None else {p.name for p in of}
        return [o.name for o in self.observed.objects
                if o.kind == "Service" and (names is None or o.name in names)]

    def delete_kind(self, resource: Resource) -> None:
        for obj in self.observed.objects:
            if obj.kind == resource.kind:
                self.plan.remove(ObjectRef(resource.kind, obj.name, resource.api_version))

    def batch_object(self) -> OwnedObject | None:
        """The batch/v1 Job of the replica `self.batch`, as observed."""
        if self.batch is None:
            return None
        return self.observed.object(JOBS.kind, replica_name(self.job, self.batch, 0))

    def batch_state(self) -> BatchJob | None:
        seen = self.batch_object()
        return seen.job if seen is not None else None

    def live_pods(self) -> list[PodState]:
        return [p for p in self.observed.pods if not p.terminating]

    # -- the steps --------------------------------------------------------------------
    def run(self) -> Plan:
        job = self.job
        managed_by = manager_of(job)
        if managed_by and managed_by != our_manager(job):
            return self.plan  # another controller's job: observe, never act
        if job.metadata.deletion_timestamp:
            return self.plan  # being deleted: the garbage collector removes what it owns

        if cond.get(self.status, cond.CREATED) is None and self.condition(
                cond.CREATED, "True", f"{self.kind}Created", self.fw.wording.created(job),
                tell=False):
            self.plan.add_metric("created")
            self.tell_also(cond.CREATED, f"{self.kind}Created")
            if (why := self.config.in_place_unavailable) and inplace.asked(job, self.config):
                self.event(inplace.UNAVAILABLE, f"{why}: {inplace.FALLBACK}")
        if self.fw.tells_exit_codes:
            # pkg/controller.v1/common/pod.go:343-346 (upstream tells it again on every
            # reconcile; trainop once, when the pod is seen to end)
            for pod, code in self.observed.exited:
                self.event("ExitedWithCode",
                           f"Pod: {self.job.namespace}.{pod} exited with code {code}")

        if cond.is_finished(self.status):
            self.finished()
        elif job.spec.run_policy.suspend:
            self.suspend()
        else:
            self.active()
            if cond.is_finished(self.status):
                self.finished(just_now=True)
        self.tell_attempts()
        self.finish_status()
        return self.plan

    def finished(self, just_now: bool = False) -> None:
        """A finished job, the one way every job ends: clean up as its policy says, then
        wait for the TTL (`just_now`: it finished in this round, whose counts stand, and
        the TTL is only waited for)."""
        doomed = self.clean_up(deadline=self.past_deadline)
        self.status.waiting_replicas = None
        message = self.fw.wording.never_running(self.job)
        if message is not None and cond.get(self.status, cond.RUNNING) is None:
            cond.append_after_end(self.status, cond.RUNNING, "False", f"{self.kind}Running",
                                  message, self.now)
        if self.batch is not None:
            # mpi-operator lists the other pods no more: their counts are gone; the Job's
            # replica keeps what its Job told as the job ended
            for rtype, rs in (self.status.replica_statuses or {}).items():
                if rtype != self.batch:
                    rs.active = rs.succeeded = rs.failed = 0
        elif not just_now and cond.is_true(self.status, cond.FAILED):
            # pods cleanup deletes, or that are gone, are no longer active (upstream leaves
            # the count of the moment the job failed, however long ago its pods went)
            remaining = self.counts_by_type([p for p in self.live_pods() if p not in doomed])
            for rtype, rs in (self.status.replica_statuses or {}).items():
                rs.active = remaining[rtype].active if rtype in remaining else 0
        elif cond.is_true(self.status, cond.SUCCEEDED):
            self.active_count_as_succeeded()
        ttl = self.job.spec.run_policy.ttl_seconds_after_finished
        done = self.status.completion_time
        if ttl is not None and done and self.batch is None:  # else the Job's own TTL
            # seconds, not datetimes: a TTL of any int64 must not overflow the calendar
            left = ttl - (self.now_dt - clock.parse(done)).total_seconds()
            if left <= 0 and not just_now:
                self.plan.delete_job = True
                # upstream's words and reason (e.g. pytorchjob_controller.go DeleteJob)
                self.plan.on_deleted.append(Event("Normal", "SuccessfulDeletePod",
                                                  f"Deleted job: {self.job.name}"))
            else:
                self.plan.requeue(max(left, 0))

    def clean_up(self, deadline: bool) -> list[PodState]:
        """Delete what the job's cleanPodPolicy says (`deadline`: the job failed by its
        deadline, which the events name), and the framework's grants; returns the pods."""
        policy = settled(self.job.spec.run_policy.clean_pod_policy,
                         "spec.runPolicy.cleanPodPolicy")
        live = self.live_pods()
        if policy == "All":
            doomed = live
        elif policy == "Running":
            doomed = [p for p in live if p.phase in LIVE_PHASES]
        else:
            doomed = []
        launcher = self.fw.launcher
        stop = set(launcher.stops_on_finish(self.job) if launcher else ())
        doomed += [p for p in live if p.replica_type in stop and p not in doomed
                   and p.phase in LIVE_PHASES]
        why = "job finished" if not deadline else "deadline exceeded"
        self.delete_pods(doomed, why)
        self.delete_services(self.services(None if policy == "All" else doomed), why)
        for resource in launcher.grants if launcher else ():
            # (upstream keeps them until the job is deleted: a finished job's names may be
            # taken by another workload's pods, or were never its own if it failed on them)
            self.delete_kind(resource)
        told = gang.gang_of(self.job).told_at_end(self.job, policy)
        if self.config.gang_scheduler and told is not None and self.observed.object(
                "PodGroup", self.job.name) is not None and self.plan.remove(
                ObjectRef("PodGroup", self.job.name, gang.podgroups(self.config).api_version)):
            for reason, message in told:
                self.removed(reason, message)
        return doomed

    def suspend(self) -> None:
        live = self.live_pods()
        self.delete_pods(live, "job suspended")
        if self.batch is None:
            self.delete_services(self.services(), "job suspended")
        else:  # what the pods need stays, and the launcher's Job is made, suspended
            kept = objects.kept_while_suspended(self.job, self.observed, self.fw, self.addr,
                                                self.config)
            self.plan.prerequisites.extend(kept.prerequisites)
            self.plan.update.extend(kept.update)
            self.plan.create.extend(kept.replicas)
        if self.config.gang_scheduler:
            self.delete_kind(gang.podgroups(self.config))
        seen = self.batch_object()
        if seen is not None and seen.job is not None and not seen.job.suspended:
            # its Job stops its pod (mpi-operator's syncHandler)
            self.plan.update.append(batchjob.update(self.job, seen.name, True, None))
        hpa = self.observed.object("HorizontalPodAutoscaler", self.job.name)
        if hpa is not None:
            self.plan.remove(
                ObjectRef(HPAS.kind, hpa.name, HPAS.api_version)
            )
        # The conditions as the kind's words order them; startTime stays until the job
        # resumes.
        for ctype, value, message in self.fw.wording.suspended(
                self.job, cond.is_true(self.status, cond.RUNNING)):
            self.condition(ctype, value, f"{self.kind}Suspended", message)
        if self.batch is not None:  # mpi-operator's, even for a job suspended from the start
            self.status.replica_statuses = batchjob.replica_statuses(
                self.counts_by_type(self.observed.pods), self.batch, self.batch_state(),
                stopped=True)
        else:
            # every pod is gone or going; what ended stays counted (a job suspended from
            # the start has no replica statuses, as upstream writes none for it)
            for rs in (self.status.replica_statuses or {}).values():
                rs.active = 0
        self.status.waiting_replicas = None

    def active(self) -> None:
        st = self.status
        if cond.is_true(st, cond.SUSPENDED):
            message = self.fw.wording.resumed(self.job)
            self.condition(cond.SUSPENDED, "False", f"{self.kind}Resumed", message)
            self.event(f"{self.kind}Resumed", message)
            st.start_time = self.now  # a resumed job starts again (deadlines count anew)
        if gang.gang_of(self.job).held(self.observed, self.job, self.config):
            self.create_missing()  # the PodGroup (and what pods mount); no pods, no status
            return
        if st.start_time is None:
            st.start_time = self.now

        # The replica statuses describe the pods observed, whatever this round decides.
        counts = self.counts_by_type(self.observed.pods)
        if self.batch is not None:
            state = self.batch_state()
            self.status.replica_statuses = batchjob.replica_statuses(
                counts, self.batch, state, stopped=state is not None and state.finished is not None)
            counts[self.batch] = batchjob.counts(state, counts[self.batch].replicas)
        else:
            self.replica_statuses(counts)
        ads = self.job.spec.run_policy.active_deadline_seconds
        if ads is not None and self.batch is None:  # else the Job's own deadline
            left = ads - (self.now_dt - clock.parse(st.start_time)).total_seconds()
            if left <= 0:
                # upstream's words (job.go:214) in a Normal event (job.go:226); cleanup as
                # the cleanPodPolicy says, as upstream since kubeflow/trainer#3419
                words = (f"Job {self.job.name} has failed because it was active longer than "
                         f"specified deadline")
                self.fail(f"{self.kind}Failed", f"{words} of {ads}s.", words, warning=False)
                self.past_deadline = True
                return
            self.plan.requeue(left)

        self.scale_down()
        if self.lost_nodes() or self.restart_in_place() or self.handle_failures():
            return
        if self.fw.succeeded(self.job, counts):
            self.succeed()
            return
        if self.waiting():
            return
        self.create_missing()
        if self.fw.running(self.job, counts) and self.condition(
                cond.RUNNING, "True", f"{self.kind}Running", self.fw.wording.running(self.job),
                tell=False):
            self.tell_also(cond.RUNNING, f"{self.kind}Running")

    def scale_down(self) -> None:
        """Pods and services past the replica count, or of a type no longer in the spec."""
        pods, services = objects.surplus(self.job, self.observed, self.fw)
        self.delete_pods(pods, "scaled down")
        self.delete_services(services, "scaled down")

    def lost_nodes(self) -> bool:
        """Pods on nodes that stopped reporting (--lost-node-grace, engine/lostnode.py):
        deleted once the grace ran out, at once where the node is out of service (told in
        waiting()). A job that restarts as a whole (restartScope: Job) restarts as the pods
        go, uncounted: its other ranks cannot go on without the lost ones (True then: the
        round ends)."""
        grace = self.config.lost_node_grace
        if grace is None or not self.observed.lost_nodes:
            return False
        self.lost = lostnode.decide(self.observed.pods, self.observed.lost_nodes, grace,
                                    self.now_dt)
        self.delete_pods(self.lost.delete, "node lost")
        self.delete_pods(self.lost.force, "node out of service", force=True)
        if self.lost.next_look is not None:
            self.plan.requeue(self.lost.next_look)
        # (a pod deleted before is Terminating, or gone: its job restarted then)
        going = [p for p in self.lost.delete + self.lost.force if not p.terminating]
        if not going or self.job.spec.run_policy.restart_scope != "Job":
            return False
        names = {p.name for p in going}
        others = [p for p in self.live_pods() if p.name not in names]
        message = (f"{self.job.kind} {self.job.name} is restarting because "
                   f"{shown(p.name for p in going)} lost {'its' if len(going) == 1 else 'their'}"
                   f" node (not counted); {failures.WHOLE_JOB}.")
        if self.attempts is not None and self.restarts_in_place(others):
            self.next_attempt(others)  # the lost pods are made again for it, at the barrier
        else:
            self.delete_pods(others, "restarting the whole job")
        self.condition(cond.RESTARTING, "True", f"{self.kind}Restarting", message, tell=False)
        self.event(f"{self.kind}Restarting", message, warning=True)
        return True

    def counts_by_type(self, pods: tuple[PodState, ...] | list[PodState]) -> dict[str, Counts]:
        out = {}
        for rtype, n in resolve(self.job).replicas.items():
            mine = [p for p in pods if p.replica_type == rtype and p.index < n]
            out[rtype] = Counts(
                replicas=n,
                # (a pod held for an attempt in place runs none of the job's containers)
                active=sum(1 for p in mine if p.phase == Phase.RUNNING and not p.terminating
                           and not (p.in_place and p.in_place.held)),
                succeeded=sum(1 for p in mine if p.phase == Phase.SUCCEEDED),
                failed=sum(1 for p in mine if p.phase == Phase.FAILED),
                succeeded_indexes=frozenset(p.index for p in mine
                                            if p.phase == Phase.SUCCEEDED),
            )
        return out

    def handle_failures(self) -> bool:
        """Restart or fail as the failure rules judge (failures.py); True when the job
        stopped or restarts (nothing more to create in this round). A job whose replica
        a Job makes ends when that Job fails, and no other pod's end decides anything
        (mpi-operator: a worker that fails is not made again)."""
        if self.batch is not None:
            state = self.batch_state()
            if state is not None and state.finished == batchjob.FAILED:
                reason, message = self.fw.wording.job_failed(self.job, state)
                if self.fail(reason, message):
                    self.plan.add_metric("failed")
                return True
            # a replica the cluster evicted ends the job (mpi-operator's updateMPIJobStatus;
            # it does not count such a job as failed)
            others = [p for p in self.live_pods() if p.replica_type != self.batch
                      and resolve(self.job).in_spec(p.replica_type, p.index)]
            evicted = sum(1 for p in others if p.phase == Phase.FAILED
                          and p.reason == "Evicted")
            if evicted:
                total = resolve(self.job).total - resolve(self.job).replicas[self.batch]
                self.fail(f"{self.kind}Evicted",
                          self.fw.wording.evicted(self.job, evicted, total))
                return True
            return False
        policy = self.job.spec.run_policy.pod_failure_policy
        if policy is None and self.config.ignore_disruptions:
            policy = podfailure.IGNORE_DISRUPTIONS
        live = self.live_pods()
        judgement = failures.judge(self.job, live, self.status, self.fw, policy)
        if judgement is None:
            return False
        in_place = self.attempts is not None and self.restarts_in_place(live)
        if judgement.verdict is not failures.Verdict.FAIL and judgement.ignored:
            # made again, counted nowhere: the pod's end was not the job's doing
            ignored = [pod for pod, _ in judgement.ignored]
            self.delete_pods([p for p in ignored if not (in_place and inplace.alive(p))],
                             "pod failure policy")
            for _, why in judgement.ignored:
                self.event(podfailure.REASON, f"{why}: the pod is made again, not counted")
            if in_place and any(inplace.alive(p) for p in ignored):
                self.next_attempt(live)  # every pod goes on from a new attempt together
        if judgement.verdict is failures.Verdict.IGNORE:
            return True
        if judgement.first is not None:
            self.record_failure(judgement.first)
        if judgement.verdict is failures.Verdict.FAIL:
            if self.fail(judgement.reason, judgement.message, judgement.event_message,
                         judgement.warning, judgement.condition_reason) and \
                    judgement.by_replicas:
                self.plan.add_metric("failed")  # not a limit's failure (upstream's counters)
            return True
        if in_place and judgement.whole_job:
            self.next_attempt(live)
        else:
            self.delete_pods(list(judgement.restart), "restarting the whole job"
                             if judgement.whole_job else "restarting")
        statuses = self.status.replica_statuses or {}
        for rtype, step in judgement.recreations.items():
            rs = statuses.setdefault(rtype, ReplicaStatus())
            rs.restarts = (rs.restarts or 0) + step
        self.status.replica_statuses = statuses
        self.plan.add_metric("restarted", sum(judgement.recreations.values()))  # pod.go:366
        self.condition(cond.RESTARTING, "True", judgement.reason, judgement.message,
                       tell=False)
        # upstream's two Warnings, on every restart: one per pod it deletes (pod.go:362-364),
        # then its controller's (e.g. pytorchjob_controller.go:431)
        for rtype, n in sorted(judgement.recreations.items()):
            for _ in range(n):
                self.event(judgement.reason, f"job {self.job.name} is restarting because "
                                             f"{rtype} replica(s) failed.", warning=True)
        if judgement.event_message:
            self.event(judgement.reason, judgement.event_message, warning=True)
        return True

    # -- restarts in place (engine/inplace.py) -------------------------------------------
    def restarts_in_place(self, live: list[PodState]) -> bool:
        """Whether the job's pods can restart in place: the API server kept their restart
        rules (else a Normal event says the job restarts by making its pods again)."""
        if all(p.in_place is None or p.in_place.kept_rules for p in live):
            return True
        self.event(inplace.UNAVAILABLE, f"{inplace.DROPPED}: {inplace.FALLBACK}")
        return False

    def next_attempt(self, live: list[PodState]) -> None:
        """Move the job to its next attempt: every pod stops the one it runs, and waits at
        its barrier until the new one is released. Pods that did not run the last attempt
        (ended, or not past their barrier yet) are made again for it: no pod may start the
        last one late, which makes every pod held after this move one it restarted."""
        assert self.attempts is not None
        if self.attempts.under_way:
            return  # a restart is under way: every pod stops already
        self.attempts = inplace.Attempts(self.attempts.current + 1, self.attempts.released)
        again = [p for p in live if not inplace.ran(p)]
        self.delete_pods(again, "restarting the whole job")
        made = f"; {len(again)} made again" if again else ""
        self.event(inplace.RESTARTING, f"Restarting the {len(live) - len(again)} pod(s) of the "
                                       f"job in place, attempt {self.attempts.current}{made}")

    def restart_in_place(self) -> bool:
        """Carry on a restart in place under way: release the new attempt once every pod is
        held at its barrier for it; make again the pods that ended, and those that did not
        stop within inplace.STOP_GRACE. True while it is under way (the round ends: nothing
        of the old attempt is judged, and the job is not Running)."""
        if self.attempts is None or not self.attempts.under_way:
            return False
        attempt = self.attempts.current
        resolved = resolve(self.job)
        mine = [p for p in self.live_pods() if resolved.in_spec(p.replica_type, p.index)]
        # those that ended are made again, and so are those not told this attempt that did
        # not run the last (the manager stopped before it deleted them: next_attempt)
        self.delete_pods([p for p in mine if not inplace.alive(p) or (
            p.in_place is not None and p.in_place.attempt < attempt and not inplace.ran(p))],
                         "restarting the whole job")
        held = {(p.replica_type, p.index) for p in mine
                if inplace.held(p) and p.in_place is not None and p.in_place.attempt == attempt}
        if all(slot in held for slot in resolved.slots()):
            self.attempts = inplace.Attempts(attempt, attempt)
            self.event(inplace.RELEASED_REASON, f"Every pod stopped for attempt {attempt}, "
                                                f"which starts")
            return True
        restarting = cond.get(self.status, cond.RESTARTING)
        since = clock.parse(restarting.last_transition_time) if restarting and \
            restarting.last_transition_time else self.now_dt
        left = inplace.STOP_GRACE - (self.now_dt - since).total_seconds()
        # (a pod made since, for this attempt, is on its way to the barrier: not late)
        late = [p for p in mine if inplace.alive(p) and (p.replica_type, p.index) not in held
                and not (p.created and clock.parse(p.created) > since)]
        if left <= 0 and late:
            self.delete_pods(late, "not restarted in place")
            self.event(inplace.LATE, f"{shown(p.name for p in late)} did not stop for attempt "
                                     f"{attempt} within {inplace.STOP_GRACE:.0f}s: made again",
                       warning=True)
        elif late:
            self.plan.requeue(left)
        self.create_missing()  # made for the new attempt, they wait at the barrier for it
        return True

    def tell_attempts(self) -> None:
        """Tell every pod that restarts in place the job's attempts where it was told
        otherwise, and to finish where its main container succeeded or the job ended (its
        agent ends, and the pod as its main container did); tell again a pod that has not
        acted on it within inplace.NUDGE. The pods this round deletes are left alone."""
        if self.attempts is None:
            return
        doomed = {r.name for r in self.plan.delete if r.kind == "Pod"}
        over = cond.is_finished(self.status)
        steady = not self.attempts.under_way  # (else every pod restarts, these too)
        again = []
        for p in self.live_pods():
            if p.name in doomed:
                continue
            finish = over or (steady and p.phase == Phase.SUCCEEDED)
            if (patch := inplace.told(p, self.attempts, finish, self.now)) is not None:
                self.plan.update.append(patch)
            elif (left := inplace.again_in(p, self.now_dt)) is not None:
                if left > 0:
                    self.plan.requeue(left)
                else:
                    self.plan.update.append(inplace.told_again(p, self.now))
                    again.append(p.name)
        if again:
            self.event(inplace.TOLD_AGAIN_REASON, f"{shown(again)} did not act on what "
                       f"{'it was' if len(again) == 1 else 'they were'} told within "
                       f"{inplace.NUDGE:.0f}s (the kubelet may not have written the files "
                       f"again): told again")

    def record_failure(self, f: failures.Failure) -> None:
        ended = f.pod.ended
        self.status.last_failure = FailureInfo(
            replica_type=f.pod.replica_type, index=f.pod.index, pod=f.pod.name,
            exit_code=f.pod.exit_code, reason=f.pod.reason,
            time=(ended.finished_at if ended else None) or self.now, node=f.pod.node,
            container=ended.container if ended else None,
            message=ended.message if ended else None,
        )

    def fail(self, reason: str, message: str, event_message: str = "", warning: bool = True,
             condition_reason: str = "") -> bool:
        """Fail the job with `message` on its condition and `event_message` (else the same)
        in its event, each with `reason` (the condition with `condition_reason` where given);
        False when it had failed already."""
        return self.plan.set_condition(
            cond.FAILED, "True", condition_reason or reason, message, self.now,
            Event("Warning" if warning else "Normal", reason, event_message or message))

    def active_count_as_succeeded(self) -> None:
        """Replicas still active when the job succeeded count as succeeded, as upstream
        counts them (pkg/controller.v1/common/job.go:131-135; upstream on the reconcile
        after, which its own status write brings about)."""
        for rs in (self.status.replica_statuses or {}).values():
            rs.succeeded = (rs.succeeded or 0) + (rs.active or 0)
            rs.active = 0

    def succeed(self) -> None:
        state = self.batch_state()
        if state is not None and state.completion_time and not cond.is_finished(self.status):
            self.status.completion_time = state.completion_time  # the Job's (mpi-operator)
        if self.condition(cond.SUCCEEDED, "True", f"{self.kind}Succeeded",
                          self.fw.wording.succeeded(self.job)):
            self.plan.add_metric("successful")

    def waiting(self) -> bool:
        """Say which replicas wait and why (status.waitingReplicas, an event per new cause);
        True when that fails the job: a pod past runPolicy.startupDeadlineSeconds."""
        survey = waiting.survey(self.job, self.observed, self.status.waiting_replicas,
                                self.now_dt, self.lost.told)
        self.status.waiting_replicas = survey.entries or None
        self.plan.events.extend(survey.events)
        if survey.overdue is not None:
            self.fail(waiting.STARTUP_DEADLINE, waiting.overdue_message(self.job, survey.overdue))
            return True
        if survey.next_look is not None:
            self.plan.requeue(survey.next_look)
        return False

    def create_missing(self) -> None:
        todo = objects.missing(self.job, self.observed, self.fw, self.addr, self.config)
        if todo.held:
            # pods wait for the PodGroup's admission: upstream marks the round
            # (pkg/controller.v1/common/job.go:328-331)
            self.status.last_reconcile_time = self.now
        self.plan.prerequisites.extend(todo.prerequisites)
        self.plan.update.extend(todo.update)
        self.plan.create.extend(todo.replicas)
        if todo.more:
            self.plan.requeue(0)  # the next batch, once the cache shows this one
        if not self.tells_objects:
            return
        on_created = self.plan.on_created
        if self.config.aggregate_events:
            for reason, what, names in (("SuccessfulCreatePod", "pod", [n for _, n in todo.pods]),
                                        ("SuccessfulCreateService", "service", todo.services)):
                if names:
                    on_created.append(Event("Normal", reason,
                                            f"Created {len(names)} {what}(s): {shown(names)}"))
            return
        # one per object, as upstream (pkg/controller.v1/control/pod_control.go:162,
        # service_control.go:106)
        on_created.extend(Event("Normal", "SuccessfulCreatePod",
                                self.fw.wording.created_pod(rtype, name))
                          for rtype, name in todo.pods)
        on_created.extend(Event("Normal", "SuccessfulCreateService", f"Created service: {name}")
                          for name in todo.services)

    def replica_statuses(self, counts: dict[str, Counts]) -> None:
        old = self.status.replica_statuses or {}
        new: dict[str, ReplicaStatus] = {}
        # As upstream: `selector` only for the kinds with a scale subresource
        # (pkg/controller.v1/{pytorch,paddlepaddle,jax}/*_controller.go: status.Selector);
        # the deprecated `labelSelector` is never written.
        scaled = self.job.info.scale_replica_type is not None
        for rtype, c in counts.items():
            prev = old.get(rtype)
            new[rtype] = ReplicaStatus(
                active=c.active, succeeded=c.succeeded, failed=c.failed,
                selector=selector_string(replica_labels(self.job, rtype)) if scaled else None,
                restarts=prev.restarts if prev else None,
            )
        self.status.replica_statuses = new

    def finish_status(self) -> None:
        if self.status.to_dict() != self.before:
            self.plan.status_changed = True


def reconcile(job: Job, observed: Observed, now: dt.datetime, framework: Framework[Any],
              addr: Addressing, config: EngineConfig | None = None) -> Plan:
    """Decide what to do for `job` (defaulted and valid) given what is observed of it."""
    return _Run(job, observed, now, framework, addr, config or EngineConfig()).run()


__all__ = ["Counts", "OwnedObject", "reconcile"]


def shown(names: Iterable[str]) -> str:
    """The first names of an aggregated event (--aggregate-events), `...` after five."""
    names = list(names)
    return ", ".join(names[:5]) + (" ..." if len(names) > 5 else "")
