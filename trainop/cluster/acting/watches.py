"""Which job an informer event concerns (controller-runtime's event handlers: a job's own
events, and its pods', objects', nodes' and Workloads' by their owner), what the event
settles of the controller's expectations, and the exit codes it shows: each job concerned
goes on the work queue."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainop.api.resources import JOBS, WORKLOADS
from trainop.cluster.acting.expectations import Expectations, expected, expected_gone
from trainop.cluster.acting.workqueue import WorkQueue
from trainop.cluster.reading.caches import NODE_INDEX, PREBUILT_INDEX, Caches
from trainop.cluster.reading.informer import Change, Informer
from trainop.cluster.reading.kueue_caches import WorkloadRecord
from trainop.cluster.reading.observing import Observer
from trainop.cluster.reading.records import JobRecord, NodeRecord, ObjectRecord, PodRecord
from trainop.engine.framework import Framework
from trainop.engine.workload_record import Workload


class ExitCodes:
    """Per job, the pods seen to end (their default container's exit code) that the engine
    has not been shown yet."""

    def __init__(self) -> None:
        self._of: dict[str, dict[str, int]] = {}

    def remember(self, key: str, pod: str, code: int) -> None:
        self._of.setdefault(key, {})[pod] = code

    def of(self, key: str) -> dict[str, int]:
        return dict(self._of.get(key, {}))

    def shown(self, key: str, exited: dict[str, int]) -> None:
        """The exits the engine has now seen need no telling again (a newer one stays)."""
        told = self._of.get(key)
        if told is None:
            return
        for pod, code in exited.items():
            if told.get(pod) == code:
                del told[pod]
        if not told:
            del self._of[key]

    def forget(self, key: str) -> None:
        self._of.pop(key, None)


class JobWatches:
    """The informer handlers of one kind's controller."""

    def __init__(self, kind: str, caches: Caches, framework: Framework[Any], queue: WorkQueue,
                 expectations: Expectations, observer: Observer, *,
                 deleted: Callable[[str, str], None], release: Callable[[Workload], None],
                 leading: Callable[[], bool], workloads: Informer[WorkloadRecord] | None):
        self.kind = kind
        self.caches = caches
        self.framework = framework
        self.queue = queue
        self.expectations = expectations
        self.observer = observer
        self.deleted = deleted
        """Forget a deleted job (key, namespace) everywhere the controller remembers it."""
        self.release = release
        """Let go of a Workload whose job is gone (Kueue's finalizer removed)."""
        self.leading = leading
        self.exits = ExitCodes()
        self.jobs = caches.jobs[kind]
        self.jobs.add_handler(self._on_job)
        assert caches.pods is not None
        caches.pods.add_handler(self._on_pod)
        for informer in caches.objects.values():
            informer.add_handler(self._on_object)
        if caches.nodes is not None:
            caches.nodes.add_handler(self._on_node)
        if workloads is not None:  # the kind's jobs are queued
            workloads.add_handler(self._on_workload)

    def _on_job(self, change: Change, new: JobRecord | None, old: JobRecord | None) -> None:
        rec = new or old
        assert rec is not None
        key = rec.key
        if change is Change.DELETED:
            self.exits.forget(key)
            self.deleted(key, rec.meta.namespace)
            return
        if old is not None and new is not None and \
                old.meta.resource_version == new.meta.resource_version:
            return  # our own write, already in the cache: nothing new
        self.queue.add(key)

    def job_of(self, rec: PodRecord | ObjectRecord) -> str | None:
        """The key of the job of kind `kind` that owns `rec` (through its launcher Job for
        that Job's pods), or None."""
        if rec.meta.replica_owner:
            # a launcher Job's pod: the job that owns the Job
            jobs = self.caches.objects.get(JOBS.kind)
            owner = jobs.get(f"{rec.meta.namespace}/{rec.meta.owner_name}") if jobs else None
            return self.job_of(owner) if owner is not None else None
        if rec.meta.owner_kind != self.kind or not rec.meta.owner_name:
            return None
        return f"{rec.meta.namespace}/{rec.meta.owner_name}"

    def _on_pod(self, change: Change, new: PodRecord | None, old: PodRecord | None) -> None:
        rec = new or old
        assert rec is not None
        key = self.job_of(rec)
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
                    self.exits.remember(key, rec.meta.name, code)
        self.queue.add(key)

    def _on_object(self, change: Change, new: ObjectRecord | None,
                   old: ObjectRecord | None) -> None:
        rec = new or old
        assert rec is not None
        key = self.job_of(rec)
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
            if (key := self.job_of(pod)) is not None:
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
        elif new is not None and new.workload.deleting and self.leading():
            # its job is gone: the garbage collector deletes it once Kueue's finalizer goes
            self.release(new.workload)
