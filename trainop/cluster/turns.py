"""Items waiting by flow, handed out in turn: the fair queuing of the work queues (flows:
namespaces, items: job keys) and of the client's API budget (items: requests waiting)."""

from __future__ import annotations

from collections import deque
from typing import Generic, TypeVar

T = TypeVar("T")


class Turns(Generic[T]):
    """Each flow's items in order; `pop` takes the oldest item of the flow whose turn it
    is, and that flow's next item waits for one of every other flow with items."""

    def __init__(self) -> None:
        self._waiting: dict[str, deque[T]] = {}
        self._turns: deque[str] = deque()
        self._length = 0

    def __len__(self) -> int:
        return self._length

    def push(self, flow: str, item: T) -> None:
        waiting = self._waiting.get(flow)
        if waiting is None:
            waiting = self._waiting[flow] = deque()
            self._turns.append(flow)
        waiting.append(item)
        self._length += 1

    def pop(self) -> T:
        """The next item (IndexError when none waits)."""
        flow = self._turns.popleft()
        waiting = self._waiting[flow]
        item = waiting.popleft()
        if waiting:
            self._turns.append(flow)
        else:
            del self._waiting[flow]
        self._length -= 1
        return item
