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
from trainop.api.resources import JOBS, WORKLOADS
from trainop.api.types import Defaulted
from trainop.cluster.acting import metrics
from trainop.cluster.acting.applier import PlanApplier, stored_status
from trainop.cluster.acting.events import EventRecorder
from trainop.cluster.acting.expectations import expected, expected_gone
from trainop.cluster.acting.kueue import Queueing, job_state
from trainop.cluster.acting.sshkeys import new_key_pair
from trainop.cluster.acting.workqueue import WorkQueue, init_controller_metrics, run_worker
from trainop.cluster.reading.caches import NODE_INDEX, PREBUILT_INDEX, Caches
from trainop.cluster.reading.client import Client
from trainop.cluster.reading.informer import Change
from trainop.cluster.reading.kueue_caches import WorkloadRecord
from trainop.cluster.reading.observing import Observer
from trainop.cluster.reading.records import (
    JobRecord,
    NodeRecord,
    ObjectRecord,
    PodRecord,
)
from trainop.engine import (
    ClusterAddressing,
    EngineConfig,
    Observed,
    reconcile,
    rejected,
)
from trainop.engine import conditions as cond
from trainop.engine.framework import batch_type
from trainop.engine.labels import controller_name, replica_name
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
                 queueing: Queueing | None = None):
        self.kind = kind
        self.queueing = queueing
        """Kueue's part for this kind (--kueue-workloads names it), or None."""
        self.caches = caches
        self.config = config
        self.leading = leading
        self.framework = framework_for(kind)
        """The kind's plugin, for the kind's facts; a job runs by its persona's
        (framework_of)."""
        self.addr = ClusterAddressing(config.cluster_domain)
        self.queue = WorkQueue(kind, controller=controller_name(kind))
        self._parsed = parsed
        """Parse a job once per version, within the manager's one budget."""
        self._exited: dict[str, dict[str, int]] = {}
        """Key -> pods seen to end (their default container's exit code), not yet told."""
        self._launchers: dict[str, str] = {}
        """Key -> the name of the job's launcher Job told in mpi_operator_job_info."""
        self.jobs = caches.jobs[kind]
        self.applier = PlanApplier(kind, self.framework.info.framework, client, self.jobs,
                                   recorder)
        self.expectations = self.applier.expectations
        self.observer = Observer(kind, caches, self.framework.pod_services,
                                 self.applier.holders.held)
        self.jobs.add_handler(self._on_job)
        assert caches.pods is not None
        caches.pods.add_handler(self._on_pod)
        for informer in caches.objects.values():
            informer.add_handler(self._on_object)
        if caches.nodes is not None:
            caches.nodes.add_handler(self._on_node)
        if queueing is not None:
            queueing.caches.workloads.add_handler(self._on_workload)

    # -- informer events -> queue ----------------------------------------------------
    def _on_job(self, change: Change, new: JobRecord | None, old: JobRecord | None) -> None:
        rec = new or old
        assert rec is not None
        key = rec.key
        if change is Change.DELETED:
            self.expectations.forget(key)
            self.applier.holders.forget(key)
            self._parsed.pop((self.kind, key))
            self._exited.pop(key, None)
            if self.queueing is not None:
                self.queueing.forget(self.kind, key)
            if (launcher := self._launchers.pop(key, None)) is not None:
                metrics.MPI_OPERATOR_JOB_INFO.remove(launcher, rec.meta.namespace)
            return
        if old is not None and new is not None and \
                old.meta.resource_version == new.meta.resource_version:
            return  # our own write, already in the cache: nothing new
        self.queue.add(key)

    def _owner_key(self, rec: PodRecord | ObjectRecord) -> str | None:
        if rec.meta.replica_owner:
            # a launcher Job's pod: the job that owns the Job
            jobs = self.caches.objects.get(JOBS.kind)
            owner = jobs.get(f"{rec.meta.namespace}/{rec.meta.owner_name}") if jobs else None
            return self._owner_key(owner) if owner is not None else None
        if rec.meta.owner_kind != self.kind or not rec.meta.owner_name:
            return None
        return f"{rec.meta.namespace}/{rec.meta.owner_name}"

    def _on_pod(self, change: Change, new: PodRecord | None, old: PodRecord | None) -> None:
        rec = new or old
        assert rec is not None
        key = self._owner_key(rec)
        if key is None:
            return
        if change is Change.ADDED:
            self.expectations.observed_add(key, rec.meta.name)
        elif change is Change.DELETED:
            self.expectations.observed_delete(key, rec.meta.name)
        elif new is not None and old is not None:
            if new.terminating and self._on_lost_node(new):
                # a deletion on a lost node is seen once it is under way: no kubelet may
                # ever confirm it (engine/lostnode.py)
                self.expectations.observed_delete(key, rec.meta.name)
            if self.framework.tells_exit_codes:
                main = self.framework.info.default_container
                code = new.exit_code(main)
                if code is not None and old.exit_code(main) is None:
                    self._exited.setdefault(key, {})[rec.meta.name] = code
        self.queue.add(key)

    def _on_object(self, change: Change, new: ObjectRecord | None,
                   old: ObjectRecord | None) -> None:
        rec = new or old
        assert rec is not None
        key = self._owner_key(rec)
        if key is None:
            return
        if change is Change.ADDED and (e := expected(rec.kind, rec.meta.name)) is not None:
            self.expectations.observed_add(key, e)
        elif change is Change.DELETED and (e := expected_gone(rec.kind, rec.meta.name)):
            self.expectations.observed_delete(key, e)
        self.queue.add(key)

    def _on_node(self, change: Change, new: NodeRecord | None, old: NodeRecord | None) -> None:
        """A node lost, back, or out of service: the jobs of its pods look again (its
        heartbeats change nothing the record holds, and are dropped here). A deletion of a
        pod there that the cache shows under way is not waited for (as in _on_pod): the
        job must see the node go out of service."""
        if new == old:
            return
        rec = new or old
        assert rec is not None and self.caches.pods is not None
        for pod in self.caches.pods.indexed(NODE_INDEX, rec.name):
            if (key := self._owner_key(pod)) is not None:
                if pod.terminating:
                    self.expectations.observed_delete(key, pod.meta.name)
                self.queue.add(key)

    def _on_lost_node(self, pod: PodRecord) -> bool:
        """Whether `pod` is on a node that is not Ready, or gone (--lost-node-grace)."""
        return bool(pod.node) and self.observer.lost(str(pod.node)) is not None

    def _on_workload(self, change: Change, new: WorkloadRecord | None,
                     old: WorkloadRecord | None) -> None:
        rec = new or old
        assert rec is not None
        if rec.meta.owner_uid is None and new is not None:
            # a Workload made before its job (MultiKueue's, on a worker cluster): the job
            # that names it, waiting for it, adopts it (found by index: any tenant's
            # Workload event would otherwise scan every job)
            for job_rec in self.jobs.indexed(PREBUILT_INDEX, rec.meta.key):
                self.queue.add(job_rec.key)
            return
        if rec.meta.owner_kind != self.kind or not rec.meta.job_owner or \
                not rec.meta.owner_name:
            return
        key = f"{rec.meta.namespace}/{rec.meta.owner_name}"
        job = self.jobs.get(key)
        if job is not None and job.meta.uid == rec.meta.owner_uid:
            if change is Change.ADDED:
                self.expectations.observed_add(key, str(expected(WORKLOADS.kind, rec.meta.name)))
            self.queue.add(key)
        elif new is not None and new.workload.deleting and \
                self.leading() and self.queueing is not None:
            # its job is gone: the garbage collector deletes it once Kueue's finalizer goes
            self.applier.workloads.release_soon(new.workload)

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
        if takes is None:
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
        exited = dict(self._exited.get(key, {}))
        observed = dataclasses.replace(self.observer.observed(job, tuple(exited.items())),
                                       reclaimed=reclaimed)
        fw = framework_of(job)
        if fw.launcher is not None and fw.launcher.wants_ssh_key(job, observed):
            observed = dataclasses.replace(observed, ssh_key=new_key_pair())
        plan = await asyncio.to_thread(reconcile, job, observed, wallclock.now(),
                                       fw, self.addr, self.config.engine)
        requeue = await self.applier.apply(key, obj, plan, persona_of(job))
        if kueue_reads is not None and plan.status_changed and job_state(
                job.model_copy(update={"status": plan.status})) != kueue_reads:
            # what Kueue reads of the job changed (running, ended): the Workload's step
            # is decided again now, as this write of our own brings no event back
            requeue = 0.0
        self.tell_launcher(key, job, observed)
        self._forget_exited(key, exited)
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

    def _forget_exited(self, key: str, exited: dict[str, int]) -> None:
        """The exits the engine has now seen need no telling again (a newer one stays)."""
        told = self._exited.get(key)
        if told is None:
            return
        for pod, code in exited.items():
            if told.get(pod) == code:
                del told[pod]
        if not told:
            del self._exited[key]

    def tell_launcher(self, key: str, job: Defaulted, observed: Observed) -> None:
        """mpi_operator_job_info for a job whose launcher a Job makes (mpi-operator's
        jobs, the only ones: Launcher.batch_job), once the Job exists."""
        batch = batch_type(framework_of(job), job, self.config.engine)
        if batch is None or key in self._launchers:
            return
        name = replica_name(job, batch, 0)
        if observed.object(JOBS.kind, name) is not None:
            metrics.MPI_OPERATOR_JOB_INFO.labels(name, job.namespace).set(1)
            self._launchers[key] = name

    async def _fail_invalid(self, obj: dict[str, Any], err: InvalidJob) -> None:
        """A job that got past the schema but cannot run: Failed, once, with the reason."""
        m = obj["metadata"]
        key = f"{m['namespace']}/{m['name']}"
        plan = rejected(stored_status(obj), self.kind, key, str(err), wallclock.now())
        await self.applier.commit(key, obj, plan)


