"""One controller per job kind: informer events -> work queue -> observe -> engine ->
the plan applier."""

from __future__ import annotations

import asyncio
import dataclasses
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trainop import wallclock
from trainop.api import InvalidJob, load_job, parse_job
from trainop.api.persona import persona_of
from trainop.api.types import Defaulted
from trainop.cluster.acting import metrics
from trainop.cluster.acting.applier import PlanApplier, stored_status
from trainop.cluster.acting.events import EventRecorder
from trainop.cluster.acting.kueue import Queueing, job_state
from trainop.cluster.acting.rank_channels import RankChannels, follow_job
from trainop.cluster.acting.ranks import new_key
from trainop.cluster.acting.sshkeys import new_key_pair
from trainop.cluster.acting.watches import JobWatches
from trainop.cluster.acting.workqueue import WorkQueue, init_controller_metrics, run_worker
from trainop.cluster.reading.caches import Caches
from trainop.cluster.reading.client import Client
from trainop.cluster.reading.observing import Observer
from trainop.cluster.reading.records import JobRecord
from trainop.cluster.reading.reports import HeardReports
from trainop.engine import (
    ClusterAddressing,
    EngineConfig,
    reconcile,
    rejected,
    supervised,
)
from trainop.engine import conditions as cond
from trainop.engine.labels import controller_name
from trainop.engine.queueing import Step, given_back
from trainop.frameworks import framework_for, framework_of


def _parse(rec: JobRecord) -> Defaulted:
    return load_job(rec.object())


@dataclass
class ControllerConfig:
    engine: EngineConfig
    threads: int = 1
    cluster_domain: str | None = None
    """CUSTOM_CLUSTER_DOMAIN of the manager's environment, e.g. cluster.local."""


PARSED_BYTES = 32 * 2**20
"""JSON bytes of the jobs whose parsed copies the manager keeps, every kind's together (a
parsed job takes about three times its JSON; the API server keeps a job under 1.5 MiB)."""

JobKey = tuple[str, str]
"""(kind, namespace/name): jobs of two kinds may share a name."""


class ParsedJobs:
    """Parsed jobs kept between reconciles, by kind, key and version, one store that every
    kind's controller shares; the least recently used go first once their JSON passes
    `budget` bytes (they are parsed again when needed)."""

    def __init__(self, budget: int = PARSED_BYTES):
        self.budget = budget
        self.used = 0
        self._items: OrderedDict[JobKey, tuple[str, Defaulted, int]] = OrderedDict()

    def get(self, key: JobKey, version: str) -> Defaulted | None:
        entry = self._items.get(key)
        if entry is None or entry[0] != version:
            return None
        self._items.move_to_end(key)
        return entry[1]

    def put(self, key: JobKey, version: str, job: Defaulted, size: int) -> None:
        self.pop(key)
        if size > self.budget:
            return
        self._items[key] = (version, job, size)
        self.used += size
        while self.used > self.budget:
            _, (_, _, gone) = self._items.popitem(last=False)
            self.used -= gone

    def pop(self, key: JobKey) -> None:
        entry = self._items.pop(key, None)
        if entry is not None:
            self.used -= entry[2]

    def __len__(self) -> int:
        return len(self._items)


