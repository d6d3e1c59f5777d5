"""The manager's reading of a queued job for Kueue (trainop/cluster/acting/kueue.py): the
state Kueue's integration reads, and the admitted job the engine makes pods from."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, cast

import pytest

from tests.jobs import TYPICAL, job, manifest
from trainop.api import Job, load_job
from trainop.cluster.acting.expectations import Expectations
from trainop.cluster.acting.kueue import Queueing, admitted_job, job_state
from trainop.cluster.acting.workload_writes import WorkloadWrites
from trainop.cluster.reading.client import APIError, Client
from trainop.cluster.reading.kueue_caches import KueueCaches, workload_record
from trainop.engine import workload as wl
from trainop.engine.plan import Event
from trainop.engine.queueing import JobState, Step
from trainop.engine.workload import PodSetInfo
from trainop.engine.workload_record import Workload


def with_status(status: dict[str, Any], suspend: bool = False) -> Job:
    doc = manifest("PyTorchJob", TYPICAL["PyTorchJob"],
                   spec={"runPolicy": {"suspend": suspend}})
    return load_job({**doc, "status": status})


def test_the_state_kueue_reads_of_a_job() -> None:
    fresh = job("PyTorchJob")
    assert job_state(fresh) == JobState(suspended=False, active=False, running=False,
                                        ended=None, started=False)
    status = {"startTime": "2026-12-03T08:00:00Z",
              "replicaStatuses": {"Master": {"active": 1}, "Worker": {"succeeded": 2}},
              "conditions": [{"type": "Running", "status": "True"}]}
    assert job_state(with_status(status)) == JobState(
        suspended=False, active=True, running=True, ended=None, started=True,
        succeeded={"Worker": 2})
    status = {**status, "replicaStatuses": {"Master": {"failed": 1}}, "conditions": [
        {"type": "Running", "status": "False"},
        {"type": "Failed", "status": "True", "message": "it failed"}]}
    assert job_state(with_status(status, suspend=True)) == JobState(
        suspended=True, active=False, running=False, ended=(False, "it failed"), started=True)


def test_the_admission_goes_to_the_engines_copy_of_the_templates_only() -> None:
    j = job("PyTorchJob")
    info = PodSetInfo(labels={"kueue.x-k8s.io/podset": "worker"},
                      node_selector={"pool": "a"})
    admitted = admitted_job(j, {"worker": info})
    worker = admitted.spec.replica_specs["Worker"].template or {}
    assert worker["spec"]["nodeSelector"] == {"pool": "a"}
    assert worker["metadata"]["labels"] == {"kueue.x-k8s.io/podset": "worker"}
    assert "nodeSelector" not in (admitted.spec.replica_specs["Master"].template or {})["spec"]
    # the parsed job the manager keeps is not changed
    assert "nodeSelector" not in (j.spec.replica_specs["Worker"].template or {})["spec"]
    assert admitted_job(j, {}) is j


class Told:
    """Collects what the Queueing tells (in place of the manager's event recorder)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def record(self, obj: dict[str, Any], event: Event) -> None:
        self.events.append((event.type, event.reason, event.message))


def pending_workload(uid: str, reason: str, message: str) -> Workload:
    return wl.read({"metadata": {"namespace": "default", "name": "wl", "uid": uid},
                    "status": {"conditions": [{"type": "QuotaReserved", "status": "False",
                                               "reason": reason, "message": message}]}})


def caches(client: Client | None = None) -> KueueCaches:
    """Kueue's caches, filled by the test (no informer runs)."""
    return KueueCaches(cast(Client, client), None)


def test_why_a_workload_waits_is_told_once_per_reason() -> None:
    told = Told()
    q = Queueing(cast(Client, None), caches(), cast(Any, told))
    j = job("PyTorchJob")
    lost = pending_workload("u1", "Inadmissible", "LocalQueue q doesn't exist")
    for _ in range(3):
        q.tell_pending(j, {}, [lost])
    assert told.events == [("Warning", "Pending", "Workload default/wl: LocalQueue q doesn't "
                                                  "exist")]
    # another reason, then another Workload with the same one: each told
    q.tell_pending(j, {}, [pending_workload("u1", "Pending", "couldn't assign flavors")])
    q.tell_pending(j, {}, [pending_workload("u2", "Pending", "couldn't assign flavors")])
    assert [e[0] for e in told.events] == ["Warning", "Normal", "Normal"]
    # forgotten with the job: told again for a job made again under its name
    q.forget("PyTorchJob", j.key)
    q.tell_pending(j, {}, [pending_workload("u2", "Pending", "couldn't assign flavors")])
    assert len(told.events) == 4
    # another kind's job of the same name is its own
    q.tell_pending(job("TFJob"), {}, [pending_workload("u2", "Pending", "couldn't assign "
                                                                        "flavors")])
    assert len(told.events) == 5


def test_a_job_whose_workload_kueue_keeps_is_left_to_kueue_and_that_is_told_once() -> None:
    told = Told()
    doc = manifest("MPIJob", TYPICAL["MPIJob"], uid="uid-1")
    doc["metadata"]["labels"] = {wl.QUEUE_LABEL: "q"}
    j = load_job(doc)
    kueues = wl.desired(j, wl.Priority())
    kueues["metadata"]["ownerReferences"][0]["apiVersion"] = "kubeflow.org/v2beta1"
    kueues["metadata"]["uid"] = "w1"
    # no client: a write of any kind would fail the test
    kept = caches()
    kept.workloads.put(workload_record(kueues))
    q = Queueing(cast(Client, None), kept, cast(Any, told))
    for _ in range(2):
        assert asyncio.run(q.sync(j, j, doc)) is j  # the engine runs it as Kueue has it
    name = kueues["metadata"]["name"]
    assert told.events == [(
        "Warning", "WorkloadKeptByKueue",
        f"Workload default/{name} is kept by Kueue's own integration of MPIJob "
        "kubeflow.org/v2beta1: trainop leaves it to Kueue (--kueue-workloads names mpijob "
        "too)")]


def test_a_job_admitted_partly_runs_as_many_replicas_as_were_admitted() -> None:
    j = job("PyTorchJob", {"Worker": 4},
            spec={"elasticPolicy": {"minReplicas": 2, "maxReplicas": 4}})
    admitted = admitted_job(j, {"worker": PodSetInfo(count=2)})
    assert admitted.spec.replica_specs["Worker"].replicas == 2
    assert j.spec.replica_specs["Worker"].replicas == 4  # the manager's copy unchanged
    assert admitted_job(j, {"worker": PodSetInfo(count=4)}).spec.replica_specs[
        "Worker"].replicas == 4


def test_a_workload_is_released_by_one_task_however_many_events_it_has() -> None:
    # each event on a Workload being deleted whose job is gone asks for its release
    from aiohttp import web

    from tests.unit.test_informer_faults import client_of

    patches: list[str] = []

    async def scenario() -> None:
        release = asyncio.Event()

        async def patch(request: web.Request) -> web.Response:
            patches.append(request.match_info["name"])
            await release.wait()
            return web.json_response({})
        app = web.Application()
        app.router.add_patch(
            "/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads/{name}", patch)
        async with client_of(app) as client:
            writes = WorkloadWrites(client, cast(Any, Told()), Expectations())
            going = wl.read({"metadata": {"namespace": "t", "name": "wl", "uid": "u",
                                          "finalizers": [wl.FINALIZER]}})
            for _ in range(100):
                writes.release_soon(going)
            await asyncio.sleep(0.5)
            release.set()
            await asyncio.sleep(0.2)
            writes.release_soon(going)  # released: a later event may ask again
            await asyncio.sleep(0.5)
    asyncio.run(scenario())
    assert patches == ["wl", "wl"]


@pytest.mark.parametrize(("answer", "waits"), [(201, True), (409, False), (500, False)])
def test_a_job_waits_for_the_cache_to_show_the_workload_it_made(answer: int,
                                                                waits: bool) -> None:
    # a decision on a cache that does not show the Workload yet would make it again
    from aiohttp import web

    from tests.unit.test_informer_faults import client_of

    made = wl.desired(job("PyTorchJob"), wl.Priority())
    name = made["metadata"]["name"]

    async def create(request: web.Request) -> web.Response:
        return web.json_response(await request.json() if answer == 201 else
                                 {"kind": "Status", "code": answer}, status=answer)

    async def scenario() -> Expectations:
        app = web.Application()
        app.router.add_post("/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads", create)
        expectations = Expectations()
        async with client_of(app) as client:
            writes = WorkloadWrites(client, cast(Any, Told()), expectations)
            with contextlib.suppress(APIError):
                await writes.carry_out(job("PyTorchJob"), {}, Step(create=made))
        return expectations

    expectations = asyncio.run(scenario())
    assert expectations.satisfied("default/job") is not waits
    expectations.observed_add("default/job", f"Workload/{name}")  # the informer's ADDED
    assert expectations.satisfied("default/job")


def test_a_new_job_is_given_its_namespaces_default_queue_by_the_step() -> None:
    # the label is a write of the step, carried out as the step's others are
    from aiohttp import web

    from tests.unit.test_informer_faults import client_of

    patched: list[tuple[str, Any]] = []

    async def patch(request: web.Request) -> web.Response:
        patched.append((request.path, await request.json()))
        return web.json_response({})

    async def scenario() -> None:
        app = web.Application()
        app.router.add_patch("/apis/kubeflow.org/v1/namespaces/{ns}/pytorchjobs/{name}", patch)
        async with client_of(app) as client:
            writes = WorkloadWrites(client, cast(Any, Told()), Expectations())
            await writes.carry_out(job("PyTorchJob"), {}, Step(queue_label="default"))

    asyncio.run(scenario())
    assert patched == [("/apis/kubeflow.org/v1/namespaces/default/pytorchjobs/job",
                        {"metadata": {"labels": {wl.QUEUE_LABEL: "default"}}})]
