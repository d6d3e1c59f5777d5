"""The lead rank's progress through its supervisor (supervisor/progress.go): the real
supervisor gives the rank the file to write (TRAINOP_PROGRESS_FILE), and passes the latest
report on in its signed state, at most once per --progress-every and LIMIT bytes, as the
manager reads it (cluster/acting/ranks.py)."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import secrets
import time
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from tests.unit.test_supervisor_channel import (
    POD,
    Running,
    state_from,
    supervising,
    talk,
    wait_until,
)
from trainop.cluster.acting.ranks import ChannelError, NotAuthentic, mac, read_state
from trainop.engine.observed import RankState, Reported, Told

# The rank: reports through trainop.progress, as a training script does, each step the
# test asks for (a file `step-N`), or (a file `burst`) a step every 20 ms up to 150; it
# ends (0) once the test says (a file `end`).
REPORTING = """\
import sys, time
from pathlib import Path
from trainop import progress
here = Path(sys.argv[1])
n = 0
while not (here / "end").exists():
    while (here / f"step-{n + 1}").exists() or (here / "burst").exists() and n < 150:
        n += 1
        progress.report(step=n, steps=150, metrics={"loss": 1 / n})
        time.sleep(0.02 if (here / "burst").exists() else 0)
    time.sleep(0.02)