class JobController:
    def __init__(self, kind: str, client: Client, caches: Caches, config: ControllerConfig,
                 recorder: EventRecorder, leading: Callable[[], bool], parsed: ParsedJobs,
                 queueing: Queueing | None = None, ranks: RankChannels | None = None,
                 heard: HeardReports | None = None):
        self.kind = kind
        self.heard = heard
        """The reports the progress server took (--progress-server)."""
        self.queueing = queueing
        """Kueue's part for this kind (--kueue-workloads names it), or None."""
        self.ranks = ranks
        """The jobs' rank supervisors, followed (--rank-supervisor-image), or None."""
        self.config = config
        self.leading = leading
        self.framework = framework_for(kind)
        """The kind's plugin, for the kind's facts; a job runs by its persona's
        (framework_of)."""
        self.addr = ClusterAddressing(config.cluster_domain)
        self.queue = WorkQueue(kind, controller=controller_name(kind))
        self._parsed = parsed
        """Parse a job once per version, within the manager's one budget."""
        self.launchers = metrics.LauncherInfo()
        self.progress = metrics.JobProgress(kind)
        self.jobs = caches.jobs[kind]
        self.applier = PlanApplier(kind, self.framework.info.framework, client, self.jobs,
                                   recorder)
        self.expectations = self.applier.expectations
        self.observer = Observer(kind, caches, self.framework.pod_services,
                                 self.applier.holders.held, ranks.states if ranks else None,
                                 heard)
        if heard is not None:
            heard.listen(kind, self.queue.add)
        self.watches = JobWatches(
            kind, caches, self.framework, self.queue, self.expectations, self.observer,
            deleted=self._forget, release=self.applier.workloads.release_soon,
            leading=leading, workloads=queueing.caches.workloads if queueing else None)

    # -- workers -----------------------------------------------------------------------
    async def run(self) -> None:
        init_controller_metrics(self.queue.controller, self.config.threads)
        for key in list(self.jobs.items):
            self.queue.add(key)
        await asyncio.gather(*(run_worker(self.queue, self.sync)
                               for _ in range(self.config.threads)))

    # -- one reconcile -------------------------------------------------------------------
    async def sync(self, key: str) -> float | None:
        if not self.leading():
            return None
        rec = self.jobs.get(key)
        if rec is None or not self.expectations.satisfied(key):
            return None  # deleted, or waiting for the cache to show our last writes
        obj = rec.head()
        job = await self._parse(key, rec, obj)
        if job is None:
            return None  # invalid: said on the job
        kueue_reads = None
        reclaimed: tuple[tuple[str, int], ...] = ()
        takes = False if self.queueing is None else await self.queueing.takes(job)
        if isinstance(takes, Step):
            await self.applier.apply_queue(job, obj, takes)
            return None  # labelled with its namespace's default queue: it comes back
        if self.queueing is not None and takes:
            # the Workload is built from the job as stored, as Kueue reads it
            written = await asyncio.to_thread(lambda: parse_job(rec.object()))
            queued = await self.queueing.sync(written, job, obj)
            if isinstance(queued, Step):
                await self.applier.apply_queue(written, obj, queued)
            if queued is None or isinstance(queued, Step):
                return None  # the caches will show what it wrote, and bring the job back
            job, kueue_reads = queued, job_state(job)
            reclaimed = given_back(self.queueing.of(written))
        await self.applier.holders.look_again(key, job.namespace)
        exited = self.watches.exits.of(key)
        observed = dataclasses.replace(self.observer.observed(job, tuple(exited.items())),
                                       reclaimed=reclaimed)
        fw = framework_of(job)
        if fw.launcher is not None and fw.launcher.wants_ssh_key(job, observed):
            observed = dataclasses.replace(observed, ssh_key=new_key_pair())
        if supervised.wants_key(job, observed, fw, self.config.engine):
            observed = dataclasses.replace(observed, supervisor_key=new_key())
        plan = await asyncio.to_thread(reconcile, job, observed, wallclock.now(),
                                       fw, self.addr, self.config.engine)
        if self.ranks is not None:
            await follow_job(self.ranks, self.applier.client, job, self.observer.pods_of(job),
                             plan, lambda: self.queue.add(key))
            if unreached := self.ranks.unreached(job.key):
                plan.events.append(supervised.unreachable(unreached))
        requeue = await self.applier.apply(key, obj, plan, persona_of(job))
        if kueue_reads is not None and plan.status_changed and job_state(
                job.model_copy(update={"status": plan.status})) != kueue_reads:
            # what Kueue reads of the job changed (running, ended): the Workload's step
            # is decided again now, as this write of our own brings no event back
            requeue = 0.0
        self.launchers.tell(key, job, observed, self.config.engine)
        self.progress.tell(key, job, plan.status)
        self.watches.exits.shown(key, exited)
        if job.spec.run_policy.suspend or cond.is_finished(plan.status):
            # a job that waits (suspended) or is done changes rarely: parse it again then,
            # rather than keep its parsed copy in memory meanwhile
            self._parsed.pop((self.kind, key))
        return requeue

    async def _parse(self, key: str, rec: JobRecord, obj: dict[str, Any]) -> Defaulted | None:
        """The job of `rec`, parsed and defaulted (kept parsed for its version); None where
        it is invalid (a condition and an event say so)."""
        rv = rec.meta.resource_version
        cached = self._parsed.get((self.kind, key), rv)
        if cached is not None:
            return cached
        try:
            # parsing and planning run in a worker thread: a job of thousands of
            # replicas must not hold up the event loop (probes, the lease, watches)
            job = await asyncio.to_thread(_parse, rec)
        except InvalidJob as err:
            await self._fail_invalid(obj, err)
            return None
        self._parsed.put((self.kind, key), rv, job, len(rec.raw))
        return job

    def _forget(self, key: str, namespace: str) -> None:
        """A deleted job, forgotten everywhere it is remembered."""
        self.expectations.forget(key)
        self.applier.holders.forget(key)
        self._parsed.pop((self.kind, key))
        if self.queueing is not None:
            self.queueing.forget(self.kind, key)
        self.launchers.forget(key, namespace)
        self.progress.forget(key)
        if self.ranks is not None:
            self.ranks.forget(key)
        if self.heard is not None:
            self.heard.forget(self.kind, key)

    async def _fail_invalid(self, obj: dict[str, Any], err: InvalidJob) -> None:
        """A job that got past the schema but cannot run: Failed, once, with the reason."""
        m = obj["metadata"]
        key = f"{m['namespace']}/{m['name']}"
        plan = rejected(stored_status(obj), self.kind, key, str(err), wallclock.now())
        await self.applier.commit(key, obj, plan)


