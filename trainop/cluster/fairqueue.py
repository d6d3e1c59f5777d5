"""Items waiting by flow, handed out by fair share: the fair queuing of the work queues
(flows: namespaces, items: job keys, cost: a worker's seconds) and of the client's API
budget (items: requests waiting, cost: one request)."""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from typing import Generic, TypeVar

T = TypeVar("T")

QUIET_CREDIT_SECONDS = 10.0
"""What a quiet namespace may take before it shares equally with busy ones: 10 seconds of a
worker in each work queue, 10 seconds of the client's QPS in its API budget."""


class FairQueue(Generic[T]):
    """Each flow's items in order; `pop` takes the oldest item of the waiting flow that has
    used least, and `charge` counts what an item cost its flow, so flows that all wait
    share equally (start-time fair queuing: a flow's use is its virtual time).

    A flow that had nothing waiting comes back at most `credit` behind the flow served
    last: a quiet namespace gets up to `credit` before it shares equally with a busy one,
    as if each flow had its own bucket of `credit` refilled at its fair share while it is
    quiet. So a namespace whose work fits in `credit` is delayed by another's backlog only
    by the items under way, and the backlog by at most `credit` per quiet namespace."""

    def __init__(self, credit: float = 0.0) -> None:
        self.credit = credit
        self._waiting: dict[str, deque[T]] = {}
        self._used: dict[str, float] = {}
        self._heap: list[tuple[float, int, str]] = []
        self._entry: dict[str, int] = {}
        """Each waiting flow's one current heap entry (the others are stale)."""
        self._seq = itertools.count()
        self._served = 0.0
        """The use of the flows served so far, at most (the queue's virtual time)."""
        self._length = 0

    def __len__(self) -> int:
        return self._length

    def push(self, flow: str, item: T) -> None:
        waiting = self._waiting.get(flow)
        if waiting is None:
            waiting = self._waiting[flow] = deque()
            self._used[flow] = self._use(flow)
            self._schedule(flow)
        waiting.append(item)
        self._length += 1

    def pop(self) -> tuple[str, T]:
        """The next item and its flow (IndexError when none waits)."""
        while True:
            used, seq, flow = heapq.heappop(self._heap)
            if self._entry.get(flow) == seq:
                break
        self._served = max(self._served, used)
        waiting = self._waiting[flow]
        item = waiting.popleft()
        self._length -= 1
        if waiting:
            self._schedule(flow)
        else:
            del self._waiting[flow], self._entry[flow]
        return flow, item

    def serve(self, flow: str, cost: float) -> None:
        """Count an item of `flow` served without waiting (nothing else waited): as if it
        had been pushed, popped and charged, so that a flow that never had to wait is not
        taken for a quiet one."""
        self._served = max(self._served, self._use(flow))
        self.charge(flow, cost)

    def charge(self, flow: str, cost: float) -> None:
        """Count `cost` against `flow` (what one of its items took)."""
        self._used[flow] = self._use(flow) + cost
        if flow in self._waiting:
            self._schedule(flow)
        if len(self._used) > 2 * len(self._waiting) + 64:
            # forget quiet flows whose credit is whole: they would come back at the same
            # place, and the ledger stays the size of the flows that matter
            floor = self._served - self.credit
            self._used = {f: used for f, used in self._used.items()
                          if f in self._waiting or used > floor}

    def _use(self, flow: str) -> float:
        """The flow's use, or the least a flow may have: `credit` behind the last served."""
        floor = self._served - self.credit
        return max(self._used.get(flow, floor), floor)

    def _schedule(self, flow: str) -> None:
        seq = next(self._seq)
        self._entry[flow] = seq
        heapq.heappush(self._heap, (self._used[flow], seq, flow))
        if len(self._heap) > 4 * len(self._entry) + 64:  # mostly stale entries: drop them
            self._heap = [e for e in self._heap if self._entry.get(e[2]) == e[1]]
            heapq.heapify(self._heap)
