"""Throughput, latency and CPU cost of the manager, against a bare asyncio client doing the
same pods and services with the same concurrency on the same API server, in one run.

    python -m bench.throughput [--jobs 1000] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import time
from collections.abc import Callable
from typing import Any

from bench.lib import (
    CONCURRENCY,
    Cluster,
    Kubelet,
    Manager,
    Row,
    create_all,
    create_job,
    desired_objects,
    job_doc,
    write_results,
)
from trainop.api.resources import PODS, SERVICES, job_resource
from trainop.cluster.reading.client import Client
from trainop.cluster.reading.informer import Informer
from trainop.cluster.reading.records import meta_of
from trainop.engine.labels import JOB_NAME


class Seen:
    """Counts objects of one resource in a namespace as the watch reports them."""

    def __init__(self, client: Client, resource: Any, ns: str,
                 accept: Callable[[dict[str, Any]], bool] = lambda o: True):
        self.times: dict[str, float] = {}
        self.informer: Informer[dict[str, Any]] = Informer(
            client, resource, lambda o: o if accept(o) else None,
            lambda o: meta_of(o).key, lambda o: None, ns,
            JOB_NAME if resource in (PODS, SERVICES) else None)
        self.informer.add_handler(self._on)
        self.task = asyncio.create_task(self.informer.run())

    def _on(self, kind: str, new: Any, old: Any) -> None:
        if new is not None:
            self.times.setdefault(meta_of(new).key, time.monotonic())

    async def until(self, count: int, timeout: float = 600) -> float:
        deadline = time.monotonic() + timeout
        while len(self.times) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"saw {len(self.times)} of {count}")
            await asyncio.sleep(0.02)
        return max(self.times.values())

    async def stop(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


def running(obj: dict[str, Any]) -> bool:
    return any(c.get("type") == "Running" and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])


async def bare_run(client: Client, ns: str, jobs: int, replicas: int) -> float:
    objects = []
    for i in range(jobs):
        objects += desired_objects(job_doc("PyTorchJob", {"Master": 1, "Worker": replicas - 1},
                                           f"j{i}", ns))
    start = time.monotonic()
    await create_all(client, objects)
    return time.monotonic() - start


async def trainop_run(client: Client, ns: str, jobs: int, replicas: int
                      ) -> tuple[float, float]:
    """Create `jobs` PyTorchJobs of `replicas` in `ns` (whichever operator runs them):
    seconds until every pod and service exists, and until every job is Running."""
    pods, services = Seen(client, PODS, ns), Seen(client, SERVICES, ns)
    running_jobs = Seen(client, job_resource("PyTorchJob"), ns, running)
    await asyncio.sleep(0.5)
    docs = [job_doc("PyTorchJob", {"Master": 1, "Worker": replicas - 1}, f"j{i}", ns)
            for i in range(jobs)]
    sem = asyncio.Semaphore(64)

    async def one(doc: dict[str, Any]) -> None:
        async with sem:
            await create_job(client, doc)

    start = time.monotonic()
    await asyncio.gather(*(one(d) for d in docs))
    created = max(await pods.until(jobs * replicas, 3600),
                  await services.until(jobs * replicas, 3600))
    all_running = await running_jobs.until(jobs, 3600)
    for s in (pods, services, running_jobs):
        await s.stop()
    return created - start, all_running - start


async def latency(client: Client, cluster: Cluster, sizes: dict[int, int]
                  ) -> dict[int, tuple[list[float], list[float]]]:
    out: dict[int, tuple[list[float], list[float]]] = {}
    for size, repeats in sizes.items():
        ours, bare = [], []
        for r in range(repeats):
            ns = cluster.namespace(f"lat-{size}-{r}")
            pods = Seen(client, PODS, ns)
            await asyncio.sleep(0.2)
            doc = job_doc("PyTorchJob", {"Worker": size}, "lat", ns)
            start = time.monotonic()
            await create_job(client, doc)
            ours.append(await pods.until(size) - start)
            await pods.stop()
            bns = cluster.namespace(f"latb-{size}-{r}")
            objects = desired_objects(job_doc("PyTorchJob", {"Worker": size}, "lat", bns))
            start = time.monotonic()
            await create_all(client, objects)
            bare.append(time.monotonic() - start)
        out[size] = (ours, bare)
    return out


async def quiet(manager: Manager, seconds: float = 3.0) -> None:
    """Wait until the manager's queues stay empty for `seconds` (the last run is over)."""
    calm = 0.0
    while calm < seconds:
        await asyncio.sleep(0.5)
        calm = calm + 0.5 if manager.metric("trainop_workqueue_depth") == 0 else 0.0


def p(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(q * (len(values) - 1)))]


async def main(jobs: int, replicas: int, sizes: dict[int, int]) -> None:
    with Cluster() as cluster:
        kubelet = Kubelet(cluster, run_seconds=3600)
        client = cluster.client()
        try:
            bare_seconds = await bare_run(client, cluster.namespace("bare"), jobs, replicas)
            manager = Manager(cluster).wait_ready()
            cpu0 = manager.cpu_seconds()
            created, all_running = await trainop_run(client, cluster.namespace("trainop"),
                                                     jobs, replicas)
            cpu = manager.cpu_seconds() - cpu0
            await quiet(manager)
            lat = await latency(client, cluster, sizes)
            rss = manager.rss_mib()
            manager.stop()
        finally:
            kubelet.stop()
            await client.close()
    total = jobs * replicas
    rows = [
        Row(f"replicas made (pod + service) per second, {jobs} jobs x {replicas}",
            total / created, total / bare_seconds, "/s", ">= 0.7"),
        Row(f"time until all {jobs} jobs Running", all_running, None, "s"),
        Row("manager CPU per 1,000 replicas (create to Running)", cpu / total * 1000, None,
            "CPU-s"),
    ]
    for size, (ours, bare) in lat.items():
        rows.append(Row(f"job of {size} -> all pods created, p50", p(ours, .5), p(bare, .5),
                        "s", "<= 1.3" if size == 100 else ""))
        rows.append(Row(f"job of {size} -> all pods created, p99", p(ours, .99), p(bare, .99),
                        "s"))
    mean_ratio = statistics.mean(p(o, .5) / p(b, .5) for o, b in lat.values())
    write_results("throughput", "Throughput and latency (python -m bench.throughput)", rows,
                  notes=(f"Baseline: a bare asyncio client creating the same pods and services "
                         f"with the same concurrency ({CONCURRENCY} requests in flight). The "
                         f"manager ran with --kube-api-qps 0 --controller-threads 64, every "
                         f"kind enabled; "
                         f"the simulated kubelet moved pods to Running. Latency repeats: "
                         f"{sizes}. Manager RSS at the end: {rss:.0f} MiB; mean p50 latency "
                         f"ratio {mean_ratio:.2f}."))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--quick", action="store_true", help="100 jobs, fewer repeats")
    a = parser.parse_args()
    sizes = {1: 10, 10: 10, 100: 5, 1000: 3}
    if a.quick:
        a.jobs, sizes = 100, {1: 3, 10: 3, 100: 2}
    asyncio.run(main(a.jobs, a.replicas, sizes))
