"""A rate-limited work queue of job keys, as client-go's: a key is queued once however
often it is added, is never handed to two workers at once, and can be added after a delay.
Retries (add_rate_limited) wait the longer of a per-key exponential back-off and a token
bucket (10/s, burst 100) of the key's namespace (client-go's is one for all: a namespace
whose thousand jobs fail would push every other namespace's retries back by 100 s);
ordinary adds are not rate limited.

Unlike client-go's, keys are handed out by fair share among namespaces (fairqueue): the
next key is the oldest of the namespace with keys waiting that has kept the workers busy
least, and a namespace that was quiet may take QUIET_CREDIT_SECONDS of a worker first, so
that a namespace with thousands of keys queued delays another's few keys by the keys under
way, not by all of them."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import time
from collections.abc import Awaitable, Callable

from trainop.cluster.acting import metrics
from trainop.cluster.fairqueue import QUIET_CREDIT_SECONDS, FairQueue
from trainop.cluster.reading.client import REQUEST_ERRORS, TokenBucket

log = logging.getLogger("trainop.controller")
BUCKETS_KEPT = 1000
"""Namespaces' retry buckets kept before those that are full again go."""


class RetryLimiter:
    """How long a key that failed waits before its retry: the longer of its exponential
    back-off (base_delay doubling, up to max_delay) and its namespace's token bucket."""

    def __init__(self, base_delay: float, max_delay: float, qps: float, burst: int):
        self.base_delay, self.max_delay = base_delay, max_delay
        self._qps, self._burst = qps, burst
        self._failures: dict[str, int] = {}
        self.buckets: dict[str, TokenBucket] = {}
        """Each namespace's retry bucket, while it has retried lately."""

    def when(self, key: str) -> float:
        n = self._failures.get(key, 0)
        self._failures[key] = n + 1
        ns = _namespace(key)
        bucket = self.buckets.get(ns)
        if bucket is None:
            if len(self.buckets) >= BUCKETS_KEPT:  # those refilled are as good as new
                self.buckets = {k: b for k, b in self.buckets.items() if not b.full()}
            bucket = self.buckets[ns] = TokenBucket(self._qps, self._burst)
        return max(min(self.base_delay * 2.0 ** n, self.max_delay), bucket.reserve())

    def forget(self, key: str) -> None:
        self._failures.pop(key, None)


class Delays:
    """Keys added when they are due (client-go's delaying queue): one time a key, the
    earliest asked for (a key asked for again and again adds nothing, as client-go's
    waitingForQueue)."""

    def __init__(self, add: Callable[[str], None]):
        self._add = add
        self.later: list[tuple[float, int, str]] = []
        self._due_at: dict[str, float] = {}
        self._seq = itertools.count()
        self._timer: asyncio.TimerHandle | None = None

    def add_after(self, key: str, delay: float) -> None:
        due = time.monotonic() + delay
        if self._due_at.get(key, due + 1) <= due:
            return
        self._due_at[key] = due
        heapq.heappush(self.later, (due, next(self._seq), key))
        self._arm()

    def _arm(self) -> None:
        if not self.later:
            return
        loop = asyncio.get_running_loop()
        when = self.later[0][0]
        if self._timer is not None:
            self._timer.cancel()
        self._timer = loop.call_at(loop.time() + max(0.0, when - time.monotonic()), self._due)

    def _due(self) -> None:
        self._timer = None
        now = time.monotonic()
        while self.later and self.later[0][0] <= now:
            due, _, key = heapq.heappop(self.later)
            if self._due_at.get(key) != due:
                continue  # made earlier since: that entry is the one
            del self._due_at[key]
            self._add(key)
        self._arm()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


class QueueMetrics:
    """A queue's series, under controller-runtime's names and upstream's: depth, adds,
    retries, the seconds a key waits and is worked on, and the work under way."""

    def __init__(self, name: str, controller: str):
        labels = (controller, controller)
        self._depths = (metrics.WQ_DEPTH.labels(*labels), metrics.QUEUE_DEPTH.labels(name))
        self._adds = (metrics.WQ_ADDS.labels(*labels), metrics.QUEUE_ADDS.labels(name))
        self._retries = (metrics.WQ_RETRIES.labels(*labels), metrics.QUEUE_RETRIES.labels(name))
        self._queue_seconds = metrics.WQ_QUEUE_SECONDS.labels(*labels)
        self._work_seconds = metrics.WQ_WORK_SECONDS.labels(*labels)
        self._added_at: dict[str, float] = {}
        self._started_at: dict[str, float] = {}
        metrics.WQ_UNFINISHED_SECONDS.labels(*labels).set_function(
            lambda: sum(time.monotonic() - t for t in self._started_at.values()))
        metrics.WQ_LONGEST_SECONDS.labels(*labels).set_function(
            lambda: max((time.monotonic() - t for t in self._started_at.values()), default=0.0))

    def depth(self, n: int) -> None:
        for gauge in self._depths:
            gauge.set(n)

    def added(self, key: str) -> None:
        for counter in self._adds:
            counter.inc()
        self._added_at.setdefault(key, time.monotonic())

    def retried(self) -> None:
        for counter in self._retries:
            counter.inc()

    def started(self, key: str) -> None:
        now = time.monotonic()
        self._queue_seconds.observe(now - self._added_at.pop(key, now))
        self._started_at[key] = now

    def done(self, key: str) -> float | None:
        """The seconds `key` was worked on, where it was."""
        started = self._started_at.pop(key, None)
        if started is None:
            return None
        seconds = time.monotonic() - started
        self._work_seconds.observe(seconds)
        return seconds


