"""trainop against upstream's operator (training-operator v1.9.4, built from its module by
hack/test-assets.sh), one after the other on the same API server in one run: each at its
defaults and each tuned for bulk creation, the same jobs, the same simulated kubelet.

    python -m bench.upstream [--jobs 1000] [--replicas 4] [--quick]

Per configuration: replicas made (pod + service) per second and the time until every job
is Running; the operator's CPU per 1,000 replicas; its resident memory with those pods
cached; its API writes per job (events included: upstream's client counts them too); its
API writes in a minute at rest, every job Running and nothing changing.
"""

from __future__ import annotations

import argparse
import asyncio
import urllib.request
from dataclasses import dataclass

import psutil
from prometheus_client.parser import text_string_to_metric_families

from bench.lib import RESULTS, Cluster, Kubelet, Manager, Row, write_results
from bench.throughput import trainop_run
from testbed import upstream
from testbed.manager import WRITE_VERBS

UPSTREAM_TUNED = ("--kube-api-qps", "100000", "--kube-api-burst", "100000",
                  "--controller-threads", "64")
TRAINOP_TUNED = ("--kube-api-qps", "0", "--controller-threads", "64", "--aggregate-events")
"""What bench.lib.Manager gives the manager when tuned, and the shipped Deployment's
--aggregate-events."""


@dataclass
class Figures:
    per_second: float
    all_running: float
    cpu_per_1000: float
    rss_mib: float
    writes_per_job: float
    writes_at_rest: float


class Operator:
    """Either operator as a process: its CPU, memory and API writes."""

    def __init__(self, name: str, cluster: Cluster, args: tuple[str, ...]):
        self.name = name
        if name == "upstream":
            # trainop's CRDs are upstream's, schema path by schema path: upstream runs on
            # them as it does on its own
            self.up: upstream.UpstreamOperator | None = upstream.UpstreamOperator(
                cluster.api, "--zap-log-level", "error", *args,
                log_path=RESULTS.parent / ".upstream.log", install_crds=False,
                webhook_namespaces={"matchLabels": {"bench.trainop.io/webhook": "upstream"}},
            ).wait_ready()
            self.metrics_port = self.up.metrics_port
            self.ps = psutil.Process(self.up.proc.pid)
            self.trainop: Manager | None = None
        else:
            self.up = None
            extra = ("--aggregate-events",) if args else ()
            self.trainop = Manager(cluster, *extra, tuned=bool(args)).wait_ready()
            self.metrics_port = self.trainop.metrics_port
            self.ps = self.trainop.ps

    def writes(self) -> float:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics",
                                    timeout=10) as r:
            text = r.read().decode()
        samples = [s for f in text_string_to_metric_families(text) for s in f.samples]
        if self.up is not None:  # client-go's request counter, by method
            return sum(s.value for s in samples if s.name == "rest_client_requests_total"
                       and s.labels.get("method", "").lower() in WRITE_VERBS)
        return sum(s.value for s in samples if s.name == "trainop_api_requests_total"
                   and s.labels["verb"] in WRITE_VERBS and s.labels["resource"] != "leases")

    def cpu_seconds(self) -> float:
        t = self.ps.cpu_times()
        return float(t.user + t.system)

    def rss_mib(self) -> float:
        return float(self.ps.memory_info().rss) / 2**20

    def stop(self) -> None:
        if self.up is not None:
            self.up.stop()
        elif self.trainop is not None:
            self.trainop.stop()


async def run_one(cluster: Cluster, operator: Operator, ns: str, jobs: int,
                  replicas: int, rest: float) -> Figures:
    client = cluster.client()
    try:
        cpu0, writes0 = operator.cpu_seconds(), operator.writes()
        created, all_running = await trainop_run(client, ns, jobs, replicas)
        await asyncio.sleep(5)  # the last status writes
        cpu, writes = operator.cpu_seconds() - cpu0, operator.writes() - writes0
        rest0 = operator.writes()
        await asyncio.sleep(rest)
        total = jobs * replicas
        return Figures(total / created, all_running, cpu / total * 1000, operator.rss_mib(),
                       writes / jobs, operator.writes() - rest0)
    finally:
        await client.close()


def clean(cluster: Cluster, ns: str) -> None:
    """Leave nothing of a run for the next operator's cache (no garbage collector runs)."""
    for resource in ("pytorchjobs.kubeflow.org", "pods", "services", "events"):
        cluster.api.kubectl("delete", resource, "--all", "-n", ns, "--wait=false",
                            "--grace-period=0", "--force")


async def main(jobs: int, replicas: int, rest: float) -> None:
    configs = [("upstream", "defaults", ()), ("trainop", "defaults", ()),
               ("upstream", "tuned", UPSTREAM_TUNED), ("trainop", "tuned", TRAINOP_TUNED)]
    results: dict[tuple[str, str], Figures] = {}
    with Cluster() as cluster:
        kubelet = Kubelet(cluster, run_seconds=3600)
        try:
            for name, setting, args in configs:
                ns = cluster.namespace(f"{name}-{setting}")
                operator = Operator(name, cluster, args)
                try:
                    results[name, setting] = await run_one(cluster, operator, ns, jobs,
                                                           replicas, rest)
                finally:
                    operator.stop()
                clean(cluster, ns)
                print(f"{name} at {setting}: {results[name, setting]}", flush=True)
        finally:
            kubelet.stop()
    rows = []
    for setting in ("defaults", "tuned"):
        ours, theirs = results["trainop", setting], results["upstream", setting]
        at = f"at {setting}"
        rows += [
            Row(f"replicas made per second, {jobs} jobs x {replicas}, {at}", ours.per_second,
                theirs.per_second, "/s", ">= 1"),
            Row(f"time until all {jobs} jobs Running, {at}", ours.all_running,
                theirs.all_running, "s", "<= 1"),
            Row(f"operator CPU per 1,000 replicas, {at}", ours.cpu_per_1000,
                theirs.cpu_per_1000, "CPU-s", "<= 1"),
            Row(f"resident memory, {jobs * replicas} pods cached, {at}", ours.rss_mib,
                theirs.rss_mib, "MiB", "<= 1"),
            Row(f"API writes per job, created -> Running (events included), {at}",
                ours.writes_per_job, theirs.writes_per_job, "", "<= 1"),
            Row(f"API writes in {rest:.0f} s at rest, {at}", ours.writes_at_rest,
                theirs.writes_at_rest, "", ""),
        ]
    write_results("upstream", "trainop against upstream v1.9.4 (python -m bench.upstream)", rows,
                  notes=(f"Baseline: upstream's training-operator {upstream.version()}, built "
                         f"from its module, on the same API server right before trainop at "
                         f"the same setting. Defaults: both as shipped (QPS 20, burst 30; "
                         f"upstream one controller thread). Tuned: upstream "
                         f"{' '.join(UPSTREAM_TUNED)}; trainop {' '.join(TRAINOP_TUNED)}. "
                         f"Neither webhook was called (upstream's is registered for no "
                         f"namespace; it needs it to get ready), no leader election; the "
                         f"simulated kubelet moved every pod to Running."))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--rest-seconds", type=float, default=60.0,
                        help="how long to count writes at rest")
    parser.add_argument("--quick", action="store_true", help="100 jobs")
    a = parser.parse_args()
    asyncio.run(main(100 if a.quick else a.jobs, a.replicas, a.rest_seconds))
