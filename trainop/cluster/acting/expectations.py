"""Expectations: after creating or deleting pods and services (and creating a replica's Job
or the job's Kueue Workload), wait until the cache has seen it before deciding again for
that job, so that a stale cache never makes a duplicate, nor tells a creation or deletion
twice."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

EXPECTATION_TTL = 300.0
"""Give up waiting after this long (a lost watch event must not block a job forever)."""


@dataclass
class _Pending:
    adds: set[str] = field(default_factory=set)
    deletes: set[str] = field(default_factory=set)
    since: float = field(default_factory=time.monotonic)


def expected(kind: str, name: str) -> str | None:
    """What an expectation calls an object: a pod by its name, a service (which shares its
    pod's name), a replica's Job or a Kueue Workload as `Kind/name`; None for kinds nobody
    waits for."""
    return name if kind == "Pod" else f"{kind}/{name}" if kind in WAITED_FOR else None


WAITED_FOR = ("Service", "Job", "Workload")
"""The kinds besides pods whose creation a job waits to see in the cache."""


def expected_gone(kind: str, name: str) -> str | None:
    """What an expectation calls an object whose deletion is waited for: a pod or a
    service (as `expected` names them); None for the kinds deleted without waiting."""
    return expected(kind, name) if kind in ("Pod", "Service") else None


class Expectations:
    def __init__(self, ttl: float = EXPECTATION_TTL):
        self.ttl = ttl
        self._pending: dict[str, _Pending] = {}

    def expect(self, job: str, adds: list[str], deletes: list[str]) -> None:
        if not adds and not deletes:
            return
        p = self._pending.setdefault(job, _Pending())
        p.adds.update(adds)
        p.deletes.update(deletes)
        p.since = time.monotonic()

    def observed_add(self, job: str, name: str) -> None:
        p = self._pending.get(job)
        if p is not None:
            p.adds.discard(name)

    def observed_delete(self, job: str, name: str) -> None:
        p = self._pending.get(job)
        if p is not None:
            p.deletes.discard(name)

    def lower(self, job: str, adds: Iterable[str] = (), deletes: Iterable[str] = ()) -> None:
        """A request failed: it will never be observed."""
        p = self._pending.get(job)
        if p is not None:
            p.adds.difference_update(adds)
            p.deletes.difference_update(deletes)

    def satisfied(self, job: str) -> bool:
        p = self._pending.get(job)
        if p is None:
            return True
        if (not p.adds and not p.deletes) or time.monotonic() - p.since > self.ttl:
            del self._pending[job]
            return True
        return False

    def forget(self, job: str) -> None:
        self._pending.pop(job, None)
