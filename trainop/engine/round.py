"""One round of the job engine: the state a reconcile's steps share, and the acts they have
in common. Pure: no I/O, no clock, no globals."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from trainop.api import FailureInfo, JobStatus
from trainop.api.resolved import resolve
from trainop.api.resources import JOBS, Resource
from trainop.api.types import Defaulted
from trainop.engine import clock, failures, inplace, lostnode, objects
from trainop.engine import conditions as cond
from trainop.engine.config import EngineConfig
from trainop.engine.framework import Addressing, Counts, Framework, PlanAddressing, batch_type
from trainop.engine.labels import replica_name
from trainop.engine.observed import BatchJob, Observed, OwnedObject, Phase, PodState
from trainop.engine.plan import Event, ObjectRef, Plan, shown


class Round:
    """One reconcile: the state its steps share, and what they all do (set a condition,
    tell an event, delete pods, make what is missing). Each feature's step is a function
    of its own module taking the round (lostnode.step, inplace.carry_on, failures.step,
    batchjob.step, waiting.step); reconcile.py runs them in a round's order."""

    def __init__(self, job: Defaulted, observed: Observed, now: dt.datetime,
                 framework: Framework[Any], addr: Addressing, config: EngineConfig):
        self.job = job
        self.resolved = resolve(job)
        """The job's settled facts, resolved once for the round's steps."""
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
        (engine/inplace.py); told at the end of the round (inplace.tell)."""
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

    def counts_by_type(self, pods: tuple[PodState, ...] | list[PodState]) -> dict[str, Counts]:
        out = {}
        for rtype, n in self.resolved.replicas.items():
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

    def fail(self, reason: str, message: str, event_message: str = "", warning: bool = True,
             condition_reason: str = "") -> bool:
        """Fail the job with `message` on its condition and `event_message` (else the same)
        in its event, each with `reason` (the condition with `condition_reason` where given);
        False when it had failed already."""
        return self.plan.set_condition(
            cond.FAILED, "True", condition_reason or reason, message, self.now,
            Event("Warning" if warning else "Normal", reason, event_message or message))

    def record_failure(self, f: failures.Failure) -> None:
        ended = f.pod.ended
        self.status.last_failure = FailureInfo(
            replica_type=f.pod.replica_type, index=f.pod.index, pod=f.pod.name,
            exit_code=f.pod.exit_code, reason=f.pod.reason,
            time=(ended.finished_at if ended else None) or self.now, node=f.pod.node,
            container=ended.container if ended else None,
            message=ended.message if ended else None,
        )

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

    def finish_status(self) -> None:
        if self.status.to_dict() != self.before:
            self.plan.status_changed = True

