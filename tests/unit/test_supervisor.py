"""The rank supervisor (supervisor/main.go) with nothing to supervise: a container whose
command is `trainop-supervisor -- COMMAND` behaves as COMMAND alone, seen from outside
(output, input, environment, exit code, signals) and as PID 1 must (no zombie left)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest


def supervised(supervisor: Path, *argv: str, **kw: object
               ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(supervisor), "--", *argv], capture_output=True, text=True,
                          timeout=30, **kw)  # type: ignore[call-overload]


def test_output_and_exit_code_are_the_commands(supervisor: Path) -> None:
    done = supervised(supervisor, "sh", "-c", "echo out; echo err >&2; exit 7")
    assert (done.returncode, done.stdout, done.stderr) == (7, "out\n", "err\n")
    assert supervised(supervisor, "true").returncode == 0


def test_input_and_environment_reach_the_command(supervisor: Path) -> None:
    done = supervised(supervisor, "sh", "-c", 'cat; echo "$RANK"', input="line\n",
                      env={**os.environ, "RANK": "3"})
    assert done.stdout == "line\n3\n"


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGKILL, 137), (signal.SIGTERM, 143)])
def test_a_command_ended_by_a_signal_ends_as_a_shell_says(supervisor: Path, sig: int,
                                                          code: int) -> None:
    # what a container's status shows of a main process a signal ended: 128+N
    assert supervised(supervisor, "sh", "-c", f"kill -{sig} $$").returncode == code


def test_the_signals_it_gets_are_passed_on_to_the_command(supervisor: Path) -> None:
    script = ("import signal, sys, time\n"
              "signal.signal(signal.SIGTERM, lambda *a: (print('TERM', flush=True),"
              " sys.exit(3)))\n"
              "print('ready', flush=True)\n"
              "time.sleep(30)\n")
    proc = subprocess.Popen([str(supervisor), "--", sys.executable, "-c", script],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        proc.send_signal(signal.SIGTERM)  # the kubelet's, at a pod's deletion
        assert proc.wait(timeout=10) == 3
        assert proc.stdout.read() == "TERM\n"
    finally:
        proc.kill()


def test_the_command_runs_in_a_process_group_of_its_own(supervisor: Path) -> None:
    # what stops an attempt stops the whole group (a rank's own children too)
    done = supervised(supervisor, sys.executable, "-c",
                      "import os; print(os.getpid(), os.getpgrp())")
    pid, group = (int(x) for x in done.stdout.split())
    assert group == pid and group != os.getpgrp()


def children_of(pid: int) -> list[tuple[int, str]]:
    """(pid, state) of each child of `pid`, from /proc."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            try:
                stat = Path(f"/proc/{child}/stat").read_text()
            except FileNotFoundError:
                continue
            found.append((int(child), stat.rsplit(")", 1)[1].split()[0]))
    return found


def test_what_the_command_leaves_behind_is_reaped(supervisor: Path) -> None:
    # a rank that daemonises a helper which then ends: the helper, orphaned, is the
    # supervisor's to reap (PID 1's in a container), never a zombie
    proc = subprocess.Popen([str(supervisor), "--", "sh", "-c",
                             "(sleep 0.5 &); echo started; sleep 3"],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "started\n"
        seen: dict[int, set[str]] = {}
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            for pid, state in children_of(proc.pid):
                seen.setdefault(pid, set()).add(state)
            time.sleep(0.02)
        assert len(seen) == 2  # the command, and the helper it left, taken in
        assert all("Z" not in states for states in seen.values())
        assert proc.wait(timeout=10) == 0
    finally:
        proc.kill()


def test_a_command_that_cannot_start_is_said_in_one_line(supervisor: Path,
                                                         tmp_path: Path) -> None:
    missing = supervised(supervisor, str(tmp_path / "nothing"))
    assert missing.returncode == 127
    assert missing.stderr.count("\n") == 1 and "cannot start" in missing.stderr
    plain = tmp_path / "plain"
    plain.write_text("not a program")
    assert supervised(supervisor, str(plain)).returncode == 126  # there, not runnable
    wrong = subprocess.run([str(supervisor), "sh"], capture_output=True, text=True)
    assert wrong.returncode == 2 and "usage" in wrong.stderr


def test_the_binary_is_static(supervisor: Path) -> None:
    # nothing of the user's image is needed: no interpreter is named in the ELF file
    data = supervisor.read_bytes()
    assert data[:4] == b"\x7fELF" and b"/lib64/ld-linux" not in data
    assert supervisor.stat().st_size < 8 * 2**20  # net/http is most of it


def test_it_installs_itself_where_the_main_container_finds_it(supervisor: Path,
                                                              tmp_path: Path) -> None:
    # an init container's copy into the emptyDir both containers mount: no cp in its image
    done = subprocess.run([str(supervisor), "--install", str(tmp_path)], capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0
    installed = tmp_path / "trainop-supervisor"
    assert installed.read_bytes() == supervisor.read_bytes()
    assert os.access(installed, os.X_OK)
    assert [p.name for p in tmp_path.iterdir()] == ["trainop-supervisor"]  # nothing aside
    assert supervised(installed, "sh", "-c", "exit 5").returncode == 5


def test_an_install_that_cannot_write_says_so(supervisor: Path, tmp_path: Path) -> None:
    done = subprocess.run([str(supervisor), "--install", str(tmp_path / "absent")],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "cannot install" in done.stderr
