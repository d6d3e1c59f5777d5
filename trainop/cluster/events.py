"""Kubernetes Events for what the engine decided, sent without holding up a reconcile."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import secrets
from typing import Any

from trainop.cluster.client import REQUEST_ERRORS, Client
from trainop.cluster.resources import EVENTS
from trainop.engine import Event

log = logging.getLogger("trainop.events")
COMPONENT = "trainop"
BACKLOG = 2000
SENDERS = 4
"""Events go out through a few senders: they never crowd out the pods and status writes
a job is waiting for, and when the API server falls behind they are what is shed."""


class EventRecorder:
    def __init__(self, client: Client):
        self.client = client
        self._queue: asyncio.Queue[tuple[dict[str, Any], Event]] = asyncio.Queue(BACKLOG)
        self._senders: list[asyncio.Task[None]] = []
        self.dropped = 0

    def record(self, job: dict[str, Any], event: Event) -> None:
        meta = job.get("metadata") or {}
        log.info("%s %s/%s: %s: %s", job.get("kind"), meta.get("namespace"), meta.get("name"),
                 event.reason, event.message)
        if not self._senders:
            loop = asyncio.get_running_loop()
            self._senders = [loop.create_task(self._sender()) for _ in range(SENDERS)]
        try:
            self._queue.put_nowait((job, event))
        except asyncio.QueueFull:
            self.dropped += 1

    async def _sender(self) -> None:
        while True:
            job, event = await self._queue.get()
            try:
                await self._send(job, event)
            finally:
                self._queue.task_done()

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
        except REQUEST_ERRORS as err:
            log.debug("event not recorded: %s", err)

    async def drain(self, timeout: float = 5.0) -> None:
        """Send what is queued (for at most `timeout` seconds), then stop the senders."""
        if self._senders:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._queue.join(), timeout)
        for task in self._senders:
            task.cancel()
        await asyncio.gather(*self._senders, return_exceptions=True)
