"""A rate-limited work queue of job keys, as client-go's: a key is queued once however
often it is added, is never handed to two workers at once, and can be added after a delay.
Retries (add_rate_limited) wait the longer of a per-key exponential back-off and an
overall token bucket (10/s, burst 100); ordinary adds are not rate limited."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable

from prometheus_client import Counter, Gauge

from trainop.cluster import metrics
from trainop.cluster.client import REQUEST_ERRORS

log = logging.getLogger("trainop.controller")

QUEUE_DEPTH = Gauge("trainop_workqueue_depth", "Keys waiting in the work queue", ["name"])
QUEUE_ADDS = Counter("trainop_workqueue_adds_total", "Keys added to the work queue", ["name"])
QUEUE_RETRIES = Counter("trainop_workqueue_retries_total", "Keys retried after an error",
                        ["name"])


class WorkQueue:
    def __init__(self, name: str, base_delay: float = 0.005, max_delay: float = 1000.0,
                 qps: float = 10.0, burst: int = 100):
        self.name = name
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.qps = qps
        self.burst = burst
        self._tokens = float(burst)
        self._last = time.monotonic()
        self._queue: deque[str] = deque()
        self._dirty: set[str] = set()
        self._processing: set[str] = set()
        self._failures: dict[str, int] = {}
        self._later: list[tuple[float, int, str]] = []
        self._seq = itertools.count()
        self._ready = asyncio.Event()
        self._timer: asyncio.TimerHandle | None = None
        self.shutting_down = False

    def __len__(self) -> int:
        return len(self._queue)

    def add(self, key: str) -> None:
        if self.shutting_down or key in self._dirty:
            return
        QUEUE_ADDS.labels(self.name).inc()
        self._dirty.add(key)
        if key in self._processing:
            return  # queued again when the worker is done with it
        self._queue.append(key)
        QUEUE_DEPTH.labels(self.name).set(len(self._queue))
        self._ready.set()

    def add_after(self, key: str, delay: float) -> None:
        if delay <= 0:
            self.add(key)
            return
        heapq.heappush(self._later, (time.monotonic() + delay, next(self._seq), key))
        self._arm()

    def _reserve(self) -> float:
        """Take a token from the overall bucket; the seconds until it is really there."""
        now = time.monotonic()
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.qps)
        self._last = now
        self._tokens -= 1
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def add_rate_limited(self, key: str) -> None:
        """Retry a key that failed: 5ms, 10ms, 20ms, ... up to max_delay, and no more than
        `qps` retries a second over all keys."""
        n = self._failures.get(key, 0)
        self._failures[key] = n + 1
        QUEUE_RETRIES.labels(self.name).inc()
        self.add_after(key, max(min(self.base_delay * 2 ** n, self.max_delay),
                                self._reserve()))

    def forget(self, key: str) -> None:
        self._failures.pop(key, None)

    def _arm(self) -> None:
        if not self._later:
            return
        loop = asyncio.get_running_loop()
        when = self._later[0][0]
        if self._timer is not None:
            self._timer.cancel()
        self._timer = loop.call_at(loop.time() + max(0.0, when - time.monotonic()), self._due)

    def _due(self) -> None:
        self._timer = None
        now = time.monotonic()
        while self._later and self._later[0][0] <= now:
            _, _, key = heapq.heappop(self._later)
            self.add(key)
        self._arm()

    async def get(self) -> str:
        """The next key to work on (waits); call done(key) when finished."""
        while not self._queue:
            self._ready.clear()
            await self._ready.wait()
        key = self._queue.popleft()
        QUEUE_DEPTH.labels(self.name).set(len(self._queue))
        self._dirty.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: str) -> None:
        self._processing.discard(key)
        if key in self._dirty:
            self._queue.append(key)
            self._ready.set()

    def shutdown(self) -> None:
        self.shutting_down = True
        if self._timer is not None:
            self._timer.cancel()


async def run_worker(queue: WorkQueue, sync: Callable[[str], Awaitable[float | None]]) -> None:
    """Take keys from `queue` and `sync` them, for ever: one at a time per key; a key
    whose sync raised is retried with the queue's back-off (the one retry policy), and one
    that asks for it is looked at again after the seconds `sync` returned."""
    while True:
        key = await queue.get()
        started = time.perf_counter()
        try:
            requeue = await sync(key)
        except asyncio.CancelledError:
            raise
        except REQUEST_ERRORS as err:
            metrics.RECONCILE_ERRORS.labels(queue.name).inc()
            log.warning("%s %s: %s; retrying", queue.name, key, err)
            queue.add_rate_limited(key)
        except Exception:
            metrics.RECONCILE_ERRORS.labels(queue.name).inc()
            log.exception("%s %s: reconcile failed; retrying", queue.name, key)
            queue.add_rate_limited(key)
        else:
            queue.forget(key)
            if requeue is not None:
                queue.add_after(key, requeue)
        finally:
            metrics.RECONCILE_SECONDS.labels(queue.name).observe(time.perf_counter() - started)
            queue.done(key)