class WorkQueue:
    def __init__(self, name: str, base_delay: float = 0.005, max_delay: float = 1000.0,
                 qps: float = 10.0, burst: int = 100, controller: str | None = None):
        self.name = name
        self.controller = controller or name
        """The controller-runtime name of the queue (and of its controller's metrics)."""
        self._metrics = QueueMetrics(name, self.controller)
        self.limiter = RetryLimiter(base_delay, max_delay, qps, burst)
        self.delays = Delays(self.add)
        self._queue: FairQueue[str] = FairQueue(credit=QUIET_CREDIT_SECONDS)
        """The keys waiting, by namespace, handed out by the workers' seconds each used."""
        self._dirty: set[str] = set()
        self._processing: set[str] = set()
        self._ready = asyncio.Event()
        self.shutting_down = False

    def __len__(self) -> int:
        return len(self._queue)

    def _enqueue(self, key: str) -> None:
        self._queue.push(_namespace(key), key)
        self._metrics.depth(len(self._queue))
        self._ready.set()

    def add(self, key: str) -> None:
        if self.shutting_down or key in self._dirty:
            return
        self._metrics.added(key)
        self._dirty.add(key)
        if key in self._processing:
            return  # queued again when the worker is done with it
        self._enqueue(key)

    def add_after(self, key: str, delay: float) -> None:
        if delay <= 0:
            self.add(key)
        else:
            self.delays.add_after(key, delay)

    def add_rate_limited(self, key: str) -> None:
        """Retry a key that failed: 5ms, 10ms, 20ms, ... up to max_delay, and no more than
        `qps` retries a second over all keys of its namespace."""
        self._metrics.retried()
        self.add_after(key, self.limiter.when(key))

    def forget(self, key: str) -> None:
        self.limiter.forget(key)

    async def get(self) -> str:
        """The next key to work on (waits); call done(key) when finished."""
        while not self._queue:
            self._ready.clear()
            await self._ready.wait()
        _, key = self._queue.pop()
        self._metrics.depth(len(self._queue))
        self._metrics.started(key)
        self._dirty.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: str) -> None:
        self._processing.discard(key)
        seconds = self._metrics.done(key)
        if seconds is not None:
            self._queue.charge(_namespace(key), seconds)
        if key in self._dirty:
            self._enqueue(key)

    def shutdown(self) -> None:
        self.shutting_down = True
        self.delays.stop()


def _namespace(key: str) -> str:
    return key.split("/", 1)[0]


def init_controller_metrics(controller: str, workers: int) -> None:
    """controller-runtime shows a controller's series at 0 from its start."""
    for result in metrics.RECONCILE_RESULTS:
        metrics.RECONCILE_TOTAL.labels(controller, result)
    for family in (metrics.CR_RECONCILE_ERRORS, metrics.TERMINAL_RECONCILE_ERRORS,
                   metrics.RECONCILE_PANICS):
        family.labels(controller)
    metrics.MAX_CONCURRENT.labels(controller).set(workers)
    metrics.ACTIVE_WORKERS.labels(controller).set(0)


async def run_worker(queue: WorkQueue, sync: Callable[[str], Awaitable[float | None]]) -> None:
    """Take keys from `queue` and `sync` them, for ever: one at a time per key; a key
    whose sync raised is retried with the queue's back-off (the one retry policy), and one
    that asks for it is looked at again after the seconds `sync` returned."""
    controller = queue.controller
    active = metrics.ACTIVE_WORKERS.labels(controller)
    while True:
        key = await queue.get()
        started = time.perf_counter()
        active.inc()
        result = "success"
        try:
            requeue = await sync(key)
        except asyncio.CancelledError:
            raise
        except Exception as err:
            result = "error"
            metrics.RECONCILE_ERRORS.labels(queue.name).inc()
            metrics.CR_RECONCILE_ERRORS.labels(controller).inc()
            if isinstance(err, REQUEST_ERRORS):
                log.warning("%s %s: %s; retrying", queue.name, key, err)
            else:
                log.exception("%s %s: reconcile failed; retrying", queue.name, key)
            queue.add_rate_limited(key)
        else:
            queue.forget(key)
            if requeue is not None:
                result = "requeue_after"
                queue.add_after(key, requeue)
        finally:
            seconds = time.perf_counter() - started
            metrics.RECONCILE_SECONDS.labels(queue.name).observe(seconds)
            metrics.RECONCILE_TIME.labels(controller).observe(seconds)
            metrics.RECONCILE_TOTAL.labels(controller, result).inc()
            active.dec()
            queue.done(key)
