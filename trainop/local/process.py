"""One replica as a local process, with the kubelet's part: restarts in place, exit codes."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import platform
import re
import signal
import sys
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, BinaryIO

from trainop import wallclock
from trainop.api.templates import main_container
from trainop.engine import Ended, PodState, clock
from trainop.engine.observed import InPlace
from trainop.engine.supervised import overlay
from trainop.local.supervisor import LocalSupervisor

PYTHONS = ("python", "python3")
MAX_BACKOFF = 10.0
START_FAILED = 127
"""Exit code of a replica whose command could not be started."""
TAIL_LINES = 20
"""Lines of a failed run's output kept as its termination message."""


class NotRunnable(ValueError):
    """A pod that cannot run as a local process (no command, say)."""


@dataclass
class Command:
    argv: list[str]
    env: dict[str, str]
    cwd: Path


def command_of(pod: dict[str, Any], main: str, run_dir: Path, extra_env: dict[str, str],
               mounts: dict[str, Path]) -> Command:
    """The main container's command, args and environment, mapped to this machine.

    `python`/`python3` become this interpreter, and this environment's `bin` folder comes
    first on PATH, so a replica and every process it starts (mpirun's ranks, torchrun's
    workers, console scripts) run in the environment trainop runs in, activated or not;
    paths under a mounted volume (e.g. /etc/mpi) point into the run folder.
    """
    container = main_container(pod, main) or {}
    argv = [str(a) for a in (container.get("command") or []) + (container.get("args") or [])]
    name = pod["metadata"]["name"]
    if not argv:
        raise NotRunnable(f"pod {name}: container {container.get('name')!r} has no command "
                          "(locally trainop runs the container's command and args)")
    if argv[0] in PYTHONS:
        argv[0] = sys.executable
    env = dict(os.environ)
    own: dict[str, str] = {}  # what $(NAME) may name: the container's earlier variables
    for item in container.get("env") or []:
        if "value" in item:
            value = _map_paths(expand(str(item["value"]), own), mounts)
        else:
            field = ((item.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
            if field not in LOCAL_FIELDS:
                continue  # a Secret or ConfigMap key: nothing to read it from here
            value = LOCAL_FIELDS[field](pod)
        env[item["name"]] = own[item["name"]] = value
    env.update(extra_env)
    # after the job's own env: a PATH the manifest sets still finds this environment first
    env["PATH"] = path_with_this_environment(env.get("PATH", os.defpath))
    cwd = Path(container["workingDir"]) if Path(container.get("workingDir") or "/nonexistent"
                                                ).is_dir() else run_dir
    return Command(argv, env, cwd)


LOCAL_FIELDS: dict[str, Callable[[dict[str, Any]], str]] = {
    "status.podIP": lambda pod: "127.0.0.1",
    "metadata.name": lambda pod: str(pod["metadata"]["name"]),
    "metadata.namespace": lambda pod: str(pod["metadata"].get("namespace") or "default"),
}
"""The pod fields a variable may take (`valueFrom.fieldRef`) when the pod is a process."""

_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def expand(value: str, defined: dict[str, str]) -> str:
    """`$(NAME)` as the kubelet expands it: a variable defined before it in the container,
    else left as written; `$$` is a `$`."""
    def one(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        return defined.get(m.group(1), m.group(0))
    return _REFERENCE.sub(one, value)


def environment_bin() -> str:
    """The folder of this Python environment's interpreter and console scripts."""
    # sysconfig names the venv's bin even where the interpreter is a symlink out of it
    return sysconfig.get_path("scripts") or os.path.dirname(sys.executable)


def path_with_this_environment(path: str) -> str:
    """`path` with this environment's bin folder first (and nowhere else)."""
    first = environment_bin()
    rest = [p for p in path.split(os.pathsep) if p and p != first]
    return os.pathsep.join([first, *rest])


def _map_paths(value: str, mounts: dict[str, Path]) -> str:
    for mount, local in mounts.items():
        if value == mount or value.startswith(mount.rstrip("/") + "/"):
            return str(local) + value[len(mount.rstrip("/")):]
    return value


class ContainerProcess:
    """A container's command, run as a process group once per `run()`: its output
    appended to the pod's log and each line told, its last lines kept."""

    def __init__(self, name: str, container: str, command: Command, log: BinaryIO,
                 on_line: Callable[[str, str], None]):
        self.name = name
        self.container = container
        """The main container's name (what status.lastFailure and podFailurePolicy name)."""
        self.command = command
        self.log = log
        """Where the output goes (opened by the runner; closed by close())."""
        self.on_line = on_line
        self.start_error: str | None = None
        """Why the command could not be started (no such program, say): the run cannot go
        on."""
        self.tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        """The last lines of the current run's output: its termination message, as a
        kubelet's FallbackToLogsOnError keeps the end of a log."""
        self._proc: asyncio.subprocess.Process | None = None

    async def run(self, started: Callable[[], None]) -> int:
        """Run the command to its end (`started` once it is); its exit code."""
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *self.command.argv, env=self.command.env, cwd=self.command.cwd,
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT, start_new_session=True)
        except (OSError, ValueError) as err:
            # No such program, not executable, an env name the OS refuses: the container
            # never started. 127, as a shell says for a command it cannot run.
            self.start_error = f"cannot start {self.command.argv[0]!r}: {err}"
            self.log.write(f"trainop: {self.start_error}\n".encode())
            self.on_line(self.name, self.start_error)
            return START_FAILED
        self.tail.clear()
        started()
        assert self._proc.stdout is not None
        async for raw in self._proc.stdout:
            self.log.write(raw)
            self.log.flush()
            text = raw.decode(errors="replace")
            self.tail.append(text if text.endswith("\n") else text + "\n")
            self.on_line(self.name, text.rstrip("\n"))
        code = await self._proc.wait()
        return 128 - code if code < 0 else code  # killed by signal N: 128+N, as a shell says

    async def stop(self, grace: float) -> None:
        """SIGTERM its process group, SIGKILL after `grace` seconds."""
        proc = self._proc
        if proc is not None and proc.returncode is None:
            _signal_group(proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), grace)
            except TimeoutError:
                _signal_group(proc.pid, signal.SIGKILL)
                await proc.wait()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None


@dataclass
class LocalPod:
    """One pod's container restarted by its restart policy (the kubelet's part), and the
    PodState the engine reads of it."""

    name: str
    replica_type: str
    index: int
    process: ContainerProcess | None
    """None: a placeholder that stays Running (MPI workers; the launcher starts the ranks)."""
    restart_policy: str
    on_change: Callable[[], None]
    phase: str = "Pending"
    exit_code: int | None = None
    reason: str | None = None
    restarts: int = 0
    terminating: bool = False
    finished_at: str | None = None
    supervisor: LocalSupervisor | None = None
    """Its rank's supervisor, where the pod restarts in place (local/supervisor.py)."""
    _task: asyncio.Task[None] | None = None
    _stopped: asyncio.Event = field(default_factory=asyncio.Event)

    def state(self) -> PodState:
        # restarted in place: its last run, as a kubelet's lastState says
        last = (self.exit_code, self.reason) if self.restarts and self.exit_code is not None \
            and self.phase in ("Pending", "Running") else None
        # (a placeholder never fails: only a pod with a process ends)
        failed = self.phase == "Failed" and self.exit_code is not None \
            and self.process is not None
        container = self.process.container if self.process is not None else ""
        tail = "".join(self.process.tail) if self.process is not None else ""
        state = PodState(self.name, self.replica_type, self.index, phase=self.phase,
                        terminating=self.terminating, exit_code=self.exit_code,
                        reason=self.reason, restarts=self.restarts,
                        ready=self.phase == "Running", last_run=last,
                        exit_codes=((container, self.exit_code),)
                        if failed and self.exit_code is not None else (),
                        node=platform.node() if failed else None,
                        ended=Ended(container, self.finished_at, tail or None)
                        if failed else None)
        sup = self.supervisor
        if sup is None:
            return state
        # a supervisor's pod: as a heard one says it is (its rank's end told with the end
        # of its output and the signal's name, which a cluster's supervisor does not send)
        state = overlay(replace(state, in_place=InPlace(
            sup.told.attempt, sup.told.released, sup.told.finish,
            alive=self.phase not in ("Succeeded", "Failed"))), sup.rank(self.name), container)
        if state.ended is not None and state.exit_code is not None:
            state = replace(state, reason=_reason(state.exit_code),
                            ended=replace(state.ended, message=tail or None))
        return state

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        def running() -> None:
            self.phase = "Running"
            self.on_change()
        if self.process is None:
            if self.supervisor is not None:
                await self.supervisor.placeholder(running)  # until the pod is deleted
            running()
            await self._stopped.wait()
            return
        process = self.process
        if self.supervisor is not None:
            def say(line: str) -> None:
                process.on_line(self.name, line)
                self.on_change()
            with process.log:
                code = await self.supervisor.run(process, running, say)
            self._finish(code)
            return
        backoff = 1.0
        with self.process.log:
            while not self._stopped.is_set():
                code = await self.process.run(running)
                if self._stopped.is_set():
                    break
                if self.process.start_error:
                    # a program that is not there will not be there on a restart either
                    self._finish(code)
                    return
                retry = self.restart_policy == "Always" or (
                    self.restart_policy == "OnFailure" and code != 0)
                if not retry:
                    self._finish(code)
                    return
                # the kubelet's part: restart the container in place, with a back-off
                self.restarts += 1
                self.exit_code = code
                self.reason = _reason(code)
                self.process.on_line(self.name, f"exited with code {code}; restarting in "
                                                f"{backoff:.0f}s (restart {self.restarts})")
                self.on_change()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopped.wait(), backoff)
                backoff = min(backoff * 2, MAX_BACKOFF)

    def _finish(self, code: int) -> None:
        self.exit_code = code
        self.finished_at = clock.fmt(wallclock.now())
        self.phase = "Succeeded" if code == 0 else "Failed"
        failed_start = self.process is not None and self.process.start_error
        self.reason = None if code == 0 else "StartError" if failed_start else _reason(code)
        self.on_change()

    async def stop(self, grace: float = 5.0) -> None:
        """Delete the pod: its process stopped (ContainerProcess.stop)."""
        self.terminating = True
        self._stopped.set()
        if self.supervisor is not None and self._task is not None:
            self._task.cancel()  # (it stops the rank's process itself)
        if self.process is not None:
            await self.process.stop(grace)
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _reason(code: int) -> str:
    if code > 128:
        try:
            return signal.Signals(code - 128).name
        except ValueError:
            return f"signal {code - 128}"
    return "Error"
