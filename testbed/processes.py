"""The daemons a test harness starts: each in its own session with its log in a folder,
checked while waited for, and stopped by pid (SIGTERM, then SIGKILL) in reverse order."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Daemons:
    logdir: Path
    procs: list[tuple[str, subprocess.Popen[bytes]]] = field(default_factory=list)

    def spawn(self, name: str, args: list[str], env: dict[str, str] | None = None
              ) -> subprocess.Popen[bytes]:
        log = open(self.logdir / f"{name}.log", "ab")  # noqa: SIM115 - kept for the process
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, env=env)
        self.procs.append((name, proc))
        return proc

    def log_tail(self, name: str, chars: int = 2000) -> str:
        path = self.logdir / f"{name}.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def exited(self) -> str | None:
        """A message naming the first daemon that has exited, with the end of its log."""
        for name, proc in self.procs:
            if proc.poll() is not None:
                return f"{name} exited with {proc.returncode}:\n{self.log_tail(name)}"
        return None

    def kill(self, name: str) -> None:
        """SIGKILL one daemon (its whole session), as a crash would."""
        for entry in list(self.procs):
            if entry[0] == name:
                _signal(entry[1], signal.SIGKILL)
                entry[1].wait(30)
                self.procs.remove(entry)

    def stop(self, timeout: float = 15) -> None:
        for _, proc in reversed(self.procs):
            _signal(proc, signal.SIGTERM)
        for _, proc in reversed(self.procs):
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                _signal(proc, signal.SIGKILL)
                proc.wait()
        self.procs.clear()


def _signal(proc: subprocess.Popen[bytes], sig: int) -> None:
    """Signal the daemon's session, unless it has ended (its leader may be gone already)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
