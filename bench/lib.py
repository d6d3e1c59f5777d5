"""What every benchmark shares: the test API server, a manager process, the simulated
kubelet, a bare client, and writing results (markdown table + PNG chart)."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import platform
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import psutil

from testbed.apiserver import TestAPIServer, release
from testbed.manager import ManagerProcess, terminate
from trainop.api import load_job
from trainop.api.resources import PODS, SERVICES, job_resource
from trainop.cluster.reading.client import MAX_IN_FLIGHT, Client
from trainop.cluster.reading.config import from_kubeconfig
from trainop.engine import ClusterAddressing, Observed, reconcile
from trainop.frameworks import framework_for

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
os.environ.setdefault("MALLOC_ARENA_MAX", "2")  # the manager runs as its image runs it
CONCURRENCY = MAX_IN_FLIGHT
"""Requests in flight at most: the manager's client default, and so the bare client's."""


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in
                Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name")),
               platform.processor())
    mem = psutil.virtual_memory().total / 2**30
    return (f"{cpu}, {os.cpu_count()} cores, {mem:.0f} GiB, Python "
            f"{platform.python_version()}, kube-apiserver {release('kube')} + etcd "
            f"{release('etcd')} on loopback")


class Cluster:
    """The test API server with the CRDs installed, for one benchmark run."""

    def __init__(self, *extra_args: str):
        self.api = TestAPIServer(extra_args=list(extra_args))

    def __enter__(self) -> Cluster:
        # `kill` or `timeout` stop a benchmark as Ctrl-C does: every process it started ends.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        self.api.start()
        self.api.kubectl("apply", "--server-side", "-k", str(REPO / "config" / "crd"))
        self.api.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        return self

    def __exit__(self, *exc: object) -> None:
        self.api.stop()

    def client(self) -> Client:
        return Client(from_kubeconfig(str(self.api.kubeconfig)),
                      max_connections=CONCURRENCY)

    def namespace(self, name: str) -> str:
        self.api.kubectl("create", "namespace", name)
        return name


PROFILE = os.environ.get("TRAINOP_BENCH_PROFILE")
"""Set to a file name: the manager runs under py-spy, which writes a profile there."""


class Usage:
    """Resident memory and CPU time of a child process (`self.ps`)."""

    ps: psutil.Process

    def rss_mib(self) -> float:
        return float(self.ps.memory_info().rss) / 2**20

    def cpu_seconds(self) -> float:
        t = self.ps.cpu_times()
        return float(t.user + t.system)

    def peak_rss_mib(self) -> float:
        """The most resident memory the process has had (the kernel's VmHWM)."""
        status = Path(f"/proc/{self.ps.pid}/status").read_text()
        line = next(ln for ln in status.splitlines() if ln.startswith("VmHWM:"))
        return int(line.split()[1]) / 1024


class Process(Usage):
    """A child process whose CPU time and resident memory we read."""

    def __init__(self, args: list[str], log: Path):
        self.log_path = log
        self.proc = subprocess.Popen(args, stdout=open(log, "wb"),  # noqa: SIM115
                                     stderr=subprocess.STDOUT)
        self.ps = psutil.Process(self.proc.pid)

    def stop(self) -> None:
        terminate(self.proc)


class Manager(ManagerProcess, Usage):
    """The manager as the benchmarks run it: every kind, no API rate limit (unless not
    `tuned`: its defaults), quiet logs."""

    def __init__(self, cluster: Cluster, *args: str, name: str = "manager", tuned: bool = True):
        spy = ["py-spy", "record", "-o", PROFILE, "-f", "raw", "--"] if PROFILE else None
        tuning = ("--kube-api-qps", "0", "--controller-threads", "64") if tuned else ()
        super().__init__(cluster.api.kubeconfig, "--log-level", "warning", *tuning, *args,
                         log_path=RESULTS.parent / f".{name}.log", wrapper=spy)
        self.ps = psutil.Process(self.proc.pid)

    def wait_ready(self, timeout: float = 120) -> Self:
        return super().wait_ready(timeout)

    def stop(self, timeout: float = 20) -> None:
        if PROFILE and self.proc.poll() is None:
            # py-spy writes its profile on SIGINT; the manager stops with it
            for child in self.ps.children(recursive=True):
                child.send_signal(signal.SIGTERM)
            self.proc.send_signal(signal.SIGINT)
            self.proc.wait(60)
            return
        super().stop(timeout)


class Kubelet(Process):
    """The simulated kubelet (bench/kubelet.py) as its own process."""

    def __init__(self, cluster: Cluster, run_seconds: float, fail_every: int = 0):
        super().__init__([sys.executable, "-m", "testbed.kubelet", "--kubeconfig",
                          str(cluster.api.kubeconfig), "--run-seconds", str(run_seconds),
                          "--fail-every", str(fail_every)], RESULTS.parent / ".kubelet.log")


def job_doc(kind: str, replicas: dict[str, int], name: str, namespace: str,
            **run_policy: Any) -> dict[str, Any]:
    from trainop.api import KINDS

    info = KINDS[kind]
    template = {"spec": {"containers": [{"name": info.default_container,
                                         "image": "example.com/train:1",
                                         "command": ["python", "train.py"]}]}}
    return {"apiVersion": "kubeflow.org/v1", "kind": kind,
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"runPolicy": run_policy, info.replica_specs_field: {
                rt: {"replicas": n, "template": template} for rt, n in replicas.items()}}}


