"""trainop as Kueue's integration for the kinds it queues (--kueue-workloads: the kinds
Kueue's configuration lists in `integrations.externalFrameworks`): each queued job's
Workload kept, and the steps engine/queueing.py decides carried out. The engine then runs
the job as it stands: suspended while queued, its pods made with the admission's additions
(engine/workload.py), which are merged into the templates of the job the engine reads and
never written into the stored job."""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Mapping
from typing import Any

from trainop import wallclock
from trainop.api import Job
from trainop.api.resolved import resolve
from trainop.api.resources import LOCAL_QUEUES, NAMESPACES
from trainop.api.types import Defaulted
from trainop.cluster.acting.events import EventRecorder
from trainop.cluster.reading.client import APIError, Client
from trainop.cluster.reading.kueue_caches import KueueCaches
from trainop.engine import conditions as cond
from trainop.engine import queueing
from trainop.engine import workload as wl
from trainop.engine.plan import Event
from trainop.engine.queueing import JobState, Step
from trainop.engine.workload import WorkloadError
from trainop.engine.workload_record import Workload

log = logging.getLogger(__name__)



def job_state(job: Job) -> JobState:
    """What Kueue's integration reads of a job (kubeflowjob_controller.go)."""
    status = job.status
    ended = None
    if status is not None:
        for ctype in ("Succeeded", "Failed"):
            c = cond.get(status, ctype)
            if c is not None and c.status == "True":
                ended = (ctype == "Succeeded", c.message or "")
    active = status is not None and any(
        (rs.active or 0) > 0 for rs in (status.replica_statuses or {}).values())
    succeeded = {rtype: rs.succeeded or 0
                 for rtype, rs in ((status.replica_statuses or {}) if status else {}).items()
                 if rs.succeeded}
    return JobState(suspended=bool(job.spec.run_policy.suspend), active=active,
                    running=status is not None and cond.is_true(status, "Running"),
                    ended=ended, started=status is not None and bool(status.start_time),
                    succeeded=succeeded)


def admitted_job(job: Defaulted, infos: Mapping[str, wl.PodSetInfo]) -> Defaulted:
    """`job` with each replica type's template given its admission's additions (what
    Kueue's built-in integrations write into the stored templates), and as many replicas
    as were admitted (an elastic job's workers, admitted partly), for the engine."""
    if not infos:
        return job
    specs = {}
    for rtype, spec in job.spec.replica_specs.items():
        info = infos.get(rtype.lower())
        if info is None:
            specs[rtype] = spec
            continue
        template = copy.deepcopy(spec.template or {})
        wl.apply(template, info, rtype.lower())
        update: dict[str, Any] = {"template": template}
        if info.count is not None and info.count < resolve(job).replicas[rtype]:
            update["replicas"] = info.count  # admitted partly: as many as Kueue admitted
        specs[rtype] = spec.model_copy(update=update)
    return job.model_copy(update={"spec": job.spec.model_copy(update={"replica_specs": specs})})


