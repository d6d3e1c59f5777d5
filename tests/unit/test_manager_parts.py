"""The manager's parts start in an order derived from what each needs, and stop in the
reverse order."""

from __future__ import annotations

import asyncio
import graphlib
from typing import Any

import pytest

from trainop.cluster import parts
from trainop.cluster.manager import _Starting
from trainop.cluster.options import ManagerOptions
from trainop.cluster.parts import Components, Part


def recording(log: list[str], components: Components, name: str, *needs: str) -> Part:
    async def start(given: dict[str, Any]) -> str:
        assert set(needs) <= given.keys()  # what it needs was given before it starts
        log.append(f"start {name}")

        async def stop() -> None:
            log.append(f"stop {name}")
        components.started(name, stop)
        return name.upper()
    return Part(name, needs, start)


def test_parts_start_after_what_they_need_and_stop_backwards() -> None:
    log: list[str] = []
    components = Components()

    async def run() -> dict[str, Any]:
        given = await parts.start_all([
            recording(log, components, "controllers", "lease", "caches"),
            recording(log, components, "lease", "caches"),
            recording(log, components, "caches", "client"),
            recording(log, components, "client")])
        await components.stop()
        return given

    given = asyncio.run(run())
    assert log == ["start client", "start caches", "start lease", "start controllers",
                   "stop controllers", "stop lease", "stop caches", "stop client"]
    assert given == {"client": "CLIENT", "caches": "CACHES", "lease": "LEASE",
                     "controllers": "CONTROLLERS"}


def test_told_to_stop_while_a_part_waits_the_start_ends_there() -> None:
    log: list[str] = []
    components = Components()

    async def waits(given: dict[str, Any]) -> None:
        log.append("start webhook")
        try:
            await asyncio.sleep(3600)  # the API server never answers
        except asyncio.CancelledError:
            log.append("cancelled webhook")
            raise

    async def run() -> dict[str, Any] | None:
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(0.05, stop.set)
        given = await asyncio.wait_for(parts.start_all([
            recording(log, components, "client"), Part("webhook", ("client",), waits),
            recording(log, components, "controllers", "webhook")], stop), 10)
        await components.stop()
        return given

    assert asyncio.run(run()) is None
    assert log == ["start client", "start webhook", "cancelled webhook", "stop client"]


def test_parts_that_need_nothing_of_each_other_keep_the_tables_order() -> None:
    table = [Part(n, (), lambda g: asyncio.sleep(0)) for n in ("b", "c", "a")]
    assert [p.name for p in parts.order(table)] == ["b", "c", "a"]


def test_a_need_no_part_gives_or_a_cycle_is_an_error() -> None:
    def nothing(given: dict[str, Any]) -> Any:
        return asyncio.sleep(0)
    with pytest.raises(ValueError, match="no part gives lease"):
        parts.order([Part("controllers", ("lease",), nothing)])
    with pytest.raises(graphlib.CycleError):
        parts.order([Part("a", ("b",), nothing), Part("b", ("a",), nothing)])


def test_a_part_that_fails_to_stop_does_not_keep_the_others_running() -> None:
    stopped: list[str] = []
    components = Components()

    async def fails() -> None:
        raise RuntimeError("boom")

    async def ok() -> None:
        stopped.append("client")
    components.started("client", ok)
    components.started("webhook", fails)
    asyncio.run(components.stop())
    assert stopped == ["client"]


def test_the_managers_order() -> None:
    names = [p.name for p in parts.order(
        _Starting(ManagerOptions(), None, Components()).parts())]  # type: ignore[arg-type]
    assert names[0] == "client" and names[-1] == "controllers"
    before = [("probes", "webhook serving"), ("webhook serving", "discovery"),
              ("discovery", "caches"), ("informers", "lease"), ("recorder", "queueing")]
    assert all(names.index(a) < names.index(b) for a, b in before), names
