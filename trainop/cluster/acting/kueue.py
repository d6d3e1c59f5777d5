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
from dataclasses import dataclass
from typing import Any

from trainop import wallclock
from trainop.api import Job
from trainop.api.resolved import resolve
from trainop.api.resources import (
    LOCAL_QUEUES,
    NAMESPACES,
    PRIORITY_CLASSES,
    RESOURCE_FLAVORS,
    WORKLOAD_PRIORITY_CLASSES,
    WORKLOADS,
    job_resource,
)
from trainop.api.types import Defaulted
from trainop.cluster.acting.events import EventRecorder
from trainop.cluster.acting.workload_writes import WorkloadWrites
from trainop.cluster.reading.client import APIError, Client
from trainop.cluster.reading.informer import Informer
from trainop.cluster.reading.records import Meta, meta_of, owner_key
from trainop.engine import conditions as cond
from trainop.engine import queueing
from trainop.engine import workload as wl
from trainop.engine.plan import Event
from trainop.engine.queueing import JobState, Step
from trainop.engine.workload import Priority, WorkloadError

log = logging.getLogger(__name__)



@dataclass(slots=True)
class WorkloadRecord:
    """A Workload as the cache keeps it: all but its pod sets' templates, which only
    digests of what is compared of them stand for (workload.slim)."""

    meta: Meta
    obj: dict[str, Any]


def workload_record(obj: dict[str, Any]) -> WorkloadRecord:
    return WorkloadRecord(meta_of(obj), wl.slim(obj))


@dataclass(slots=True)
class FlavorRecord:
    meta: Meta
    spec: dict[str, Any]


def flavor_record(obj: dict[str, Any]) -> FlavorRecord:
    return FlavorRecord(meta_of(obj), dict(obj.get("spec") or {}))


def informers(client: Client, namespace: str | None
              ) -> tuple[Informer[WorkloadRecord], Informer[FlavorRecord]]:
    """The Workloads (indexed by their owner job) and the ResourceFlavors."""
    return (Informer(client, WORKLOADS, workload_record, lambda r: r.meta.key,
                     lambda r: r.meta.owner_key, namespace),
            Informer(client, RESOURCE_FLAVORS, flavor_record, lambda r: r.meta.name,
                     lambda r: None))


