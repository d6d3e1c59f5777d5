"""One round of the job engine: the state a reconcile's steps share. Pure: no I/O, no
clock, no globals."""

from __future__ import annotations

import datetime as dt
from typing import Any

from trainop.api import JobStatus
from trainop.api.resolved import resolve
from trainop.api.types import Defaulted
from trainop.engine import clock, inplace, lostnode
from trainop.engine.acts import ObjectActs
from trainop.engine.config import EngineConfig
from trainop.engine.framework import Addressing, Counts, Framework, PlanAddressing, batch_type
from trainop.engine.observed import Observed, Phase, PodState
from trainop.engine.plan import Plan
from trainop.engine.report import Report


class Round:
    """One reconcile: the state its steps share; what they show on the job (`report`:
    conditions, events) and do to its objects (`acts`: make what is missing, delete pods).
    Each feature's step is a function of its own module taking the round (lostnode.step,
    inplace.carry_on, failures.step, batchjob.step, waiting.step); reconcile.py runs them
    in a round's order."""

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
        self.report = Report(self.plan, self.now, job, framework.wording)
        """What the job shows: conditions, events, its last failure."""
        self.acts = ObjectActs(self.plan, self.now, job, observed, framework, self.addr,
                               config)
        """What is done to its objects: made where missing, deleted."""
        self.past_deadline = False
        """The job failed by its activeDeadlineSeconds in this round."""
        self.batch = batch_type(framework, job, config)
        """The replica type a batch/v1 Job makes (engine/batchjob.py): the Job, not the
        engine, holds the job's backoffLimit, deadline and TTL, and its end is the job's."""
        self.attempts: inplace.Attempts | None = None
        """The attempts to tell the job's pods, where they restart in place
        (engine/inplace.py); told at the end of the round (inplace.tell)."""
        if inplace.applies(job, observed.pods, framework, config):
            self.attempts = inplace.attempts(observed.live_pods(), inplace.record_of(job))
        self.lost = lostnode.Decision()
        """Its pods on nodes that stopped reporting (engine/lostnode.py)."""

    # -- helpers ----------------------------------------------------------------------
    @property
    def status(self) -> JobStatus:
        return self.plan.status

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

    def finish_status(self) -> None:
        if self.status.to_dict() != self.before:
            self.plan.status_changed = True

