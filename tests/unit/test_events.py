"""Events: who tells them, about which object, as the peers do; and they wait for their
senders in one backlog every namespace shares: a namespace that tells a storm sheds its own
events beyond its share, never another's."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from tests.unit.test_informer_faults import client_of
from trainop.cluster.acting.events import EVENTS_RECORDED, EventRecorder
from trainop.cluster.reading.client import Client
from trainop.engine import Event


@contextlib.asynccontextmanager
async def slow_api(release: asyncio.Event, told: list[str],
                   bodies: list[dict[str, Any]] | None = None) -> AsyncIterator[Client]:
    """An API server that takes events only once `release` is set (one falling behind)."""
    async def create(request: web.Request) -> web.Response:
        await release.wait()
        told.append(request.match_info["ns"])
        body = await request.json()
        if bodies is not None:
            bodies.append(body)
        return web.json_response(body, status=201)
    app = web.Application()
    app.router.add_post("/api/v1/namespaces/{ns}/events", create)
    async with client_of(app) as client:
        yield client


def job(ns: str) -> dict[str, object]:
    return {"apiVersion": "kubeflow.org/v1", "kind": "JAXJob",
            "metadata": {"name": "j", "namespace": ns, "uid": "u"}}


def dropped() -> float:
    return EVENTS_RECORDED.labels("dropped")._value.get()  # type: ignore[attr-defined,no-any-return]


def test_a_storm_of_one_namespace_sheds_its_own_events_only() -> None:
    async def scenario() -> list[str]:
        release, told = asyncio.Event(), []
        async with slow_api(release, told) as client:
            recorder = EventRecorder(client)
            before = dropped()
            for i in range(600):  # three times a namespace's share (README: 200)
                recorder.record(job("storm"), Event("Normal", "Storm", f"event {i}"))
            for i in range(10):
                recorder.record(job("quiet"), Event("Normal", "Quiet", f"event {i}"))
            # (the senders start once this returns to the loop: nothing is sent yet)
            assert dropped() - before == 400
            release.set()
            await recorder.drain(30)
        return told
    told = asyncio.run(scenario())
    assert told.count("quiet") == 10
    assert told.count("storm") == 200


def test_a_job_is_told_of_by_the_operator_whose_api_it_was_written_in() -> None:
    from trainop.cluster.reading.records import job_record

    def stored(annotations: dict[str, str]) -> dict[str, Any]:
        return job_record({"apiVersion": "kubeflow.org/v1", "kind": "MPIJob", "metadata": {
            "name": "pi", "namespace": "t", "uid": "u", "resourceVersion": "7",
            "annotations": annotations}, "spec": {}}).head()

    async def scenario() -> list[dict[str, Any]]:
        release, told, bodies = asyncio.Event(), [], []
        release.set()
        async with slow_api(release, told, bodies) as client:
            recorder = EventRecorder(client)
            for annotations in ({"trainop.kubeflow.org/written-in": "v2beta1"}, {},
                                {"trainop.kubeflow.org/written-in": "v3"}):
                recorder.record(stored(annotations), Event("Normal", "MPIJobCreated", "m"))
            await recorder.drain(10)
        return sorted(bodies, key=lambda b: b["involvedObject"]["apiVersion"])
    v1, v1_too, v2 = asyncio.run(scenario())
    # mpi-operator's (mpi_job_controller.go: controllerAgentName) for a v2beta1 job
    assert (v2["involvedObject"]["apiVersion"], v2["source"]["component"],
            v2["reportingComponent"]) == ("kubeflow.org/v2beta1", "mpi-job-controller",
                                          "mpi-job-controller")
    assert v2["involvedObject"]["name"] == "pi" and v2["involvedObject"]["uid"] == "u"
    # training-operator's for one of v1, and for one whose annotation names no version
    for body in (v1, v1_too):
        assert (body["involvedObject"]["apiVersion"], body["source"]["component"]) == (
            "kubeflow.org/v1", "mpijob-controller")
