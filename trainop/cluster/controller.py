"""One controller per job kind: work queue -> engine -> API writes."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from trainop.api import InvalidJob, Job, JobStatus, load_job
from trainop.cluster import metrics
from trainop.cluster.caches import Caches
from trainop.cluster.client import MAX_IN_FLIGHT, REQUEST_ERRORS, APIError, Client
from trainop.cluster.events import EventRecorder
from trainop.cluster.expectations import Expectations
from trainop.cluster.records import JobRecord, ObjectRecord, PodRecord, meta_of, owner_key
from trainop.cluster.resources import (
    CONFIGMAPS,
    JOBS,
    PLUGINS_PODGROUPS,
    PODS,
    SECRETS,
    SERVICES,
    VOLCANO_PODGROUPS,
    Resource,
    hpa,
)
from trainop.cluster.sshkeys import new_key_pair
from trainop.cluster.workqueue import WorkQueue
from trainop.engine import (
    ClusterAddressing,
    EngineConfig,
    Event,
    ObjectRef,
    Observed,
    OwnedObject,
    Plan,
    PodState,
    create_refused,
    created_only,
    reconcile,
    rejected,
)
from trainop.engine import conditions as cond
from trainop.engine.gang import VOLCANO_API
from trainop.engine.labels import replica_type_of
from trainop.frameworks import framework_for

log = logging.getLogger("trainop.controller")
REJECTED = (400, 422)
"""API answers that mean the object itself is wrong: retrying cannot help."""


def _parse(rec: JobRecord) -> Job:
    return load_job(rec.object())


def _kind_of(item: Any) -> str:
    return str(item.kind if isinstance(item, ObjectRef) else item["kind"])


@dataclass
class ControllerConfig:
    engine: EngineConfig
    threads: int = 1


class JobController:
    def __init__(self, kind: str, client: Client, caches: Caches, config: ControllerConfig,
                 recorder: EventRecorder, leading: Callable[[], bool]):
        self.kind = kind
        self.client = client
        self.caches = caches
        self.config = config
        self.recorder = recorder
        self.leading = leading
        self.framework = framework_for(kind)
        self.addr = ClusterAddressing()
        self.queue = WorkQueue(kind)
        self.expectations = Expectations()
        self._parsed: dict[str, tuple[str, Job]] = {}
        """Key -> (resourceVersion, defaulted job): parse a job once per version."""
        self.jobs = caches.jobs[kind]
        self.jobs.add_handler(self._on_job)
        assert caches.pods is not None
        caches.pods.add_handler(self._on_pod)
        for informer in caches.objects.values():
            informer.add_handler(self._on_object)

    # -- informer events -> queue ----------------------------------------------------
    def _on_job(self, kind: str, new: JobRecord | None, old: JobRecord | None) -> None:
        rec = new or old
        assert rec is not None
        key = rec.key
        if kind == "DELETED":
            self.expectations.forget(key)
            self._parsed.pop(key, None)
            return
        if old is not None and new is not None and \
                old.meta.resource_version == new.meta.resource_version:
            return  # our own write, already in the cache: nothing new
        self.queue.add(key)

    def _owner_key(self, rec: PodRecord | ObjectRecord) -> str | None:
        if rec.meta.owner_kind != self.kind or not rec.meta.owner_name:
            return None
        return f"{rec.meta.namespace}/{rec.meta.owner_name}"

    def _on_pod(self, kind: str, new: PodRecord | None, old: PodRecord | None) -> None:
        rec = new or old
        assert rec is not None
        key = self._owner_key(rec)
        if key is None:
            return
        if kind == "ADDED":
            self.expectations.observed_add(key, rec.meta.name)
        elif kind == "DELETED":
            self.expectations.observed_delete(key, rec.meta.name)
        self.queue.add(key)

    def _on_object(self, kind: str, new: ObjectRecord | None, old: ObjectRecord | None) -> None:
        rec = new or old
        assert rec is not None
        key = self._owner_key(rec)
        if key is not None:
            self.queue.add(key)

    # -- workers -----------------------------------------------------------------------
    async def run(self) -> None:
        for key in list(self.jobs.items):
            self.queue.add(key)
        await asyncio.gather(*(self._worker() for _ in range(self.config.threads)))

    async def _worker(self) -> None:
        while True:
            key = await self.queue.get()
            started = time.perf_counter()
            try:
                requeue = await self.sync(key)
            except asyncio.CancelledError:
                raise
            except REQUEST_ERRORS as err:
                metrics.RECONCILE_ERRORS.labels(self.kind).inc()
                log.warning("%s %s: %s; retrying", self.kind, key, err)
                self.queue.add_rate_limited(key)
            except Exception:
                metrics.RECONCILE_ERRORS.labels(self.kind).inc()
                log.exception("%s %s: reconcile failed; retrying", self.kind, key)
                self.queue.add_rate_limited(key)
            else:
                self.queue.forget(key)
                if requeue is not None:
                    self.queue.add_after(key, requeue)
            finally:
                metrics.RECONCILE_SECONDS.labels(self.kind).observe(
                    time.perf_counter() - started)
                self.queue.done(key)

    # -- one reconcile -------------------------------------------------------------------
    def observed(self, job: Job) -> Observed:
        """What the caches hold of the job's own pods and objects: those whose controller
        reference names this kind, this UID, in the job's namespace."""
        assert self.caches.pods is not None
        owner = owner_key(job.namespace, self.kind, job.metadata.uid or "")
        main = job.main_container
        pods = tuple(
            PodState(p.meta.name, replica_type_of(job, p.replica_type) or p.replica_type,
                     p.index, phase=p.phase, terminating=p.terminating,
                     exit_code=p.exit_code(main), reason=p.reason, restarts=p.restarts,
                     ready=p.ready)
            for p in self.caches.pods.owned_by(owner))
        objects = tuple(OwnedObject(o.kind, o.meta.name, o.phase, o.content)
                        for o in self.caches.owned_objects(owner))
        return Observed(pods=pods, objects=objects)

    async def sync(self, key: str) -> float | None:
        if not self.leading():
            return None
        rec = self.jobs.get(key)
        if rec is None or not self.expectations.satisfied(key):
            return None  # deleted, or waiting for the cache to show our last writes
        obj = rec.head()
        rv = rec.meta.resource_version
        cached = self._parsed.get(key)
        if cached is not None and cached[0] == rv:
            job = cached[1]
        else:
            try:
                # parsing and planning run in a worker thread: a job of thousands of
                # replicas must not hold up the event loop (probes, the lease, watches)
                job = await asyncio.to_thread(_parse, rec)
            except InvalidJob as err:
                await self._fail_invalid(obj, err)
                return None
            self._parsed[key] = (rv, job)
        observed = self.observed(job)
        if self.framework.wants_ssh_key(job, observed):
            observed = Observed(observed.pods, observed.objects, ssh_key=new_key_pair())
        plan = await asyncio.to_thread(reconcile, job, observed, dt.datetime.now(dt.UTC),
                                       self.framework, self.addr, self.config.engine)
        await self.apply(key, obj, plan)
        if job.spec.run_policy.suspend or cond.is_finished(plan.status):
            # a job that waits (suspended) or is done changes rarely: parse it again then,
            # rather than keep its parsed copy in memory meanwhile
            self._parsed.pop(key, None)
        return plan.requeue_after

    async def apply(self, key: str, obj: dict[str, Any], plan: Plan) -> None:
        try:
            refused = await self._send(key, obj, plan)
        except REQUEST_ERRORS:
            # Nothing refused for good, but not all made: a new job still shows Created
            # (best effort); the next decision plans and tells the rest again.
            blocked = created_only(plan, _stored_status(obj), dt.datetime.now(dt.UTC))
            if blocked is not None:
                with contextlib.suppress(*REQUEST_ERRORS):
                    await self._commit(key, obj, blocked)
            raise
        if refused:
            plan = create_refused(plan, self.kind, key, refused[0], dt.datetime.now(dt.UTC))
        await self._commit(key, obj, plan)
        if plan.delete_job:
            ns = obj["metadata"]["namespace"]
            try:
                await self.client.delete(JOBS[self.kind].path(ns, obj["metadata"]["name"]),
                                         {"propagationPolicy": "Background"})
                metrics.JOBS_DELETED.labels(ns, self.framework.info.framework).inc()
            except APIError as err:
                if err.status != 404:
                    raise

    async def _commit(self, key: str, obj: dict[str, Any], plan: Plan) -> None:
        """What follows a plan's writes: its status, its events, its metrics."""
        for event in plan.events + plan.on_created:
            self.recorder.record(obj, event)
        if plan.status_changed:
            await self._write_status(key, obj, plan.status)
        ns, framework = obj["metadata"]["namespace"], self.framework.info.framework
        for transition in plan.transitions:
            counter = metrics.BY_TRANSITION.get(transition)
            if counter is not None:
                counter.labels(ns, framework).inc()

    async def _send(self, key: str, obj: dict[str, Any], plan: Plan) -> list[str]:
        """Create the plan's prerequisites, then its replicas (pods and their services in
        one stream), update and delete as planned; returns why the API server refused an
        object for good, if it did. Pods are expected in the cache before
        the next decision, except those never sent (a rejection or an error stopped us).
        A create the API server refuses for now (a quota, throttling) raises, after one
        warning event on the job, and the job is retried with back-off."""
        ns = obj["metadata"]["namespace"]
        adds = {o["metadata"]["name"] for o in plan.create if o["kind"] == "Pod"}
        deletes = {r.name for r in plan.delete if r.kind == "Pod"}
        self.expectations.expect(key, sorted(adds), sorted(deletes))
        sent: set[str] = set()  # the pods asked for
        warned = False

        async def create(o: dict[str, Any]) -> str | None:
            nonlocal warned
            if o["kind"] == "Pod":
                sent.add(o["metadata"]["name"])
            try:
                return await self._create(key, ns, o)
            except APIError as err:
                if not warned:
                    warned = True
                    self.recorder.record(obj, Event(
                        "Warning", f"FailedCreate{o['kind']}",
                        f"Error creating {o['kind']} {o['metadata']['name']}: {err}"))
                raise

        async def delete(r: ObjectRef) -> str | None:
            if r.kind == "Pod":
                sent.add(r.name)
            return await self._delete(key, ns, r)

        try:
            refused = await self._batches(plan.prerequisites, create)
            if not refused:
                refused = await self._batches(plan.create, create)
            for o in plan.update:
                await self.client.patch(self._resource(o["kind"], o["apiVersion"]).path(
                    ns, o["metadata"]["name"]), {k: o[k] for k in ("data", "spec") if k in o})
            await self._batches(plan.delete, delete)
        finally:
            # No plan creates a pod it also deletes (an engine property test checks it),
            # so one set of names serves both.
            self.expectations.lower(key, adds=adds - sent, deletes=deletes - sent)
        return refused

    async def _batches(self, items: list[Any], fn: Callable[[Any], Awaitable[str | None]]
                       ) -> list[str]:
        """Run `fn` over items: the first of each kind alone (a template the API server
        rejects then fails once, not N times), then the rest as a stream with at most
        MAX_IN_FLIGHT at once, stopping at the first rejection. Returns its message."""
        first: dict[str, Any] = {}
        for item in items:
            first.setdefault(_kind_of(item), item)
        firsts = [r for r in await asyncio.gather(*(fn(i) for i in first.values())) if r]
        if firsts:
            return firsts[:1]
        rest = [i for i in items if first.get(_kind_of(i)) is not i]
        sem = asyncio.Semaphore(MAX_IN_FLIGHT)
        rejections: list[str] = []

        async def one(item: Any) -> None:
            async with sem:
                if rejections:
                    return
                refusal = await fn(item)
                if refusal:
                    rejections.append(refusal)
        await asyncio.gather(*(one(i) for i in rest))
        return rejections[:1]

    def _resource(self, kind: str, api_version: str) -> Resource:
        simple = {"Pod": PODS, "Service": SERVICES, "ConfigMap": CONFIGMAPS, "Secret": SECRETS}
        if kind in simple:
            return simple[kind]
        if kind == "PodGroup":
            return VOLCANO_PODGROUPS if api_version == VOLCANO_API else PLUGINS_PODGROUPS
        if kind == "HorizontalPodAutoscaler":
            return hpa(api_version)
        raise ValueError(f"trainop does not manage {kind}")

    async def _create(self, key: str, ns: str, obj: dict[str, Any]) -> str | None:
        name = obj["metadata"]["name"]
        resource = self._resource(obj["kind"], obj["apiVersion"])
        try:
            await self.client.create(resource.path(ns), obj)
        except Exception as err:
            # Whatever went wrong, do not wait for this pod in the cache: if it was made
            # after all, making it again is a harmless 409 (its name is fixed).
            if obj["kind"] == "Pod":
                self.expectations.lower(key, adds=[name])
            if isinstance(err, APIError) and err.status == 409:
                return await self._squatted(resource, ns, obj)
            if isinstance(err, APIError) and err.status in REJECTED:
                return f"{obj['kind']} {name} was rejected by the API server: {err.message}"
            raise
        return None

    async def _squatted(self, resource: Resource, ns: str, obj: dict[str, Any]) -> str | None:
        """After a 409: None when the object there is ours (a create the cache had not shown
        yet), else why the job cannot run. An object someone else made under the name the
        job needs (a ConfigMap with another script, a Secret with another key) is never
        adopted."""
        name = obj["metadata"]["name"]
        # a list by name, not a get: the manager's role lists what it owns, and reads no
        # single Secret it was not given
        found = await self.client.get(resource.path(ns),
                                      {"fieldSelector": f"metadata.name={name}"})
        there = (found.get("items") or [None])[0]
        if there is None:
            return None  # gone meanwhile: the next decision makes it again
        if meta_of(there).owner_uid == obj["metadata"]["ownerReferences"][0]["uid"]:
            return None
        return (f"{obj['kind']} {name} already exists and is not controlled by this job "
                "(delete or rename it)")

    async def _delete(self, key: str, ns: str, ref: ObjectRef) -> str | None:
        try:
            await self.client.delete(self._resource(ref.kind, ref.api_version).path(
                ns, ref.name))
        except Exception as err:
            if ref.kind == "Pod":
                self.expectations.lower(key, deletes=[ref.name])
            if not (isinstance(err, APIError) and err.status == 404):
                raise
        return None

    async def _write_status(self, key: str, obj: dict[str, Any], status: JobStatus) -> None:
        body = {**obj, "status": status.to_dict()}
        try:
            written = await self.client.replace(JOBS[self.kind].path(
                obj["metadata"]["namespace"], obj["metadata"]["name"], "status"), body)
        except APIError as err:
            if err.status == 404:
                return
            raise  # 409: someone changed the job; retried with the fresh object
        self.jobs.put_newer(written)

    async def _fail_invalid(self, obj: dict[str, Any], err: InvalidJob) -> None:
        """A job that got past the schema but cannot run: Failed, once, with the reason."""
        m = obj["metadata"]
        key = f"{m['namespace']}/{m['name']}"
        plan = rejected(_stored_status(obj), self.kind, key, str(err), dt.datetime.now(dt.UTC))
        await self._commit(key, obj, plan)


def _stored_status(obj: dict[str, Any]) -> JobStatus:
    try:
        return JobStatus.model_validate(obj.get("status") or {})
    except ValueError:
        return JobStatus()
