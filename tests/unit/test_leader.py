"""Leader election when the API server is slow: a renewal that takes longer than the renew
deadline must not keep a manager acting, whenever it lands."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from trainop.cluster.leader import LeaderElector
from trainop.cluster.options import LeaseTimes
from trainop.cluster.reading.client import APIError

TIMES = LeaseTimes(lease_duration=1.5, renew_deadline=1.0, retry_period=0.1)


class SlowLeases:
    """Stands in for the client's three lease calls; writes take `delay` seconds, then land
    (the real API server cannot be slowed on demand)."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.delay = 0.0
        self.writes = 0

    async def get(self, path: str) -> dict[str, Any]:
        if self.lease is None:
            raise APIError(404, {"reason": "NotFound"})
        return copy.deepcopy(self.lease)

    async def create(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        self.lease = obj
        return obj

    async def replace(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(self.delay)
        self.lease, self.writes = obj, self.writes + 1
        return obj


def test_a_slow_renewal_stops_the_leader_within_the_deadline() -> None:
    async def scenario() -> tuple[bool, bool, bool, bool]:
        leases = SlowLeases()
        elector = LeaderElector(leases, "ns", "lock", "me", TIMES)  # type: ignore[arg-type]
        task = asyncio.create_task(elector.run())
        await asyncio.wait_for(elector.became_leader.wait(), 2)
        await asyncio.sleep(0.3)
        renewing = elector.leading and leases.writes > 0
        leases.delay = 30  # the API server stops answering in time
        await asyncio.sleep(TIMES.renew_deadline + 0.2)
        stopped_by_clock = not elector.leading  # even with the renewal still in flight
        await asyncio.wait_for(elector.lost.wait(), 2)
        ended = task.done()
        return renewing, stopped_by_clock, elector.lost.is_set(), ended

    renewing, stopped_by_clock, lost, ended = asyncio.run(scenario())
    assert renewing and stopped_by_clock and lost and ended


def test_a_leader_that_renews_in_time_keeps_leading() -> None:
    async def scenario() -> bool:
        leases = SlowLeases()
        leases.delay = 0.3  # slow, but well within the deadline
        elector = LeaderElector(leases, "ns", "lock", "me", TIMES)  # type: ignore[arg-type]
        task = asyncio.create_task(elector.run())
        await asyncio.wait_for(elector.became_leader.wait(), 2)
        await asyncio.sleep(3 * TIMES.renew_deadline)
        still = elector.leading and not elector.lost.is_set()
        task.cancel()
        return still

    assert asyncio.run(scenario())
