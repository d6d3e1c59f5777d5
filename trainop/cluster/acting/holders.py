"""Objects that hold a name a job needs and that the caches do not show (anyone's: a bare
pod kept by its finalizer, named by the API server's 409): remembered per job, shown to
the engine (Observed.held), and looked at again with back-off until they are gone."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

from trainop.api.resources import Resource
from trainop.cluster.reading.client import Client
from trainop.cluster.reading.records import meta_of
from trainop.engine import Held

FIRST_LOOK = 1.0
LAST_LOOK = 60.0
"""Seconds between looks at a holder the caches do not show: from the first, doubling,
to the last (each look is one request; a holder kept by a finalizer may stay for ever)."""


@dataclass
class Holder:
    """A going object the API server named as holding a name a job needs, that the caches
    do not show (anyone's: a bare pod kept by its finalizer): looked at again with
    back-off, and shown to the engine meanwhile (Observed.held), so that the job names it
    and makes no request for that name until it is gone."""

    held: Held
    resource: Resource
    wait: float = FIRST_LOOK
    due: float = 0.0
    """time.monotonic() of the next look."""


class Holders:
    """The holders of one job kind's names that the caches do not show."""

    def __init__(self, kind: str, client: Client):
        self.kind = kind
        self.client = client
        self._of: dict[str, dict[str, Holder]] = {}
        """Job key -> name -> its holder."""

    def held(self, key: str) -> tuple[Held, ...]:
        """The holders the caches do not show of the names job `key` needs, each with the
        seconds until it is looked at again."""
        now = time.monotonic()
        return tuple(dataclasses.replace(h.held, look_again=max(h.due - now, 0.0))
                     for h in self._of.get(key, {}).values())

    def forget(self, key: str) -> None:
        self._of.pop(key, None)

    def remember(self, key: str, held: Held, resource: Resource) -> None:
        """A holder the API server named for job `key`: looked at again from FIRST_LOOK."""
        self._of.setdefault(key, {})[held.name] = Holder(
            held, resource, due=time.monotonic() + FIRST_LOOK)

    async def look_again(self, key: str, ns: str) -> None:
        """A request for each holder of job `key` whose look is due (none otherwise): one
        that is gone, or no longer going, is forgotten (the job tries its name again);
        one still there is looked at again later, twice as late, at most LAST_LOOK."""
        holders = self._of.get(key, {})
        now = time.monotonic()
        for name, h in list(holders.items()):
            if h.due > now:
                continue
            found = await self.client.get(h.resource.path(ns),
                                          {"fieldSelector": f"metadata.name={name}"})
            there = (found.get("items") or [None])[0]
            held = held_by(h.held.kind, there) if there is not None else None
            if held is None or not held.going(self.kind, key.split("/", 1)[1]):
                # gone, or no longer going (the next create is refused, and says so)
                del holders[name]
                continue
            h.held = held
            h.wait = min(h.wait * 2, LAST_LOOK)
            h.due = time.monotonic() + h.wait
        if not holders:
            self._of.pop(key, None)


def held_by(kind: str, there: dict[str, Any]) -> Held:
    """What holds a name: the object of `kind` the API server has under it."""
    meta = meta_of(there)
    return Held(kind, meta.name, bool((there.get("metadata") or {}).get("deletionTimestamp")),
                meta.owner_kind, meta.owner_name)
