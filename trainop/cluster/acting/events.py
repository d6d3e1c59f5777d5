"""Kubernetes Events for what the engine decided, sent without holding up a reconcile."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from typing import Any

from prometheus_client import Counter

from trainop import wallclock
from trainop.api.conversion import WRITTEN_IN
from trainop.api.kinds import GROUP
from trainop.api.persona import persona_at
from trainop.api.resources import EVENTS
from trainop.cluster.reading.client import REQUEST_ERRORS, Client
from trainop.engine import Event, clock
from trainop.engine.labels import controller_name

log = logging.getLogger("trainop.events")
BACKLOG = 2000
PER_NAMESPACE = BACKLOG // 10
"""Of the backlog, events of one namespace waiting at most: a namespace telling a storm
sheds its own events, not everyone's."""
SENDERS = 4
"""Events go out through a few senders: they never crowd out the pods and status writes
a job is waiting for, and when the API server falls behind they are what is shed."""


EVENTS_RECORDED = Counter("trainop_events_total", "Events recorded on jobs, by outcome",
                          ["outcome"])
"""outcome: sent, dropped (the backlog was full) or failed (the API server refused)."""


def teller(involved: dict[str, Any]) -> str:
    """Who tells a job's events: its kind's controller, by upstream's name, or where it was
    written in another operator's API, that operator's (mpi-operator's
    controllerAgentName, mpi_job_controller.go)."""
    persona = persona_at(str(involved.get("apiVersion") or ""))
    return persona.event_source or controller_name(involved["kind"])


class EventRecorder:
    def __init__(self, client: Client):
        self.client = client
        # Only the job's reference waits here, never the job itself: a backlog of events
        # must not keep thousands of finished jobs alive.
        self._queue: asyncio.Queue[tuple[dict[str, Any], Event]] = asyncio.Queue(BACKLOG)
        self._senders: list[asyncio.Task[None]] = []
        self._last_drop_log = 0.0
        self._waiting: dict[str, int] = {}
        """Events waiting, by namespace."""

    def record(self, job: dict[str, Any], event: Event) -> None:
        meta = job.get("metadata") or {}
        log.info("%s %s/%s: %s: %s", job.get("kind"), meta.get("namespace"), meta.get("name"),
                 event.reason, event.message)
        if not self._senders:
            loop = asyncio.get_running_loop()
            self._senders = [loop.create_task(self._sender()) for _ in range(SENDERS)]
        # a job written in another operator's API is told of as that operator tells it:
        # at its version (mpi-operator's events name their MPIJob at v2beta1)
        written = (meta.get("annotations") or {}).get(WRITTEN_IN)
        involved = {"apiVersion": f"{GROUP}/{written}" if written else job.get("apiVersion"),
                    "kind": job.get("kind"),
                    **{k: meta.get(k) for k in ("name", "namespace", "uid", "resourceVersion")}}
        ns = str(involved["namespace"])
        try:
            if self._waiting.get(ns, 0) >= PER_NAMESPACE:
                raise asyncio.QueueFull
            self._queue.put_nowait((involved, event))
            self._waiting[ns] = self._waiting.get(ns, 0) + 1
        except asyncio.QueueFull:
            EVENTS_RECORDED.labels("dropped").inc()
            if time.monotonic() - self._last_drop_log > 60:
                self._last_drop_log = time.monotonic()
                log.warning("the API server is not keeping up with events: %d waiting, %d "
                            "of namespace %s; dropping new ones (trainop_events_total"
                            "{outcome=\"dropped\"})", self._queue.qsize(),
                            self._waiting.get(ns, 0), ns)

    async def _sender(self) -> None:
        while True:
            involved, event = await self._queue.get()
            ns = str(involved["namespace"])
            try:
                await self._send(involved, event)
            except Exception:  # one event's fault must not stop a sender for good
                EVENTS_RECORDED.labels("failed").inc()
                log.exception("event not recorded")
            finally:
                self._waiting[ns] -= 1
                if not self._waiting[ns]:
                    del self._waiting[ns]
                self._queue.task_done()

    async def _send(self, involved: dict[str, Any], event: Event) -> None:
        now = clock.fmt(wallclock.now())
        ns = involved["namespace"]
        body = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{involved['name']}.{secrets.token_hex(8)}", "namespace": ns},
            "involvedObject": involved,
            "reason": event.reason, "message": event.message[:1024], "type": event.type,
            "source": {"component": teller(involved)},
            "reportingComponent": teller(involved),
            "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        }
        try:
            await self.client.create(EVENTS.path(ns), body)
        except REQUEST_ERRORS as err:
            EVENTS_RECORDED.labels("failed").inc()
            log.debug("event not recorded: %s", err)
        else:
            EVENTS_RECORDED.labels("sent").inc()

    async def drain(self, timeout: float = 5.0) -> None:
        """Send what is queued (for at most `timeout` seconds), then stop the senders."""
        if self._senders:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._queue.join(), timeout)
        for task in self._senders:
            task.cancel()
        await asyncio.gather(*self._senders, return_exceptions=True)
