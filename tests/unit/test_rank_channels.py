"""The manager following its jobs' rank supervisors (cluster/acting/rank_channels.py), the
real supervisors on the other end: what each says reaches the engine's reading and wakes
the job, the attempts are told to every one, and a supervisor that cannot be reached, or
is followed no more, is said nothing of."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

from testbed.supervisor import stop_all
from tests.unit.test_supervisor_channel import Running, supervising
from trainop.cluster.acting.rank_channels import RankChannels, Target
from trainop.engine.observed import RankState, Told

JOB = "default/job"
PODS = ["job-worker-0", "job-worker-1"]


@contextlib.contextmanager
def two_ranks(supervisor: Path, tmp_path: Path, *flags: str) -> Iterator[list[Running]]:
    """Two supervisors of one job (one key), each running the test's rank, with a lease
    longer than a poll is held (as the supervisor's default is)."""
    flags = ("--lease", "8s", *flags)
    with supervising(supervisor, tmp_path, *flags, pod=PODS[0]) as first, \
            supervising(supervisor, tmp_path, *flags, pod=PODS[1], key=first.key) as second:
        yield [first, second]


def targets(runs: list[Running], told: Told) -> list[Target]:
    return [Target(f"uid-{i}", pod, f"127.0.0.1:{run.port}", told)
            for i, (pod, run) in enumerate(zip(PODS, runs, strict=True))]


class Woken:
    def __init__(self) -> None:
        self.times = 0

    def __call__(self) -> None:
        self.times += 1


async def until(check: Callable[[], object], what: str, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"no {what} within {timeout}s"
        await asyncio.sleep(0.02)


def phases(channels: RankChannels) -> dict[str, tuple[str, int]]:
    return {uid: (s.phase, s.attempt) for uid, s in channels.states(JOB).items()}


def run(fn: Callable[[RankChannels], Awaitable[None]]) -> None:
    async def main() -> None:
        channels = RankChannels()
        try:
            await fn(channels)
        finally:
            await channels.close()
    asyncio.run(main())


def test_a_failed_rank_is_read_and_the_next_attempt_told_to_every_supervisor(
        supervisor: Path, tmp_path: Path) -> None:
    with two_ranks(supervisor, tmp_path) as runs:
        first_pids = [r.pid_of(0) for r in runs]

        async def restart(channels: RankChannels) -> None:
            woken = Woken()
            channels.follow(JOB, runs[0].key, targets(runs, Told(0, 0)), woken)
            await until(lambda: phases(channels) == {"uid-0": ("running", 0),
                                                     "uid-1": ("running", 0)}, "both read")
            before = woken.times
            (runs[1].here / "fail").touch()  # the rank of job-worker-1 exits 3
            await until(lambda: phases(channels)["uid-1"] == ("exited", 0), "its end")
            assert woken.times > before  # the job is looked at again
            last = channels.states(JOB)["uid-1"].last
            assert last is not None and last.code == 3
            (runs[1].here / "fail").unlink()
            # the engine decides attempt 1: every supervisor stops its rank and holds
            channels.follow(JOB, runs[0].key, targets(runs, Told(1, 0)), woken)
            await until(lambda: phases(channels) == {"uid-0": ("held", 1),
                                                     "uid-1": ("held", 1)}, "both held")
            # ... and released, every rank runs attempt 1
            channels.follow(JOB, runs[0].key, targets(runs, Told(1, 1)), woken)
            await until(lambda: phases(channels) == {"uid-0": ("running", 1),
                                                     "uid-1": ("running", 1)}, "attempt 1")
        run(restart)
        assert [r.pid_of(1) for r in runs] != first_pids  # new processes, same supervisors
        assert all(r.proc.poll() is None for r in runs)


def test_a_supervisor_that_cannot_be_reached_is_said_nothing_of(supervisor: Path,
                                                                tmp_path: Path) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))  # bound, not listening: the connection is refused
        nobody = f"127.0.0.1:{closed.getsockname()[1]}"

        async def follow(channels: RankChannels) -> None:
            woken = Woken()
            channels.follow(JOB, b"k" * 32, [Target("uid-0", PODS[0], nobody, Told(1, 0))],
                            woken)
            assert channels.unreached(JOB) == []  # not tried enough yet
            # polls (and the tell) tried again and again: the job is woken to say so, once
            await until(lambda: woken.times, "the job woken")
            assert channels.states(JOB) == {}
            assert channels.unreached(JOB) == [PODS[0]]
            assert channels.unreached(JOB) == []
        run(follow)


def test_a_supervisor_that_goes_away_is_said_nothing_of_any_more(supervisor: Path,
                                                                 tmp_path: Path) -> None:
    with two_ranks(supervisor, tmp_path) as runs:
        async def lose(channels: RankChannels) -> None:
            woken = Woken()
            channels.follow(JOB, runs[0].key, targets(runs, Told(0, 0)), woken)
            await until(lambda: len(channels.states(JOB)) == 2, "both read")
            stop_all(runs[0].proc)  # its container ended, with every process in it
            await until(lambda: list(channels.states(JOB)) == ["uid-1"], "it dropped")
            await asyncio.sleep(4)  # more than 3 failed polls
            # reached once, it is gone, not unreachable: the kubelet says what it is
            assert channels.unreached(JOB) == []
        run(lose)


def test_a_followed_supervisor_hears_its_manager_until_the_job_is_forgotten(
        supervisor: Path, tmp_path: Path) -> None:
    heard = tmp_path / "heard"
    # the supervisor's default lease (15 s) is longer than a poll is held: 8 s here
    with supervising(supervisor, tmp_path, "--heard", str(heard), "--lease", "8s",
                     pod=PODS[0]) as one:
        async def forget(channels: RankChannels) -> None:
            channels.follow(JOB, one.key, [Target("uid-0", PODS[0], f"127.0.0.1:{one.port}",
                                                  Told(0, 0))], Woken())
            await until(heard.exists, "it heard")
            start = time.monotonic()
            while time.monotonic() - start < 12:  # more than a lease: polls renew it
                assert heard.exists()
                await asyncio.sleep(0.1)
            channels.forget(JOB)
            assert channels.states(JOB) == {}
            await until(lambda: not heard.exists(), "its lease to lapse")
        run(forget)


def test_a_pod_made_again_is_followed_as_a_new_one(supervisor: Path, tmp_path: Path) -> None:
    with two_ranks(supervisor, tmp_path) as runs:
        async def remade(channels: RankChannels) -> None:
            woken = Woken()
            channels.follow(JOB, runs[0].key, targets(runs, Told(0, 0))[:1], woken)
            await until(lambda: list(channels.states(JOB)) == ["uid-0"], "the first")
            # the pod's name now belongs to a pod of another UID: the old one's word goes
            again = Target("uid-new", PODS[1], f"127.0.0.1:{runs[1].port}", Told(0, 0))
            channels.follow(JOB, runs[0].key, [again], woken)
            assert "uid-0" not in channels.states(JOB)
            await until(lambda: list(channels.states(JOB)) == ["uid-new"], "the new one")
            state: RankState = channels.states(JOB)["uid-new"]
            assert state.pod == PODS[1]
        run(remade)
