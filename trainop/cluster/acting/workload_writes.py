"""Kueue's writes for a queued job: its queue-name label given, its Workload made, adopted,
re-specified, deleted and given its status, Kueue's finalizer removed where the quota is no
longer the job's, and the job suspended or resumed, as engine/queueing.py's step says. A
Workload made is waited for in the cache (expectations) before the job is decided again."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from trainop.api import Job
from trainop.api.resources import WORKLOADS, job_resource
from trainop.cluster.acting.events import EventRecorder
from trainop.cluster.acting.expectations import Expectations, expected
from trainop.cluster.reading.client import APIError, Client
from trainop.engine import queueing
from trainop.engine import workload as wl
from trainop.engine.labels import owner_reference
from trainop.engine.queueing import Step
from trainop.engine.workload_record import Workload

log = logging.getLogger(__name__)


class WorkloadWrites:
    """Carries out the queue's steps on the API server."""

    def __init__(self, client: Client, recorder: EventRecorder, expectations: Expectations):
        self.client = client
        self.recorder = recorder
        self.expectations = expectations
        self._tasks: set[asyncio.Task[None]] = set()
        self._releasing: set[str] = set()
        """Workloads whose finalizer a task is removing."""

    async def carry_out(self, written: Job, obj: dict[str, Any], step: Step) -> None:
        ns = written.namespace
        if step.queue_label is not None:
            await self.client.patch(job_resource(written.kind).path(ns, written.name), {
                "metadata": {"labels": {wl.QUEUE_LABEL: step.queue_label}}})
            log.info("%s %s: queued in the namespace's LocalQueue %s, as it names none",
                     written.kind, written.key, step.queue_label)
        if step.adopt is not None:
            adopt = step.adopt
            await self.client.patch(WORKLOADS.path(ns, adopt.name), {"metadata": {
                "resourceVersion": adopt.resource_version,
                "labels": {wl.JOB_UID_LABEL: written.metadata.uid or ""},
                "ownerReferences": [*(o.written() for o in adopt.owners),
                                    owner_reference(written)]}})
        if step.create is not None:
            made = str(expected(WORKLOADS.kind, step.create["metadata"]["name"]))
            self.expectations.expect(written.key, [made], [])
            try:
                await self.client.create(WORKLOADS.path(ns), step.create)
            except BaseException as err:
                # never made by this request: nothing new for the cache to show
                self.expectations.lower(written.key, adds=[made])
                if not isinstance(err, APIError) or err.status != 409:
                    raise
        for target, spec in step.replace_spec:
            await self.client.patch(WORKLOADS.path(ns, target.name), {
                "metadata": {"resourceVersion": target.resource_version}, "spec": spec})
        for gone in step.delete:
            await self.release(gone)
            await self._ignore_missing(self.client.delete(WORKLOADS.path(ns, gone.name)))
        for patch in step.status:
            await self.patch_status(patch)
        for held in step.release:
            await self.release(held)
        if step.suspend is not None:
            meta = obj["metadata"]
            await self.client.patch(job_resource(obj["kind"]).path(
                meta["namespace"], meta["name"]), {"spec": {"runPolicy": {
                    "suspend": step.suspend}}})
        for event in step.events:
            self.recorder.record(obj, event)

    async def patch_status(self, patch: queueing.StatusPatch) -> None:
        """The Workload's status, as of the version read (a conflict: read again)."""
        workload = patch.workload
        body: dict[str, Any] = {"metadata": {"resourceVersion": workload.resource_version},
                                "status": {}}
        if patch.conditions is not None:
            body["status"]["conditions"] = [c.written() for c in patch.conditions]
        if patch.clear_admission:
            body["status"]["admission"] = None
        if patch.reclaimable_pods is not None:
            body["status"]["reclaimablePods"] = patch.reclaimable_pods or None
        await self.client.patch(
            WORKLOADS.path(workload.namespace, workload.name, "status"), body)

    def release_soon(self, workload: Workload) -> None:
        """release(), in a task of its own (from an informer's handler), one at a time for
        a Workload however many events it has."""
        key = workload.key
        if key in self._releasing:
            return
        self._releasing.add(key)

        async def go() -> None:
            try:
                await self.release(workload)
            except APIError as err:
                log.warning("cannot release Workload %s: %s", key, err)
            finally:
                self._releasing.discard(key)
        task = asyncio.get_running_loop().create_task(go())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def release(self, workload: Workload) -> None:
        """Remove Kueue's finalizer (the Workload's quota is no longer the job's to hold)."""
        if wl.FINALIZER not in workload.finalizers:
            return
        await self._ignore_missing(self.client.patch(
            WORKLOADS.path(workload.namespace, workload.name), {"metadata": {
                "resourceVersion": workload.resource_version,
                "finalizers": [f for f in workload.finalizers if f != wl.FINALIZER]}}))

    @staticmethod
    async def _ignore_missing(call: Any) -> None:
        try:
            await call
        except APIError as err:
            if err.status != 404:
                raise

