"""`trainop manager` as a child process of a test or a benchmark: started against a
kubeconfig, its metrics and probes on loopback ports it binds itself (port 0: no other
process can take them between a pick and the bind) and says it bound, waited for until
ready, read through its metrics."""

from __future__ import annotations

import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Self

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from trainop.local.ports import free_port

WRITE_VERBS = ("post", "put", "patch", "delete")
SERVING = re.compile(r"trainop\.listener: (\w+) serving on [^\s:]+:(\d+)$", re.M)
"""The line each of the manager's servers logs once it has bound its port."""


class ManagerProcess:
    """One manager. `args` are its flags; --kubeconfig and --webhook-port 0 (no webhook)
    are added unless given. `wrapper` runs it under another program (a profiler)."""

    def __init__(self, kubeconfig: Path, *args: str, log_path: Path,
                 wrapper: list[str] | None = None):
        self.log_path = log_path
        self._ports: dict[str, int] = {}
        if _quiet(args):
            # it will not say what it bound (a benchmark's manager logs warnings only):
            # ports handed out, and reserved, here
            self._ports = {"metrics": free_port(), "probes": free_port()}
        defaults = [*(() if "--kubeconfig" in args else ("--kubeconfig", str(kubeconfig))),
                    *(() if "--webhook-port" in args else ("--webhook-port", "0"))]
        self.proc = subprocess.Popen(
            [*(wrapper or []), sys.executable, "-m", "trainop.cli", "manager", *defaults,
             "--metrics-bind-address", f"127.0.0.1:{self._ports.get('metrics', 0)}",
             "--health-probe-bind-address", f"127.0.0.1:{self._ports.get('probes', 0)}",
             *args],
            stdout=open(log_path, "wb"), stderr=subprocess.STDOUT)  # noqa: SIM115

    def bound(self, server: str, timeout: float = 30) -> int:
        """The port the manager's `server` (metrics, probes, webhook) bound, once it has
        said so; raises if the manager exits first or never does."""
        if server not in self._ports:
            wait_logged(self.proc, lambda text: any(
                name == server for name, _ in SERVING.findall(text)), timeout, "manager",
                lambda: self.log_path.read_text(errors="replace"))
            self._ports.update((name, int(port)) for name, port in SERVING.findall(
                self.log_path.read_text(errors="replace")))
        return self._ports[server]

    @property
    def metrics_port(self) -> int:
        return self.bound("metrics")

    @property
    def health_port(self) -> int:
        return self.bound("probes")

    def wait_ready(self, timeout: float = 30) -> Self:
        """Wait for /readyz; raises if the manager exits or is not ready in time."""
        wait_ready(self.proc, self.bound("probes", timeout), timeout, "manager", self.log)
        return self

    def log(self) -> str:
        """The end of what the manager printed."""
        return self.log_path.read_text()[-4000:]

    def api_warnings(self) -> list[str]:
        """The warnings the API server sent the manager (deprecated APIs or fields), as its
        client logged them."""
        return [line for line in self.log_path.read_text(errors="replace").splitlines()
                if "API server warning" in line]

    def samples(self) -> list[Sample]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics",
                                    timeout=10) as r:
            text = r.read().decode()
        return [s for family in text_string_to_metric_families(text) for s in family.samples]

    def metric(self, name: str, /, **labels: str) -> float:
        """The sum of a metric's samples whose labels include `labels`."""
        return sum(s.value for s in self.samples()
                   if s.name == name and labels.items() <= s.labels.items())

    def writes(self) -> float:
        """API writes so far (events and lease renewals left out)."""
        return sum(s.value for s in self.samples() if s.name == "trainop_api_requests_total"
                   and s.labels["verb"] in WRITE_VERBS
                   and s.labels["resource"] not in ("events", "leases"))

    def stop(self, timeout: float = 20) -> None:
        terminate(self.proc, timeout)


def _quiet(args: tuple[str, ...]) -> bool:
    """Whether `args` set a log level above info (the lines saying what it bound are
    info)."""
    level = "info"
    for i, arg in enumerate(args):
        if arg == "--log-level" and i + 1 < len(args):
            level = args[i + 1]
        elif arg.startswith("--log-level="):
            level = arg.partition("=")[2]
    return level.lower() not in ("debug", "info")


def wait_ready(proc: subprocess.Popen[bytes], health_port: int, timeout: float, name: str,
               log: Callable[[], str]) -> None:
    """Wait until `proc` answers 200 on /readyz at `health_port`; raises with the end of
    its `log` if it exits or is not ready in time."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited {proc.returncode}: {log()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{health_port}/readyz",
                                        timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{name} not ready after {timeout}s: {log()}")


def wait_logged(proc: subprocess.Popen[bytes], ready: Callable[[str], bool], timeout: float,
                name: str, log: Callable[[], str]) -> None:
    """Wait until the end of `proc`'s `log` shows it `ready` (a process with no readiness
    endpoint); raises with that end if it exits or is not ready in time."""
    deadline = time.monotonic() + timeout
    while not ready(log()):
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited {proc.returncode}: {log()}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name} not ready after {timeout}s: {log()}")
        time.sleep(0.2)


def terminate(proc: subprocess.Popen[bytes], timeout: float = 20) -> None:
    """SIGTERM, and SIGKILL after `timeout` seconds if the process is still there."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