"""


def progress_flags(run_dir: Path, every: str = "1s") -> tuple[str, ...]:
    return ("--progress", str(run_dir / "progress.json"), "--progress-every", every)


async def report_of(run: Running, session: aiohttp.ClientSession, want: object,
                    timeout: float = 15, negate: bool = False) -> RankState:
    """The state once its report is `want` (a Reported, or None; `negate`: is not)."""
    sup = run.client(session)
    state = await sup.state()
    deadline = time.monotonic() + timeout
    while (state.report == want) if negate else (state.report != want):
        assert time.monotonic() < deadline, state
        state = await sup.state(after=state.seq, wait=2)
    return state


def test_the_ranks_report_is_passed_on_in_the_signed_state(supervisor: Path,
                                                           tmp_path: Path) -> None:
    (tmp_path / POD).mkdir()
    with supervising(supervisor, tmp_path, *progress_flags(tmp_path / POD),
                     script=REPORTING) as run:
        (run.here / "step-1").touch()
        state = talk(lambda s: report_of(run, s, Reported(POD, {"trainerStatus": {
            "lastUpdatedTime": state_time(run), "progressPercentage": 0, "step": 1,
            "steps": 150, "metrics": [{"name": "loss", "value": "1"}]}})))
        assert state.phase == "running"


def state_time(run: Running) -> str:
    """The time the rank wrote in its report (read from the file it wrote)."""
    wait_until(lambda: (run.here / "progress.json").exists(), "a report", timeout=10)
    return str(json.loads((run.here / "progress.json").read_text())["trainerStatus"][
        "lastUpdatedTime"])


def test_reports_more_often_than_the_interval_pass_on_the_latest_of_each(
        supervisor: Path, tmp_path: Path) -> None:
    (tmp_path / POD).mkdir()
    with supervising(supervisor, tmp_path, *progress_flags(tmp_path / POD, "2s"),
                     script=REPORTING) as run:
        (run.here / "step-1").touch()

        async def watch(session: aiohttp.ClientSession) -> list[int]:
            await report_of(run, session, None, negate=True)
            sup = run.client(session)
            state = await sup.state()
            (run.here / "burst").touch()  # 150 reports in about 3 s
            seen = [step(state)]
            deadline = time.monotonic() + 7
            while time.monotonic() < deadline:
                state = await sup.state(after=state.seq, wait=1)
                if step(state) != seen[-1]:
                    seen.append(step(state))
            return seen
        seen = talk(watch)
    assert seen[-1] == 150
    # every 2 s at most (the first at once): 4 in the 7 s watched, of the 150 written
    assert 2 <= len(seen) <= 5, seen


def test_the_first_report_waits_for_no_interval_and_the_last_goes_with_the_ranks_end(
        supervisor: Path, tmp_path: Path) -> None:
    (tmp_path / POD).mkdir()
    with supervising(supervisor, tmp_path, *progress_flags(tmp_path / POD, "1h"),
                     script=REPORTING) as run:
        time.sleep(1)  # ticks with no report yet: the interval is not spent on them
        (run.here / "step-1").touch()

        async def watch(session: aiohttp.ClientSession) -> tuple[RankState, RankState]:
            first = await report_of(run, session, None, negate=True, timeout=10)
            await run.client(session).tell(Told(0, 0))  # heard: it waits for our word
            # a report within the hour, then the rank's end at once: passed on with it
            (run.here / "step-2").touch()
            wait_until(lambda: step_written(run) == 2, "the second report")
            (run.here / "end").touch()
            sup = run.client(session)
            state = await sup.state()
            deadline = time.monotonic() + 10
            while state.phase != "exited":
                assert time.monotonic() < deadline, state
                state = await sup.state(after=state.seq, wait=2)
            return first, state
        first, ended = talk(watch)
    assert step(first) == 1
    assert (ended.last and ended.last.code, step(ended)) == (0, 2)


def step_written(run: Running) -> int | None:
    try:
        return int(json.loads((run.here / "progress.json").read_text())["trainerStatus"][
            "step"])
    except (OSError, ValueError):
        return None


def step(state: RankState) -> int:
    assert state.report is not None
    return int(state.report.doc["trainerStatus"]["step"])


@pytest.mark.parametrize(("content", "problem"), [
    (b" " * (64 << 10) + b"{}", "a report over the 65536 bytes one may hold"),
    (b'{"trainerStatus": ', "a report that is not JSON"),
    (b"[" * 17 + b"]" * 17, "a report that is not JSON"),  # deeper than anyone reads
])
def test_a_report_it_cannot_pass_on_is_said_as_such(supervisor: Path, tmp_path: Path,
                                                    content: bytes, problem: str) -> None:
    here = tmp_path / POD
    here.mkdir()
    (here / ".p").write_bytes(content)
    os.replace(here / ".p", here / "progress.json")
    with supervising(supervisor, tmp_path, *progress_flags(here)) as run:
        talk(lambda s: report_of(run, s, Reported(POD, problem=problem)))


def test_a_link_the_rank_planted_is_not_followed(supervisor: Path, tmp_path: Path) -> None:
    here = tmp_path / POD
    here.mkdir()
    secret = tmp_path / "secret.json"
    secret.write_text('{"trainerStatus": {"progressPercentage": 7}}')
    os.symlink(secret, here / "progress.json")
    with supervising(supervisor, tmp_path, *progress_flags(here)) as run:
        run.pid_of(0)
        time.sleep(1.5)  # past a read
        state = talk(lambda s: run.client(s).state())
        assert state.report is None


def test_without_the_flag_the_rank_is_not_asked(supervisor: Path, tmp_path: Path) -> None:
    peek = ("import os, sys\n"
            "print(os.environ.get('TRAINOP_PROGRESS_FILE', 'not asked'), flush=True)\n")
    with supervising(supervisor, tmp_path, script=peek) as run:
        out, _ = run.proc.communicate(timeout=20)
    assert out.splitlines()[0] == "not asked"


def test_a_report_signed_for_another_job_or_pod_is_not_read(supervisor: Path,
                                                             tmp_path: Path) -> None:
    """An attacker's pod reports 100% for our lead pod: a supervisor of its own (our pod's
    name, its job's key) refuses the manager's poll, signed with our job's key; a server of
    its own that answers anything, signing with its key, is refused by the manager; and
    its pod's own supervisor answers for its pod's name only."""
    here = tmp_path / POD
    here.mkdir()
    (here / "progress.json").write_text('{"trainerStatus": {"progressPercentage": 100}}')
    theirs, ours = secrets.token_bytes(32), secrets.token_bytes(32)
    with supervising(supervisor, tmp_path, *progress_flags(here), key=theirs) as run:
        time.sleep(1.5)

        async def poll(session: aiohttp.ClientSession) -> None:
            with pytest.raises(ChannelError, match="401"):
                await run.client(session, key=ours).state()
            with pytest.raises(ChannelError, match="401"):
                await run.client(session, key=theirs, pod="job-master-0").state()
            assert (await run.client(session).state()).report is not None  # it does say it
        talk(poll)

    body = (b'{"pod":"job-worker-0","seq":9,"phase":"running","attempt":0,'
            b'"told":{"attempt":0,"released":0,"finish":false},"last":null,'
            b'"progress":{"trainerStatus":{"progressPercentage":100}}}')

    with pytest.raises(NotAuthentic):
        asyncio.run(state_from(functools.partial(impostor_as, key=theirs, body=body), ours))
    # the same answer under our key is read: the refusal above is the key's alone
    read = asyncio.run(state_from(functools.partial(impostor_as, key=ours, body=body), ours))
    assert read.report == Reported(POD, {"trainerStatus": {"progressPercentage": 100}})


async def impostor_as(request: web.Request, key: bytes, body: bytes) -> web.Response:
    nonce = request.headers["X-Trainop-Nonce"]
    return web.Response(body=body, headers={"X-Trainop-Mac": mac(
        key, "answer", POD, nonce, body).hex()})


@pytest.mark.parametrize(("extra", "report"), [
    ({}, None),
    ({"progress": [1]}, Reported(POD, [1])),  # any JSON: the engine says what it is not
    ({"progressProblem": "a report that is not JSON"},
     Reported(POD, problem="a report that is not JSON")),
])
def test_the_managers_reading_of_a_report(extra: dict[str, object],
                                          report: Reported | None) -> None:
    assert read_state({**STATE, **extra}, POD).report == report


@pytest.mark.parametrize("problem", [7, None, "x" * 201])
def test_a_problem_no_supervisor_says_is_a_channel_error(problem: object) -> None:
    with pytest.raises(ChannelError):
        read_state({**STATE, "progressProblem": problem}, POD)


STATE = {"pod": POD, "seq": 1, "phase": "running", "attempt": 0,
         "told": {"attempt": 0, "released": 0, "finish": False}, "last": None}