def desired_objects(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The pods and services trainop would create for `doc`: what the bare client makes."""
    job = load_job({**doc, "metadata": {**doc["metadata"], "uid": "bench"}})
    plan = reconcile(job, Observed(), dt.datetime.now(dt.UTC), framework_for(job.kind),
                     ClusterAddressing())
    out = []
    for obj in plan.create:
        obj["metadata"].pop("ownerReferences", None)  # no such job: nothing to own them
        out.append(obj)
    return out


async def create_all(client: Client, objects: Iterable[dict[str, Any]],
                     concurrency: int = CONCURRENCY) -> None:
    sem = asyncio.Semaphore(concurrency)

    async def one(obj: dict[str, Any]) -> None:
        ns = obj["metadata"]["namespace"]
        res = PODS if obj["kind"] == "Pod" else SERVICES
        async with sem:
            await client.create(res.path(ns), obj)

    await asyncio.gather(*(one(o) for o in objects))


async def create_job(client: Client, doc: dict[str, Any]) -> None:
    await client.create(job_resource(doc["kind"]).path(doc["metadata"]["namespace"]), doc)


@dataclass
class Row:
    figure: str
    trainop: float
    baseline: float | None
    unit: str
    target: str = ""

    @property
    def ratio(self) -> str:
        if self.baseline in (None, 0):
            return ""
        return f"{self.trainop / self.baseline:.2f}"


def write_results(name: str, title: str, rows: list[Row], notes: str = "",
                  chart: bool = True) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    lines = [f"# {title}", "", f"Measured {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC on "
             f"{machine()}.", "", "| figure | trainop | baseline | ratio | target |",
             "|---|---|---|---|---|"]
    for r in rows:
        base = "" if r.baseline is None else f"{_num(r.baseline)} {r.unit}"
        lines.append(f"| {r.figure} | {_num(r.trainop)} {r.unit} | {base} | {r.ratio} | "
                     f"{r.target} |")
    if notes:
        lines += ["", notes]
    path = RESULTS / f"{name}.md"
    path.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    if chart:
        _chart(name, title, [r for r in rows if r.baseline])
    return path


def _num(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def _chart(name: str, title: str, rows: list[Row]) -> None:
    if not rows:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 0.6 * len(rows) + 1.5))
    ratios = [r.trainop / r.baseline for r in rows if r.baseline]
    ax.barh([r.figure for r in rows], ratios, color="#4c72b0")
    ax.axvline(1.0, color="grey", linestyle="--", linewidth=1)
    ax.set_xlabel("trainop / baseline (same run)")
    ax.set_title(title)
    ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(RESULTS / f"{name}.png", dpi=100)
    plt.close(fig)


def wait(what: str, check: Any, timeout: float = 300) -> Any:
    """What `check` returns once it is truthy (asked every 0.1 s); TimeoutError naming
    `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := check():
            return found
        time.sleep(0.1)
    raise TimeoutError(f"{what} within {timeout:.0f}s")
