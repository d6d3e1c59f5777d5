"""The rank supervisor's part (supervisor/, engine/supervised.py) for a local pod that
restarts in place: its process is stopped and started again for each attempt the engine
tells, the pod kept, as a supervisor does it in a cluster's pod.

The engine tells a pod its attempts in its plan (`told`, engine/inplace.py's tell), as it
tells a cluster's supervisors; here they reach the pod's LocalSupervisor directly, and
what it says of its rank is laid over the pod as a heard supervisor's is in a cluster
(supervised.overlay).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from trainop import wallclock
from trainop.engine import clock
from trainop.engine.observed import RankEnd, RankState, Told

if TYPE_CHECKING:
    from trainop.local.process import ContainerProcess

ATTEMPT_ENV = "TRAINOP_ATTEMPT"
"""The attempt the rank runs, in its environment (as the supervisor sets it)."""


@dataclass
class LocalSupervisor:
    """One local pod's rank, attempt by attempt: held until the attempt it was told is
    released, running it, stopping it when told a newer one (SIGTERM to its process group,
    SIGKILL after the grace), or ended, waiting to be told what next."""

    told: Told
    grace: float
    attempt: int = -1
    """The attempt the rank runs or last ran (-1: none yet)."""
    phase: str = "held"
    last: RankEnd | None = None
    seq: int = 0
    _heard: asyncio.Event = field(default_factory=asyncio.Event)

    def tell(self, told: Told) -> None:
        """What the engine tells the pod (its plan's `told`)."""
        if told != self.told:
            self.told = told
            self._heard.set()

    def rank(self, pod: str) -> RankState:
        """What a supervisor would answer the manager of its rank."""
        return RankState(pod, self.seq, self.phase, max(self.attempt, 0), self.told, self.last)

    async def run(self, process: ContainerProcess, running: Callable[[], None],
                  say: Callable[[str], None]) -> int:
        """Run the attempts the pod is told until it is told to finish after its rank
        ended; the exit code the pod ends with. `process` is the pod's ContainerProcess;
        `running` is called once the rank runs; `say` tells the user a line."""
        while True:
            await self._until(lambda: self.told.attempt > self.attempt
                              or (self.told.finish and self.phase == "exited"))
            if self.told.attempt <= self.attempt:  # told to finish, its rank ended
                assert self.last is not None
                return self.last.code
            if self.phase != "held":  # an ended rank has nothing to stop: it waits
                self._change("held")
            await self._until(lambda: self.told.released >= self.told.attempt)
            self.attempt = self.told.attempt
            if self.attempt > 0:
                say(f"attempt {self.attempt} starts, in place")
            process.command.env[ATTEMPT_ENV] = str(self.attempt)
            await self._attempt(process, running, say)

    async def placeholder(self, running: Callable[[], None]) -> None:
        """The attempts of a pod with no process of its own (an MPI worker: the launcher
        starts its ranks): held when told a newer one, running once it is released."""
        while True:
            await self._until(lambda: self.told.attempt > self.attempt)
            if self.phase != "held":
                self._change("held")
            await self._until(lambda: self.told.released >= self.told.attempt)
            self.attempt = self.told.attempt
            self._change("running")
            running()

    async def _attempt(self, process: ContainerProcess, running: Callable[[], None],
                       say: Callable[[str], None]) -> None:
        """One attempt of the rank, until it ends or is stopped for a newer one."""
        def started() -> None:
            self._change("running")
            running()
        ended = asyncio.get_running_loop().create_task(process.run(started))
        newer = asyncio.get_running_loop().create_task(
            self._until(lambda: self.told.attempt > self.attempt))
        try:
            await asyncio.wait((ended, newer), return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:  # the pod is deleted: its rank goes with it
            await process.stop(self.grace)
            await ended
            raise
        finally:
            newer.cancel()
        if not ended.done():
            say(f"attempt {self.told.attempt}: stopping attempt {self.attempt}")
            self._change("stopping")
            await process.stop(self.grace)
        code = await ended
        self.last = RankEnd(code, code - 128 if code > 128 else None,
                            clock.fmt(wallclock.now()))
        if self.told.attempt > self.attempt:
            self._change("held")
        else:
            say(f"exited with code {code} (attempt {self.attempt})")
            self._change("exited")

    async def _until(self, ready: Callable[[], bool]) -> None:
        while not ready():
            self._heard.clear()
            await self._heard.wait()

    def _change(self, phase: str) -> None:
        self.phase = phase
        self.seq += 1
        self._heard.set()
