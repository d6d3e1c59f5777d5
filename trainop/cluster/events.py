"""Kubernetes Events for what the engine decided, sent without holding up a reconcile."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import secrets
from typing import Any

from trainop.cluster.client import APIError, Client
from trainop.cluster.resources import EVENTS
from trainop.engine import Event

log = logging.getLogger("trainop.events")
COMPONENT = "trainop"
MAX_IN_FLIGHT = 256


class EventRecorder:
    def __init__(self, client: Client):
        self.client = client
        self._tasks: set[asyncio.Task[None]] = set()

    def record(self, job: dict[str, Any], event: Event) -> None:
        meta = job.get("metadata") or {}
        log.info("%s %s/%s: %s: %s", job.get("kind"), meta.get("namespace"), meta.get("name"),
                 event.reason, event.message)
        if len(self._tasks) >= MAX_IN_FLIGHT:
            return  # the API server is slow: events are the first thing to shed
        task = asyncio.get_running_loop().create_task(self._send(job, event))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, job: dict[str, Any], event: Event) -> None:
        meta = job.get("metadata") or {}
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{meta.get('name')}.{secrets.token_hex(8)}",
                         "namespace": meta.get("namespace")},
            "involvedObject": {"apiVersion": job.get("apiVersion"), "kind": job.get("kind"),
                               "name": meta.get("name"), "namespace": meta.get("namespace"),
                               "uid": meta.get("uid"),
                               "resourceVersion": meta.get("resourceVersion")},
            "reason": event.reason, "message": event.message[:1024], "type": event.type,
            "source": {"component": COMPONENT}, "reportingComponent": COMPONENT,
            "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        }
        try:
            await self.client.create(EVENTS.path(meta.get("namespace")), body)
        except (APIError, OSError, TimeoutError) as err:
            log.debug("event not recorded: %s", err)

    async def drain(self) -> None:
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