def managed_namespaces(client: Client, selector: str) -> Informer[Meta]:
    """The namespaces `selector` matches (the API server selects them)."""
    return Informer(client, NAMESPACES, meta_of, lambda r: r.name, lambda r: None,
                    label_selector=selector)


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

    def __init__(self, client: Client, workloads: Informer[WorkloadRecord],
                 flavors: Informer[FlavorRecord], recorder: EventRecorder, *,
                 namespaces: Informer[Meta] | None = None, without_queue_name: bool = False):
        self.client = client
        self.workloads = workloads
        self.flavors = flavors
        self.recorder = recorder
        self.namespaces = namespaces
        """The namespaces whose jobs are queued (None: every one)."""
        self.without_queue_name = without_queue_name
        self.writes = WorkloadWrites(client, recorder)
        self._told: dict[tuple[str, str], tuple[str, str]] = {}
        """(kind, job key) -> (Workload UID, message) of the last Pending event told."""

    def informers(self) -> list[Informer[Any]]:
        return [self.workloads, self.flavors, *([self.namespaces] if self.namespaces else [])]

    async def takes(self, job: Job) -> bool | None:
        """Whether Kueue's rules queue the job (engine.queueing.queued), or None where it
        was just given the default LocalQueue: it comes back labelled."""
        if not await self._managed(job.namespace):
            return False
        if queueing.wants_default_queue(job) and await self._has_default_queue(job.namespace):
            await self.client.patch(job_resource(job.kind).path(job.namespace, job.name), {
                "metadata": {"labels": {wl.QUEUE_LABEL: queueing.DEFAULT_QUEUE}}})
            log.info("%s %s: queued in the namespace's LocalQueue %s, as it names none",
                     job.kind, job.key, queueing.DEFAULT_QUEUE)
            return None
        return queueing.queued(job, managed_namespace=True,
                               without_queue_name=self.without_queue_name)

    async def _managed(self, namespace: str) -> bool:
        if self.namespaces is None or self.namespaces.get(namespace) is not None:
            return True
        # not (yet) in the cache, maybe only just made: the API server decides
        found = await self.client.get(NAMESPACES.path(), {
            "labelSelector": self.namespaces.label_selector or "",
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

    def of(self, job: Job) -> list[dict[str, Any]]:
        """The job's Workloads (those it owns, and the prebuilt one it names)."""
        found = [r.obj for r in self.workloads.owned_by(
            owner_key(job.namespace, job.kind, job.metadata.uid or ""))]
        prebuilt = queueing.prebuilt_name(job)
        if prebuilt is not None:
            rec = self.workloads.get(f"{job.namespace}/{prebuilt}")
            if rec is not None and rec.obj not in found:
                found.append(rec.obj)
        return found

    async def priority(self, written: Job) -> Priority:
        """The Workload's priority (ExtractPriority): the job's WorkloadPriorityClass
        label, else the PriorityClass of its run policy or first template naming one, else
        the cluster's global default PriorityClass."""
        wpc = (written.metadata.labels or {}).get(wl.PRIORITY_CLASS_LABEL)
        if wpc:
            found = await self.client.get(WORKLOAD_PRIORITY_CLASSES.path(name=wpc))
            return Priority("WorkloadPriorityClass", wpc, int(found.get("value") or 0))
        name = wl.priority_class_name(written)
        if name:
            if not wl.dns_subdomain(name):
                # its author's text, never a path of the manager's choosing
                raise WorkloadError(f"priority class {name[:64]!r} is not a valid name")
            found = await self.client.get(PRIORITY_CLASSES.path(name=name))
            return Priority("PriorityClass", name, int(found.get("value") or 0))
        listed = await self.client.get(PRIORITY_CLASSES.path())
        defaults = [pc for pc in listed.get("items") or [] if pc.get("globalDefault")]
        if not defaults:
            return Priority()
        low = min(defaults, key=lambda pc: int(pc.get("value") or 0))
        return Priority("PriorityClass", low["metadata"]["name"], int(low.get("value") or 0))

    async def sync(self, written: Job, job: Defaulted, obj: dict[str, Any]) -> Defaulted | None:
        """Carry out the queued job's next step; returns the job for the engine to run
        now (its templates given the admission's additions), or None: the step changed
        the job or its Workloads, and the engine runs once the caches show that."""
        workloads = self.of(written)
        theirs = queueing.kept_by_another(written, workloads)
        if theirs is not None:
            self.tell_kept_by_another(written, obj, theirs)
            return job
        state, now = job_state(job), wallclock.now()

        def decide(priority: Priority) -> queueing.Step:
            # in a worker thread: building and comparing the pod sets of a job of 1.5 MiB
            # takes a while, which probes, the lease and watches need not wait for
            return queueing.decide(written, state, workloads, wl.desired(written, priority),
                                   wait_for_pods_ready=True, now=now)
        try:
            step = await asyncio.to_thread(decide, Priority())
            if step.create is not None or step.replace_spec:
                # a Workload to write: with its priority, looked up only then
                step = await asyncio.to_thread(decide, await self.priority(written))
        except WorkloadError as err:
            self.recorder.record(obj, Event("Warning", "FailedToCreateWorkload", str(err)))
            return None
        except APIError as err:
            if not err.not_found:
                raise
            self.recorder.record(obj, Event("Warning", "FailedToCreateWorkload",
                                            f"priority class: {err.message}"))
            return None
        if step != Step():
            await self.writes.carry_out(written, obj, step)
            return None
        admitted = next((w for w in workloads if wl.is_admitted(w)), None)
        if admitted is None:
            self.tell_pending(written, obj, workloads)
        if admitted is None or job.spec.run_policy.suspend:
            return job
        flavors = {r.meta.name: r.spec for r in self.flavors.items.values()}
        try:
            return admitted_job(job, wl.admitted(admitted, flavors))
        except WorkloadError as err:
            # Kueue finishes a Workload whose admission cannot be applied (FailedToStart)
            await self.writes.patch_status(queueing.StatusPatch(admitted, queueing.conditions_with(
                admitted, "Finished", "True", "FailedToStart", str(err), wallclock.now())))
            return None

    def tell_pending(self, written: Job, obj: dict[str, Any],
                     workloads: list[dict[str, Any]]) -> None:
        """Say on the job why its Workload waits, once per reason Kueue gives (a Warning
        where Kueue cannot admit it as it stands: no such LocalQueue, too large for every
        flavor)."""
        for workload in workloads:
            why = queueing.pending(workload)
            if why is None:
                continue
            told = (workload["metadata"].get("uid", ""), why[1])
            if self._told.get((written.kind, written.key)) == told:
                return
            self._told[(written.kind, written.key)] = told
            kind = "Warning" if why[0] == "Inadmissible" else "Normal"
            self.recorder.record(obj, Event(kind, "Pending",
                                            f"Workload {queueing.key(workload)}: {why[1]}"))
            return

    def tell_kept_by_another(self, written: Job, obj: dict[str, Any],
                             workload: Mapping[str, Any]) -> None:
        """Say once on the job that Kueue's own integration keeps its Workload (both were
        set to: Kueue's built-in integration of the kind is on, and --kueue-workloads names
        it), and that trainop leaves it to Kueue."""
        owner = queueing.controller(workload) or {}
        told = (workload["metadata"].get("uid", ""), "kept by another")
        if self._told.get((written.kind, written.key)) == told:
            return
        self._told[(written.kind, written.key)] = told
        log.warning("%s %s: Kueue's own integration keeps its Workload %s; trainop leaves "
                    "it alone (take %s off --kueue-workloads)", written.kind, written.key,
                    queueing.key(workload), written.kind.lower())
        self.recorder.record(obj, Event(
            "Warning", "WorkloadKeptByKueue",
            f"Workload {queueing.key(workload)} is kept by Kueue's own integration of "
            f"{owner.get('kind', written.kind)} {owner.get('apiVersion', '')}: trainop "
            f"leaves it to Kueue (--kueue-workloads names {written.kind.lower()} too)"))

    def forget(self, kind: str, key: str) -> None:
        """A deleted job's memory of what it was told."""
        self._told.pop((kind, key), None)
