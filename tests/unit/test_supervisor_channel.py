"""The rank supervisor's channel (supervisor/channel.go, trainop/cluster/acting/ranks.py):
the real supervisor, told the job's attempts by the manager's end of the protocol. It stops its
rank's processes for a newer attempt and starts them again once that attempt is released,
in the same supervisor; it says how its rank ended; and nobody but the manager can tell it
anything, nor anybody but it answer."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web

from testbed.supervisor import alive, stop_all
from trainop.cluster.acting.ranks import ChannelError, NotAuthentic, Supervisor, encode_key, mac
from trainop.engine.observed import RankState, Told

POD = "job-worker-0"

# The rank: says its attempt and pid, notes them, and runs until stopped (or as the
# test's files say: `fail` ends it with 3, `ignore` makes it ignore SIGTERM, `daemon`
# leaves a process of its own session behind). A note is written aside and renamed: the
# test never reads half of one.
RANK = """\
import os, signal, subprocess, sys, time
from pathlib import Path
here = Path(sys.argv[1])
def note(name, text):
    (here / f".{name}").write_text(text)
    os.replace(here / f".{name}", here / name)
attempt = os.environ.get("TRAINOP_ATTEMPT")
note(f"attempt-{attempt}", str(os.getpid()))
print(f"attempt {attempt} pid {os.getpid()}", flush=True)
if (here / "ignore").exists():
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if (here / "daemon").exists():
    d = subprocess.Popen(["sleep", "300"], start_new_session=True)
    note("daemon-pid", str(d.pid))
while not (here / "fail").exists():
    time.sleep(0.05)
sys.exit(3)
"""


class Running:
    """A supervisor started with its channel on a port of its choosing."""

    def __init__(self, proc: subprocess.Popen[str], port: int, key: bytes, here: Path) -> None:
        self.proc, self.port, self.key, self.here = proc, port, key, here

    def client(self, session: aiohttp.ClientSession, key: bytes | None = None,
               pod: str = POD) -> Supervisor:
        return Supervisor(session, f"127.0.0.1:{self.port}", pod, key or self.key)

    def pid_of(self, attempt: int) -> int:
        """The rank of `attempt`, once it noted its pid."""
        wait_until(lambda: (self.here / f"attempt-{attempt}").exists(), f"attempt {attempt}")
        return int((self.here / f"attempt-{attempt}").read_text())


@contextlib.contextmanager
def supervising(supervisor: Path, tmp_path: Path, *flags: str, key: bytes | None = None,
                script: str = RANK, under: tuple[str, ...] = (), shell: str | None = None,
                pod: str = POD) -> Iterator[Running]:
    """The supervisor running `script` with python, or a `shell` line with sh (RANK is
    in its environment as RANK_SCRIPT), `under` a command of the test's (unshare, setpriv)."""
    key = key or secrets.token_bytes(32)
    here = tmp_path / pod
    here.mkdir(exist_ok=True)
    command = ["sh", "-c", shell] if shell else [sys.executable, "-c", script, str(here)]
    proc = subprocess.Popen(
        [*under, str(supervisor), "--listen", "127.0.0.1:0", "--pod", pod, "--grace", "2s",
         "--lease", "3s", *flags, "--", *command],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "TRAINOP_SUPERVISOR_KEY": encode_key(key), "RANK_SCRIPT": RANK})
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert line.startswith("trainop-supervisor: channel on 127.0.0.1:"), line
        yield Running(proc, int(line.rsplit(":", 1)[1]), key, here)
    finally:
        stop_all(proc)