class Queueing:
    """The Workloads of the queued jobs of the kinds trainop queues, and their steps."""

    def __init__(self, client: Client, caches: KueueCaches, recorder: EventRecorder, *,
                 without_queue_name: bool = False):
        self.client = client
        self.caches = caches
        self.recorder = recorder
        self.without_queue_name = without_queue_name
        self._told: dict[tuple[str, str], tuple[str, str]] = {}
        """(kind, job key) -> (Workload UID, message) of the last Pending event told."""

    async def takes(self, job: Job) -> bool | Step:
        """Whether Kueue's rules queue the job (engine.queueing.queued), or the Step that
        gives it its namespace's default LocalQueue first (it comes back labelled)."""
        if not await self._managed(job.namespace):
            return False
        if queueing.wants_default_queue(job) and await self._has_default_queue(job.namespace):
            return Step(queue_label=queueing.DEFAULT_QUEUE)
        return queueing.queued(job, managed_namespace=True,
                               without_queue_name=self.without_queue_name)

    async def _managed(self, namespace: str) -> bool:
        namespaces = self.caches.namespaces
        if namespaces is None or namespaces.get(namespace) is not None:
            return True
        # not (yet) in the cache, maybe only just made: the API server decides
        found = await self.client.get(NAMESPACES.path(), {
            "labelSelector": namespaces.label_selector or "",
            "fieldSelector": f"metadata.name={namespace}"})
        return bool(found.get("items"))

    async def _has_default_queue(self, namespace: str) -> bool:
        try:
            await self.client.get(LOCAL_QUEUES.path(namespace, queueing.DEFAULT_QUEUE))
        except APIError as err:
            if err.not_found:
                return False
            raise
        return True

    def of(self, job: Job) -> list[Workload]:
        """The job's Workloads (those it owns, and the prebuilt one it names)."""
        return self.caches.of_job(job.namespace, job.kind, job.metadata.uid or "",
                                  queueing.prebuilt_name(job))

    async def sync(self, written: Job, job: Defaulted, obj: dict[str, Any]
                   ) -> Defaulted | Step | None:
        """The queued job's next step: the job for the engine to run now (its templates
        given the admission's additions), the Step for the applier to carry out first
        (the engine runs once the caches show what it wrote), or None (said on the job:
        nothing to do until the job or its Workloads change)."""
        workloads = self.of(written)
        theirs = queueing.kept_by_another(written, workloads)
        if theirs is not None:
            self.tell_kept_by_another(written, obj, theirs)
            return job
        try:
            # in a worker thread: building and comparing the pod sets of a job of 1.5 MiB
            # takes a while, which probes, the lease and watches need not wait for
            step = await asyncio.to_thread(
                queueing.decide, written, job_state(job), workloads, self.caches.priorities(),
                wait_for_pods_ready=True, now=wallclock.now())
        except WorkloadError as err:
            self.recorder.record(obj, Event("Warning", "FailedToCreateWorkload", str(err)))
            return None
        if step != Step():
            return step
        admitted = next((w for w in workloads if w.status.admitted), None)
        if admitted is None:
            self.tell_pending(written, obj, workloads)
        if admitted is None or job.spec.run_policy.suspend:
            return job
        try:
            return admitted_job(job, wl.admitted(admitted, self.caches.flavor_specs()))
        except WorkloadError as err:
            # Kueue finishes a Workload whose admission cannot be applied (FailedToStart)
            return Step(status=[queueing.StatusPatch(admitted, queueing.conditions_with(
                admitted, "Finished", "True", "FailedToStart", str(err), wallclock.now()))])

    def tell_pending(self, written: Job, obj: dict[str, Any],
                     workloads: list[Workload]) -> None:
        """Say on the job why its Workload waits, once per reason Kueue gives (a Warning
        where Kueue cannot admit it as it stands: no such LocalQueue, too large for every
        flavor)."""
        for workload in workloads:
            why = queueing.pending(workload)
            if why is None:
                continue
            told = (workload.uid, why[1])
            if self._told.get((written.kind, written.key)) == told:
                return
            self._told[(written.kind, written.key)] = told
            kind = "Warning" if why[0] == "Inadmissible" else "Normal"
            self.recorder.record(obj, Event(kind, "Pending",
                                            f"Workload {workload.key}: {why[1]}"))
            return

    def tell_kept_by_another(self, written: Job, obj: dict[str, Any],
                             workload: Workload) -> None:
        """Say once on the job that Kueue's own integration keeps its Workload (both were
        set to: Kueue's built-in integration of the kind is on, and --kueue-workloads names
        it), and that trainop leaves it to Kueue."""
        owner = workload.controller
        told = (workload.uid, "kept by another")
        if self._told.get((written.kind, written.key)) == told:
            return
        self._told[(written.kind, written.key)] = told
        log.warning("%s %s: Kueue's own integration keeps its Workload %s; trainop leaves "
                    "it alone (take %s off --kueue-workloads)", written.kind, written.key,
                    workload.key, written.kind.lower())
        self.recorder.record(obj, Event(
            "Warning", "WorkloadKeptByKueue",
            f"Workload {workload.key} is kept by Kueue's own integration of "
            f"{owner.kind if owner else written.kind} {owner.api_version if owner else ''}: "
            f"trainop leaves it to Kueue (--kueue-workloads names {written.kind.lower()} "
            "too)"))

    def forget(self, kind: str, key: str) -> None:
        """A deleted job's memory of what it was told."""
        self._told.pop((kind, key), None)
