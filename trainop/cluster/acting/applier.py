"""Carrying out a plan on the API server: create (prerequisites first, then the replicas
as one bounded stream), update and delete (each a bounded stream too), then the status,
events and metrics. The applier owns the expectations it raises before its writes and
lowers for what was never made."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from trainop import wallclock
from trainop.api import Job, JobStatus
from trainop.api.persona import TRAINING_OPERATOR, Persona
from trainop.api.resources import (
    CONFIGMAPS,
    JOBS,
    PLUGINS_PODGROUPS,
    SERVICES,
    VOLCANO_PODGROUPS,
    Resource,
    job_resource,
    resource_for,
)
from trainop.cluster.acting import metrics
from trainop.cluster.acting.events import EventRecorder
from trainop.cluster.acting.expectations import Expectations, expected, expected_gone
from trainop.cluster.acting.holders import FIRST_LOOK, Holders, held_by
from trainop.cluster.acting.workload_writes import WorkloadWrites
from trainop.cluster.reading.client import MAX_IN_FLIGHT, REQUEST_ERRORS, APIError, Client
from trainop.cluster.reading.informer import Informer
from trainop.cluster.reading.records import JobRecord, meta_of
from trainop.engine import Event, Held, ObjectRef, Plan, create_refused, created_only
from trainop.engine.objects import patch_of
from trainop.engine.queueing import Step
from trainop.engine.waiting import not_ours

log = logging.getLogger("trainop.applier")

ADOPTED = (CONFIGMAPS, SERVICES, JOBS, VOLCANO_PODGROUPS, PLUGINS_PODGROUPS)
"""What of a job's own objects made by another operator the applier labels for the caches
(mpi-operator's of a v2beta1 MPIJob; its pods carry trainop's labels already)."""
REJECTED = (400, 422)
"""API answers that mean the object itself is wrong: retrying cannot help."""


class Refused(Exception):
    """The API server refused an object of the plan for good (a template it rejects, a
    name taken by an object the job does not control): the job cannot run."""


class NameHeld(Exception):
    """A name the plan needs is held by an object that is going (an earlier job of the
    same kind and name, or anything being deleted): made once it is gone."""

    def __init__(self, held: Held, resource: Resource):
        super().__init__(f"{held.described()} is still there")
        self.held, self.resource = held, resource


class PlanApplier:
    """Applies the plans of one job kind; `expectations` say which jobs wait for the cache
    to show the pods this applier made or deleted."""

    def __init__(self, kind: str, framework: str, client: Client,
                 jobs: Informer[JobRecord], recorder: EventRecorder):
        self.kind = kind
        self.framework = framework
        """The `framework` label of the job metrics."""
        self.client = client
        self.jobs = jobs
        self.recorder = recorder
        self.expectations = Expectations()
        self.workloads = WorkloadWrites(client, recorder, self.expectations)
        """Kueue's steps for the jobs this applier's kind queues."""
        self.holders = Holders(kind, client)
        """What holds a name a job needs, that the caches do not show."""

    async def apply(self, key: str, obj: dict[str, Any], plan: Plan,
                    persona: Persona = TRAINING_OPERATOR) -> float | None:
        """Send `plan`; the seconds after which the job is to be decided again (the plan's,
        or a second where a name it needs is still held). `persona`: the job's, whose
        counters count it."""
        try:
            await self._send(key, obj, plan)
        except NameHeld as held:
            # the caches do not show the holder: remembered, the next decisions see it
            # (the replica says what it waits for, and no request is made for its name)
            # and it is looked at again with back-off; a new job shows Created meanwhile
            log.info("%s %s: %s; looking again in %.0fs", self.kind, key, held, FIRST_LOOK)
            self.holders.remember(key, held.held, held.resource)
            blocked = created_only(plan, stored_status(obj), wallclock.now())
            if blocked is not None:
                await self.commit(key, obj, blocked, persona)
            return 0.0
        except Refused as refusal:
            plan = create_refused(plan, self.kind, key, str(refusal), wallclock.now())
        except REQUEST_ERRORS:
            # Nothing refused for good, but not all made: a new job still shows Created
            # (best effort); the next decision plans and tells the rest again.
            blocked = created_only(plan, stored_status(obj), wallclock.now())
            if blocked is not None:
                with contextlib.suppress(*REQUEST_ERRORS):
                    await self.commit(key, obj, blocked, persona)
            raise
        await self.commit(key, obj, plan, persona)
        if plan.delete_job:
            ns = obj["metadata"]["namespace"]
            try:
                await self.client.delete(job_resource(self.kind).path(ns, obj["metadata"]["name"]),
                                         {"propagationPolicy": "Background"})
            except APIError as err:
                if not err.not_found:
                    raise
                return None  # an earlier round deleted it, and told so
            metrics.count_jobs({"deleted": 1}, ns, self.framework, persona)
            for event in plan.on_deleted:
                self.recorder.record(obj, event)
        return plan.requeue_after

    async def apply_queue(self, written: Job, obj: dict[str, Any], step: Step) -> None:
        """Carry out Kueue's step for a queued job (engine/queueing.py): its Workloads
        written, the job suspended or resumed, the step's events told."""
        await self.workloads.carry_out(written, obj, step)

    async def commit(self, key: str, obj: dict[str, Any], plan: Plan,
                     persona: Persona = TRAINING_OPERATOR) -> None:
        """What follows a plan's writes: its status, its events, its metrics. Events that
        announce a transition are told only once the status that holds it is stored: a
        conflict on the status write raises, the job is decided again from the fresh
        object, and the transition is told once, by the attempt that stores it. Those that
        tell of the writes just made (creations, deletions) are told either way."""
        if plan.status_changed:
            try:
                await self._write_status(key, obj, plan.status)
            except BaseException:
                for event in plan.on_removed + plan.on_created:
                    self.recorder.record(obj, event)
                raise
        for event in plan.on_removed + plan.events + plan.on_created:
            self.recorder.record(obj, event)
        metrics.count_jobs(plan.metrics, obj["metadata"]["namespace"], self.framework,
                           persona)

    async def _send(self, key: str, obj: dict[str, Any], plan: Plan) -> None:
        """Create the plan's prerequisites (in order), then its replicas (pods and their
        services in one stream), then update and delete as planned (each one stream: no
        update or deletion needs another first). An object the API server refuses for
        good raises Refused and stops what follows; one it refuses for now (a quota,
        throttling) raises its error, after one warning event on the job, and the job is
        retried with back-off. The pods and services it makes or deletes are waited for in
        the cache before the next decision, except those never sent (a refusal or an error
        stopped us) and those already gone."""
        ns = obj["metadata"]["namespace"]
        adds = {e for o in plan.create
                if (e := expected(o["kind"], o["metadata"]["name"])) is not None}
        deletes = {e for r in plan.delete if (e := expected_gone(r.kind, r.name)) is not None}
        self.expectations.expect(key, sorted(adds), sorted(deletes))
        sent: set[str] = set()  # the pods and services asked for (as expectations name them)
        warned = False

        async def create(o: dict[str, Any]) -> None:
            nonlocal warned
            if (e := expected(o["kind"], o["metadata"]["name"])) is not None:
                sent.add(e)
            try:
                await self._create(key, ns, o)
            except APIError as err:
                if not warned:
                    warned = True
                    self.recorder.record(obj, Event(
                        "Warning", f"FailedCreate{o['kind']}",
                        f"Error creating {o['kind']} {o['metadata']['name']}: {err}"))
                raise

        async def delete(r: ObjectRef) -> None:
            if (e := expected_gone(r.kind, r.name)) is not None:
                sent.add(e)
            await self._delete(key, ns, r)

        async def update(o: dict[str, Any]) -> None:
            patch = patch_of(o)
            await self.client.patch(resource_for(o["kind"], o["apiVersion"]).path(
                ns, o["metadata"]["name"]), patch, "application/json-patch+json"
                if isinstance(patch, list) else "application/merge-patch+json")

        try:
            # one at a time, in the plan's order: what needs another object (a RoleBinding
            # its Role) is sent only once that one is made, and is the job's
            for o in plan.prerequisites:
                await create(o)
            await self._batches(plan.create, create)
            await self._batches(plan.update, update)
            await self._batches(plan.delete, delete)
        finally:
            # No plan creates a pod or service it also deletes (it deletes only what it
            # observes, and makes only what it does not: an engine property test checks
            # it), so one set of names serves both.
            self.expectations.lower(key, adds=adds - sent, deletes=deletes - sent)

    async def _batches(self, items: list[Any], fn: Callable[[Any], Awaitable[None]]) -> None:
        """Run `fn` over items: the first of each kind alone (a template the API server
        refuses then fails once, not N times), then the rest as a stream with at most
        MAX_IN_FLIGHT at once; the first error (Refused, say) stops what is not sent yet
        and is raised once the requests under way have ended."""
        first: dict[str, Any] = {}
        for item in items:
            first.setdefault(_kind_of(item), item)
        await _gather_first_error([fn(i) for i in first.values()])
        rest = [i for i in items if first.get(_kind_of(i)) is not i]
        sem = asyncio.Semaphore(MAX_IN_FLIGHT)
        stop = False

        async def one(item: Any) -> None:
            nonlocal stop
            async with sem:
                if stop:
                    return
                try:
                    await fn(item)
                except BaseException:
                    stop = True
                    raise
        await _gather_first_error([one(i) for i in rest])

    async def _create(self, key: str, ns: str, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        resource = resource_for(obj["kind"], obj["apiVersion"])
        try:
            await self.client.create(resource.path(ns), obj)
        except Exception as err:
            # Whatever went wrong, do not wait for this object in the cache: if it was made
            # after all, making it again is a harmless 409 (its name is fixed).
            if (e := expected(obj["kind"], name)) is not None:
                self.expectations.lower(key, adds=[e])
            if isinstance(err, APIError) and err.conflict:
                await self._squatted(resource, ns, obj)
                return
            if isinstance(err, APIError) and err.status in REJECTED:
                raise Refused(f"{obj['kind']} {name} was rejected by the API server: "
                              f"{err.message}") from None
            raise

    async def _squatted(self, resource: Resource, ns: str, obj: dict[str, Any]) -> None:
        """After a 409: nothing when the object there is ours (a create the cache had not
        shown yet); NameHeld when it is going (Held.going); else Refused. An object
        someone else made under the name the job needs (a ConfigMap with another script, a
        Secret with another key) is never adopted."""
        name = obj["metadata"]["name"]
        # a list by name, not a get: the manager's role lists what it owns, and reads no
        # single Secret it was not given
        found = await self.client.get(resource.path(ns),
                                      {"fieldSelector": f"metadata.name={name}"})
        there = (found.get("items") or [None])[0]
        if there is None:
            return  # gone meanwhile: the next decision makes it again
        meta, owner = meta_of(there), obj["metadata"]["ownerReferences"][0]
        if meta.owner_uid == owner["uid"]:
            await self._adopt(resource, ns, there, obj)
            return
        held = held_by(obj["kind"], there)
        if held.going(owner["kind"], owner["name"]):
            raise NameHeld(held, resource)
        raise Refused(not_ours(obj["kind"], name))

    async def _adopt(self, resource: Resource, ns: str, there: dict[str, Any],
                     obj: dict[str, Any]) -> None:
        """The job's own object that the caches cannot see because it lacks the labels
        they select on (mpi-operator made it, for a job trainop now runs: the API served at
        a second version): given them, so that the next decision sees it. A Secret is
        left as it is (the manager may not change one); only its keys' absence shows."""
        labels = obj["metadata"].get("labels") or {}
        have = (there.get("metadata") or {}).get("labels") or {}
        if resource not in ADOPTED or all(have.get(k) == v for k, v in labels.items()):
            return
        log.info("%s %s/%s is the job's own: labelled for the caches", resource.kind, ns,
                 obj["metadata"]["name"])
        await self.client.patch(resource.path(ns, obj["metadata"]["name"]),
                                {"metadata": {"labels": labels}})

    async def _delete(self, key: str, ns: str, ref: ObjectRef) -> None:
        body = None if ref.grace is None else {
            "apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": ref.grace}
        try:
            await self.client.delete(resource_for(ref.kind, ref.api_version).path(
                ns, ref.name), body)
        except Exception as err:
            if (e := expected_gone(ref.kind, ref.name)) is not None:
                self.expectations.lower(key, deletes=[e])
            if not (isinstance(err, APIError) and err.not_found):
                raise

    async def _write_status(self, key: str, obj: dict[str, Any], status: JobStatus) -> None:
        body = {**obj, "status": status.to_dict()}
        try:
            written = await self.client.replace(job_resource(self.kind).path(
                obj["metadata"]["namespace"], obj["metadata"]["name"], "status"), body)
        except APIError as err:
            if err.not_found:
                return
            raise  # 409: someone changed the job; retried with the fresh object
        self.jobs.put_newer(written)


def stored_status(obj: dict[str, Any]) -> JobStatus:
    """The status a job carries now (an unreadable one counts as none)."""
    try:
        return JobStatus.model_validate(obj.get("status") or {})
    except ValueError:
        return JobStatus()


def _kind_of(item: Any) -> str:
    return str(item.kind if isinstance(item, ObjectRef) else item["kind"])


async def _gather_first_error(coros: list[Awaitable[None]]) -> None:
    """Run all; once all have ended, raise the first error any of them raised."""
    results = await asyncio.gather(*coros, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
