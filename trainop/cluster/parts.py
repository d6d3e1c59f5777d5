"""The manager's parts, started in an order derived from what each needs and stopped in
the reverse order (as controller-runtime orders its Runnables by kind and stops them
backwards): each part names the parts it needs, and starts once they have."""

from __future__ import annotations

import asyncio
import contextlib
import graphlib
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("trainop.manager")


@dataclass(frozen=True)
class Part:
    """One part: its `start` gets what the parts it `needs` gave, by name, and returns
    what it gives (registering how it stops with `Components`)."""

    name: str
    needs: tuple[str, ...]
    start: Callable[[dict[str, Any]], Awaitable[Any]]


def order(parts: Iterable[Part]) -> list[Part]:
    """`parts` with each after those it needs (ties in the order given); a need that no
    part meets, or a cycle, is an error in the manager's own table."""
    by_name = {p.name: p for p in parts}
    missing = sorted({n for p in by_name.values() for n in p.needs} - by_name.keys())
    if missing:
        raise ValueError(f"no part gives {', '.join(missing)}")
    sorter = graphlib.TopologicalSorter({p.name: p.needs for p in by_name.values()})
    sorter.prepare()  # raises CycleError
    out: list[Part] = []
    rank = {name: i for i, name in enumerate(by_name)}
    while sorter.is_active():
        ready = sorted(sorter.get_ready(), key=rank.__getitem__)
        out.extend(by_name[name] for name in ready)
        sorter.done(*ready)
    return out


async def start_all(parts: Iterable[Part], stop: asyncio.Event | None = None
                    ) -> dict[str, Any] | None:
    """Start each part in `order`; what each gave, by name. None where `stop` is set first:
    the part under way is cancelled (a manager told to stop while it waits on the API
    server stops at once, as it would before it caught signals)."""
    given: dict[str, Any] = {}
    for part in order(parts):
        starting = asyncio.ensure_future(part.start(given))
        if stop is not None:
            stopping = asyncio.ensure_future(stop.wait())
            await asyncio.wait([starting, stopping], return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
            if not starting.done():
                await _cancel(starting)
                return None
        given[part.name] = await starting
    return given


class Components:
    """What the manager started, in order; stopped in the reverse order: the controllers
    before the lease they hold, the informers before the webhook, the event recorder and
    the clients last."""

    def __init__(self) -> None:
        self._stops: list[tuple[str, Callable[[], Awaitable[object]]]] = []

    def started(self, name: str, stop: Callable[[], Awaitable[object]]) -> None:
        """`name` is running; `stop` ends it."""
        self._stops.append((name, stop))

    def task(self, name: str, work: Awaitable[object]) -> asyncio.Task[object]:
        """Run `work` as a task until the manager stops."""
        task = asyncio.ensure_future(work)
        self.started(name, lambda: _cancel(task))
        return task

    async def stop(self) -> None:
        while self._stops:
            name, stop = self._stops.pop()
            try:
                await stop()
            except Exception:
                log.exception("stopping %s", name)


async def _cancel(task: asyncio.Task[object]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
