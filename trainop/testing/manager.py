"""`trainop manager` as a child process of a test or a benchmark: started against a
kubeconfig on free loopback ports, waited for until ready, read through its metrics."""

from __future__ import annotations

import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Self

from trainop.testing.apiserver import free_port

WRITE_VERBS = ("post", "put", "patch", "delete")


class ManagerProcess:
    """One manager. `args` are its flags; --kubeconfig and --webhook-port 0 (no webhook)
    are added unless given. `wrapper` runs it under another program (a profiler)."""

    def __init__(self, kubeconfig: Path, *args: str, log_path: Path,
                 wrapper: list[str] | None = None):
        self.metrics_port, self.health_port = free_port(), free_port()
        self.log_path = log_path
        defaults = [*(() if "--kubeconfig" in args else ("--kubeconfig", str(kubeconfig))),
                    *(() if "--webhook-port" in args else ("--webhook-port", "0"))]
        self.proc = subprocess.Popen(
            [*(wrapper or []), sys.executable, "-m", "trainop.cli", "manager", *defaults,
             "--metrics-bind-address", f"127.0.0.1:{self.metrics_port}",
             "--health-probe-bind-address", f"127.0.0.1:{self.health_port}", *args],
            stdout=open(log_path, "wb"), stderr=subprocess.STDOUT)  # noqa: SIM115

    def wait_ready(self, timeout: float = 30) -> Self:
        """Wait for /readyz; raises if the manager exits or is not ready in time."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"manager exited {self.proc.returncode}: {self.log()}")
            try:
                with urllib.request.urlopen(
                        f"http://127.0.0.1:{self.health_port}/readyz", timeout=1) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"manager not ready after {timeout}s: {self.log()}")

    def log(self) -> str:
        """The end of what the manager printed."""
        return self.log_path.read_text()[-4000:]

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics",
                                    timeout=10) as r:
            return str(r.read().decode())

    def metric(self, name: str, **labels: str) -> float:
        """The sum of a metric's samples whose labels include `labels`."""
        total = 0.0
        for line in self.metrics().splitlines():
            if not line.startswith(name + "{") and not line.startswith(name + " "):
                continue
            if all(f'{k}="{v}"' in line for k, v in labels.items()):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def writes(self) -> float:
        """API writes so far (events and lease renewals left out)."""
        total = 0.0
        for line in self.metrics().splitlines():
            m = re.match(r'trainop_api_requests_total\{(.*)\} ([0-9.e+]+)', line)
            if not m:
                continue
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
            if labels["verb"] in WRITE_VERBS and labels["resource"] not in ("events", "leases"):
                total += float(m.group(2))
        return total

    def stop(self, timeout: float = 20) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