def wait_until(check: Callable[[], object], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"no {what} within {timeout}s"
        time.sleep(0.02)


def talk(fn: Callable[[aiohttp.ClientSession], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=40)) as session:
            return await fn(session)
    return asyncio.run(main())


async def settled(sup: Supervisor, phase: str, attempt: int, timeout: float = 10
                  ) -> RankState:
    """The rank's state once it is `phase` of `attempt`, read as the manager reads it."""
    state = await sup.state()
    deadline = time.monotonic() + timeout
    while (state.phase, state.attempt) != (phase, attempt):
        assert time.monotonic() < deadline, state
        state = await sup.state(after=state.seq, wait=2)
    return state


async def failed(run: Running, session: aiohttp.ClientSession) -> tuple[Supervisor, RankState]:
    """The manager heard, then the rank fails (exit 3): the supervisor, and its word of it."""
    sup = run.client(session)
    await sup.state()  # the manager is heard: the rank's end is its to judge
    (run.here / "fail").touch()
    return sup, await settled(sup, "exited", 0)


# -- the restart ----------------------------------------------------------------------------

def test_a_newer_attempt_stops_the_rank_and_its_release_starts_it_again(
        supervisor: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    with supervising(supervisor, tmp_path, "--state", str(state)) as run:
        first = run.pid_of(0)

        async def restart(session: aiohttp.ClientSession) -> tuple[RankState, RankState]:
            sup = run.client(session)
            assert (await sup.state()).phase == "running"
            await sup.tell(Told(1, 0))
            held = await settled(sup, "held", 1)
            assert not alive(first)  # no process of attempt 0 meets one of attempt 1
            assert state.read_text() == "1\n"  # the pod's agent reads it: no kubelet restart
            assert not (run.here / "attempt-1").exists()  # held until released
            await sup.tell(Told(1, 1))
            return held, await settled(sup, "running", 1)
        held, running = talk(restart)
        assert held.last is not None and held.last.code == 128 + signal.SIGTERM
        second = run.pid_of(1)
        assert second != first and alive(second)
        assert running.told == Told(1, 1)
        assert run.proc.poll() is None  # the same supervisor, the same container


# root as a container's is: without CAP_SYS_PTRACE (no container runtime grants it unasked)
CONTAINER_ROOT = ("setpriv", "--bounding-set", "-sys_ptrace", "--")


def test_the_rank_gets_the_attempt_it_runs_and_never_the_key(supervisor: Path,
                                                             tmp_path: Path) -> None:
    # the rank looks for the key (which the test hands it to know it when it sees it)
    # everywhere a process of the same user could: its environment, the supervisor's
    # environment, memory and command line
    key = secrets.token_bytes(32)
    (tmp_path / "key").write_text(encode_key(key))
    peek = ("import os, sys\n"
            "key = open(sys.argv[1] + '/../key').read().encode()\n"
            "print('key' if 'TRAINOP_SUPERVISOR_KEY' in os.environ else 'no key')\n"
            "print('attempt', os.environ['TRAINOP_ATTEMPT'])\n"
            "for f in ('environ', 'mem', 'cmdline'):\n"
            "    try:\n"
            "        data = open(f'/proc/{os.getppid()}/{f}', 'rb').read(1 << 16)\n"
            "        print(f, 'read', data.count(key))\n"
            "    except OSError as err:\n"
            "        print(f, type(err).__name__)\n"
            "sys.stdout.flush()\n")
    with supervising(supervisor, tmp_path, "--attempt", "4", key=key, script=peek,
                     under=CONTAINER_ROOT) as run:
        out, _ = run.proc.communicate(timeout=20)
    lines = out.splitlines()
    assert lines[:2] == ["no key", "attempt 4"]
    # the supervisor's memory is not readable by its own child, though it runs as the same
    # user (PR_SET_DUMPABLE 0), and its environment and command line do not hold the key
    # (it ran itself again with the key on a pipe)
    assert lines[2:] == ["environ read 0", "mem PermissionError", "cmdline read 0"]


def test_a_rank_that_ends_is_said_and_the_supervisor_waits_for_the_managers_word(
        supervisor: Path, tmp_path: Path) -> None:
    with supervising(supervisor, tmp_path) as run:
        run.pid_of(0)

        async def fail(session: aiohttp.ClientSession) -> RankState:
            sup, ended = await failed(run, session)
            assert run.proc.poll() is None  # the container lives on
            await sup.tell(Told(0, 0, finish=True))
            return ended
        ended = talk(fail)
        assert ended.last is not None and (ended.last.code, ended.last.signal) == (3, None)
        assert run.proc.wait(timeout=10) == 3  # the pod ends as its rank did


@pytest.mark.parametrize(("oom_kills", "reason"), [(1, "OOMKilled"), (0, None)])
def test_a_rank_the_oom_killer_ended_is_said_oom_killed(supervisor: Path, tmp_path: Path,
                                                       oom_kills: int, reason: str | None
                                                       ) -> None:
    # the container's cgroup counts the OOM killer's kills (cgroup v2's memory.events, here
    # a file of the test's): a rank SIGKILLed while the count grew ended for want of memory
    events = tmp_path / "memory.events"
    events.write_text("low 0\nhigh 0\nmax 4\noom 1\noom_kill 0\noom_group_kill 0\n")
    with supervising(supervisor, tmp_path, "--memory-events", str(events)) as run:
        pid = run.pid_of(0)

        async def killed(session: aiohttp.ClientSession) -> RankState:
            sup = run.client(session)
            await sup.state()
            events.write_text(f"low 0\nhigh 0\nmax 9\noom 2\noom_kill {oom_kills}\n"
                              "oom_group_kill 0\n")
            os.kill(pid, signal.SIGKILL)
            return await settled(sup, "exited", 0)
        ended = talk(killed)
    assert ended.last is not None
    assert (ended.last.code, ended.last.signal, ended.last.reason) == (137, 9, reason)


def test_a_rank_that_ended_starts_again_in_the_next_attempt(supervisor: Path,
                                                           tmp_path: Path) -> None:
    with supervising(supervisor, tmp_path) as run:
        run.pid_of(0)

        async def again(session: aiohttp.ClientSession) -> None:
            sup, _ = await failed(run, session)
            (run.here / "fail").unlink()
            await sup.tell(Told(1, 1))  # told and released at once: it starts
            await settled(sup, "running", 1)
        talk(again)
        assert alive(run.pid_of(1))


def test_a_rank_that_ignores_sigterm_is_killed_after_the_grace(supervisor: Path,
                                                             tmp_path: Path) -> None:
    with supervising(supervisor, tmp_path) as run:
        (run.here / "ignore").touch()
        first = run.pid_of(0)

        async def stop(session: aiohttp.ClientSession) -> tuple[float, RankState]:
            sup = run.client(session)
            start = time.monotonic()
            await sup.tell(Told(1, 0))
            held = await settled(sup, "held", 1)
            return time.monotonic() - start, held
        took, held = talk(stop)
        assert not alive(first)
        assert held.last is not None and held.last.code == 128 + signal.SIGKILL
        assert took >= 2  # --grace 2s: SIGTERM first, SIGKILL only then


def test_a_pod_deleted_while_its_rank_stops_ends_and_holds_for_nothing(
        supervisor: Path, tmp_path: Path) -> None:
    with supervising(supervisor, tmp_path) as run:
        (run.here / "ignore").touch()  # the stop lasts its grace
        run.pid_of(0)
        talk(lambda session: run.client(session).tell(Told(1, 0)))
        run.proc.send_signal(signal.SIGTERM)  # the kubelet's, the pod being deleted
        assert run.proc.wait(timeout=20) == 128 + signal.SIGKILL  # the rank's end, after
        assert not (run.here / "attempt-1").exists()              # the grace; no next


def test_a_daemon_the_rank_left_goes_with_its_attempt(supervisor: Path, tmp_path: Path) -> None:
    with supervising(supervisor, tmp_path) as run:
        (run.here / "daemon").touch()
        run.pid_of(0)
        wait_until(lambda: (run.here / "daemon-pid").exists(), "the daemon")
        daemon = int((run.here / "daemon-pid").read_text())

        async def stop(session: aiohttp.ClientSession) -> None:
            await run.client(session).tell(Told(1, 0))
            await settled(run.client(session), "held", 1)
        talk(stop)
        assert not alive(daemon)  # in a session of its own, still not left running


def test_an_attempt_told_twice_or_out_of_order_changes_nothing(supervisor: Path,
                                                               tmp_path: Path) -> None:
    with supervising(supervisor, tmp_path) as run:
        run.pid_of(0)

        async def told(session: aiohttp.ClientSession) -> list[RankState]:
            sup = run.client(session)
            await sup.tell(Told(2, 2))
            await settled(sup, "running", 2)
            return [await sup.tell(Told(2, 2)), await sup.tell(Told(1, 1)),
                    await sup.tell(Told(2, 1))]
        for state in talk(told):
            assert (state.phase, state.attempt, state.told) == ("running", 2, Told(2, 2))
        assert not (run.here / "attempt-1").exists()


def attempt_files(tmp_path: Path, attempt: str, released: str) -> Path:
    files = tmp_path / "files"
    files.mkdir(exist_ok=True)
    for name, value in (("attempt", attempt), ("released", released), ("finish", "false")):
        (files / name).write_text(value)
    return files


def test_the_attempt_files_tell_it_what_a_lost_tell_did_not(supervisor: Path,
                                                            tmp_path: Path) -> None:
    files = attempt_files(tmp_path, "0", "0")
    with supervising(supervisor, tmp_path, "--files", str(files)) as run:
        first = run.pid_of(0)

        async def heard(session: aiohttp.ClientSession) -> None:
            await run.client(session).state()
            (files / "attempt").write_text("²")  # not ASCII digits: not read at all
            await asyncio.sleep(0.6)
            assert alive(first)
            (files / "attempt").write_text("1")
            await settled(run.client(session), "held", 1)
            (files / "released").write_text("1")
            await settled(run.client(session), "running", 1)
        talk(heard)
        assert not alive(first) and alive(run.pid_of(1))


def test_unheard_the_attempt_files_are_left_to_the_pods_agent(supervisor: Path,
                                                              tmp_path: Path) -> None:
    # no manager reads this rank's state: were it to stop for the files, nobody would
    # release it (the pod's agent and barrier restart the pod instead)
    files = attempt_files(tmp_path, "0", "0")
    with supervising(supervisor, tmp_path, "--files", str(files)) as run:
        first = run.pid_of(0)
        (files / "attempt").write_text("1")
        time.sleep(1)
        assert alive(first)


def test_it_starts_in_the_attempt_its_files_say(supervisor: Path, tmp_path: Path) -> None:
    # its containers restarted by the kubelet's path: the barrier let it into attempt 3,
    # while its command still says the attempt the pod was made for
    files = attempt_files(tmp_path, "3", "3")
    with supervising(supervisor, tmp_path, "--files", str(files), "--attempt", "0") as run:
        assert alive(run.pid_of(3))


def test_a_shell_line_stops_with_everything_it_started(supervisor: Path, tmp_path: Path) -> None:
    # `sh -c "python ...; ..."`: the shell stays the rank's parent; both are the group's
    line = f"{sys.executable} -c \"$RANK_SCRIPT\" {tmp_path / POD}; echo after"
    with supervising(supervisor, tmp_path, script="", under=(), shell=line) as run:
        rank = run.pid_of(0)
        shell = int(Path(f"/proc/{rank}/stat").read_text().rsplit(")", 1)[1].split()[1])
        assert shell != run.proc.pid  # the rank runs under the shell, not the supervisor

        async def stop(session: aiohttp.ClientSession) -> None:
            await run.client(session).tell(Told(1, 0))
            await settled(run.client(session), "held", 1)
        talk(stop)
        assert not alive(rank) and not alive(shell)


def test_as_pid_1_it_outlives_its_rank_killing_it(supervisor: Path, tmp_path: Path) -> None:
    # a container's PID 1 gets no signal from its own processes that it does not handle:
    # SIGKILL from the rank does nothing, and SIGTERM stops the rank first
    kill = ("import os, signal, time\n"
            "os.kill(1, signal.SIGKILL)\n"
            "time.sleep(0.5)\n"
            "print('still here', flush=True)\n"
            "os.kill(1, signal.SIGTERM)\n"
            "time.sleep(30)\n")
    with supervising(supervisor, tmp_path, script=kill,
                     under=("unshare", "--pid", "--fork", "--kill-child", "--mount-proc")) as run:
        out, _ = run.proc.communicate(timeout=30)
    assert out == "still here\n"
    assert run.proc.returncode == 128 + signal.SIGTERM  # the rank's end, passed SIGTERM


# -- who may speak --------------------------------------------------------------------------

def test_a_tell_under_another_key_or_for_another_pod_is_refused(supervisor: Path,
                                                                tmp_path: Path) -> None:
    with supervising(supervisor, tmp_path) as run:
        first = run.pid_of(0)

        async def forge(session: aiohttp.ClientSession) -> list[str]:
            refused = []
            for sup in (run.client(session, key=secrets.token_bytes(32)),  # another job's
                        run.client(session, pod="job-worker-1")):  # another pod's request
                with pytest.raises(ChannelError) as err:
                    await sup.tell(Told(5, 5))
                refused.append(str(err.value))
            return refused
        for message in talk(forge):
            assert "401" in message
        time.sleep(0.5)
        assert alive(first) and not (run.here / "attempt-5").exists()


@pytest.mark.parametrize("mac_of", [
    lambda key, nonce, body: b"",  # none
    lambda key, nonce, body: mac(secrets.token_bytes(32), "answer", POD, nonce, body),
    lambda key, nonce, body: mac(key, "answer", POD, "0" * 32, body),  # a replayed answer
    lambda key, nonce, body: mac(key, "request", POD, nonce, body),  # a request's, reflected
], ids=["no-mac", "other-key", "replayed", "reflected"])
def test_an_answer_that_is_not_the_supervisors_is_refused(
        mac_of: Callable[[bytes, str, bytes], bytes]) -> None:
    # a process that took the supervisor's port (its supervisor gone) answers for it
    key = secrets.token_bytes(32)
    body = (b'{"pod":"job-worker-0","seq":9,"phase":"held","attempt":1,'
            b'"told":{"attempt":1,"released":1,"finish":false},"last":null}')

    async def impostor(request: web.Request) -> web.Response:
        nonce = request.headers["X-Trainop-Nonce"]
        return web.Response(body=body, headers={"X-Trainop-Mac": mac_of(key, nonce,
                                                                        body).hex()})
    with pytest.raises(NotAuthentic):
        asyncio.run(state_from(impostor, key))


def test_a_signed_answer_that_is_not_json_is_a_channel_error() -> None:
    # whatever a supervisor answers, the manager's poll of it goes on (ChannelError only)
    key, body = secrets.token_bytes(32), b"\xff not json"

    async def broken(request: web.Request) -> web.Response:
        nonce = request.headers["X-Trainop-Nonce"]
        return web.Response(body=body, headers={"X-Trainop-Mac": mac(
            key, "answer", POD, nonce, body).hex()})
    with pytest.raises(ChannelError, match="not in the protocol's shape"):
        asyncio.run(state_from(broken, key))


@pytest.mark.parametrize("reason", ["Error", "", 7, None, "OOMKilled\n"])
def test_a_reason_no_supervisor_gives_is_a_channel_error(reason: object) -> None:
    key = secrets.token_bytes(32)

    async def odd(request: web.Request) -> web.Response:
        body = orjson.dumps({"pod": POD, "seq": 2, "phase": "exited", "attempt": 0,
                             "told": {"attempt": 0, "released": 0, "finish": False},
                             "last": {"code": 137, "signal": 9, "at": "x", "reason": reason}})
        return web.Response(body=body, headers={"X-Trainop-Mac": mac(
            key, "answer", POD, request.headers["X-Trainop-Nonce"], body).hex()})
    with pytest.raises(ChannelError, match="not a reason a supervisor gives"):
        asyncio.run(state_from(odd, key))


async def state_from(handler: Callable[[web.Request], Awaitable[web.Response]],
                     key: bytes) -> RankState:
    """The manager's read of the state from a server of the test's, answering `handler`."""
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    try:
        async with aiohttp.ClientSession() as session:
            return await Supervisor(session, f"127.0.0.1:{port}", POD, key).state()
    finally:
        await runner.cleanup()


def test_a_bad_request_is_refused_and_changes_nothing(supervisor: Path, tmp_path: Path) -> None:
    with supervising(supervisor, tmp_path) as run:
        first = run.pid_of(0)

        async def bad(session: aiohttp.ClientSession) -> list[int]:
            codes = []
            for body in (b'{"attempt": 1, "released": 2}', b'{"attempt": -1, "released": 0}',
                         b'{"attempt": 1, "released": 0, "extra": 1}', b"[]",
                         b'{"attempt": 2147483648, "released": 0}'):
                nonce = secrets.token_hex(16)
                headers = {"X-Trainop-Nonce": nonce, "X-Trainop-Mac": mac(
                    run.key, "request", "POST", "/tell", "", POD, nonce, body).hex()}
                async with session.post(f"http://127.0.0.1:{run.port}/tell", data=body,
                                        headers=headers) as resp:
                    codes.append(resp.status)
            return codes
        assert talk(bad) == [400] * 5
        assert alive(first)


def test_a_flood_of_silent_connections_does_not_keep_the_manager_out(
        supervisor: Path, tmp_path: Path) -> None:
    # whoever reaches the pod opens connections and says nothing: the manager is answered
    # while they are all still open (none is dropped before 5 s without a request)
    with supervising(supervisor, tmp_path) as run:
        run.pid_of(0)
        flood = [socket.create_connection(("127.0.0.1", run.port)) for _ in range(300)]
        try:
            state = talk(lambda session: run.client(session).state())
            assert state.phase == "running"
            for sock in flood:
                sock.setblocking(False)
                with pytest.raises(BlockingIOError):  # open: nothing to read, not closed
                    sock.recv(1, socket.MSG_PEEK)
        finally:
            for sock in flood:
                sock.close()


def test_while_the_manager_is_heard_a_file_says_so_for_the_pods_agent(
        supervisor: Path, tmp_path: Path) -> None:
    heard = tmp_path / "heard"
    with supervising(supervisor, tmp_path, "--heard", str(heard)) as run:
        run.pid_of(0)
        assert not heard.exists()  # never heard: the agent restarts the pod's containers

        async def stranger(session: aiohttp.ClientSession) -> None:
            with pytest.raises(ChannelError):
                await run.client(session, key=secrets.token_bytes(32)).state()
        talk(stranger)
        assert not heard.exists()  # a request under another key is nobody heard

        talk(lambda session: run.client(session).state())
        assert heard.exists()
        start = time.monotonic()
        wait_until(lambda: not heard.exists(), "the lease to lapse")
        assert time.monotonic() - start > 1  # --lease 3s after it was last heard


def test_a_supervisor_that_ends_leaves_no_word_that_it_is_heard(supervisor: Path,
                                                               tmp_path: Path) -> None:
    heard = tmp_path / "heard"
    with supervising(supervisor, tmp_path, "--heard", str(heard)) as run:
        run.pid_of(0)

        async def finish(session: aiohttp.ClientSession) -> None:
            sup, _ = await failed(run, session)
            assert heard.exists()
            await sup.tell(Told(0, 0, finish=True))
        talk(finish)
        assert run.proc.wait(timeout=10) == 3
        assert not heard.exists()


# -- without the manager --------------------------------------------------------------------

def test_unheard_by_any_manager_it_ends_as_its_rank_did(supervisor: Path, tmp_path: Path) -> None:
    # the kubelet's path takes over: the container ends with the rank's code
    with supervising(supervisor, tmp_path) as run:
        run.pid_of(0)
        (run.here / "fail").touch()
        assert run.proc.wait(timeout=10) == 3


def test_once_its_manager_goes_quiet_it_ends_as_its_rank_did(supervisor: Path,
                                                             tmp_path: Path) -> None:
    with supervising(supervisor, tmp_path) as run:
        run.pid_of(0)

        talk(lambda session: failed(run, session))
        start = time.monotonic()
        assert run.proc.wait(timeout=10) == 3
        assert time.monotonic() - start < 5  # --lease 3s after it was last heard


def test_a_port_that_is_taken_leaves_it_the_command_alone(supervisor: Path,
                                                          tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [str(supervisor), "--listen", f"127.0.0.1:{port}", "--pod", POD, "--",
             "sh", "-c", "echo out; exit 7"], capture_output=True, text=True, timeout=30,
            env={**os.environ, "TRAINOP_SUPERVISOR_KEY": encode_key(secrets.token_bytes(32))})
    assert (done.returncode, done.stdout) == (7, "out\n")
    assert done.stderr.startswith("trainop-supervisor: no channel: listen tcp")


def test_a_key_too_short_is_said_and_the_command_runs_alone(supervisor: Path) -> None:
    done = subprocess.run(
        [str(supervisor), "--listen", "127.0.0.1:0", "--pod", POD, "--", "sh", "-c", "exit 4"],
        capture_output=True, text=True, timeout=30,
        env={**os.environ, "TRAINOP_SUPERVISOR_KEY": encode_key(b"short")})
    assert done.returncode == 4
    assert done.stderr == ("trainop-supervisor: no channel: TRAINOP_SUPERVISOR_KEY holds no "
                           "key of 32 bytes (base64url, unpadded)\n")
