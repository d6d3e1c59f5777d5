"""One namespace's storm against another namespace's jobs: the victim's time to all its
pods alone, and while another namespace's jobs are being made, as a ratio; trainop and
upstream's operator (v1.9.4) one after the other on the same API server, each at its
defaults (QPS 20, burst 30), the same simulated kubelet.

    python -m bench.fairness [--storm 100] [--victims 20] [--replicas 4]

The storm: `--storm` PyTorchJobs of `--replicas` replicas in one namespace, all created
at once; right after them, the victim's `--victims` PyTorchJobs of 2 replicas in another.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from bench.lib import Cluster, Kubelet, Row, create_job, job_doc, write_results
from bench.throughput import Seen
from bench.upstream import Operator, clean
from testbed import upstream
from trainop.api.resources import PODS

VICTIM_REPLICAS = 2


async def create_all(cluster: Cluster, docs: list[dict[str, Any]]) -> None:
    client = cluster.client()
    sem = asyncio.Semaphore(64)

    async def one(doc: dict[str, Any]) -> None:
        async with sem:
            await create_job(client, doc)
    try:
        await asyncio.gather(*(one(d) for d in docs))
    finally:
        await client.close()


async def victims_pods(cluster: Cluster, ns: str, victims: int,
                       storm: list[dict[str, Any]]) -> float:
    """Seconds from the victim's first create until all its pods exist (the storm's jobs,
    if any, created first, all at once)."""
    client = cluster.client()
    pods = Seen(client, PODS, ns)
    try:
        await asyncio.sleep(0.5)
        if storm:
            await create_all(cluster, storm)
        start = time.monotonic()
        await create_all(cluster, [
            job_doc("PyTorchJob", {"Master": 1, "Worker": VICTIM_REPLICAS - 1}, f"v{i}", ns)
            for i in range(victims)])
        return await pods.until(victims * VICTIM_REPLICAS, 1800) - start
    finally:
        await pods.stop()
        await client.close()


async def main(storm_jobs: int, victims: int, replicas: int) -> None:
    results: dict[str, tuple[float, float]] = {}
    with Cluster() as cluster:
        kubelet = Kubelet(cluster, run_seconds=3600)
        try:
            for name in ("upstream", "trainop"):
                operator = Operator(name, cluster, ())
                namespaces = [cluster.namespace(f"{name}-{what}")
                              for what in ("alone", "storm", "victim")]
                try:
                    alone = await victims_pods(cluster, namespaces[0], victims, [])
                    storm = [job_doc("PyTorchJob", {"Master": 1, "Worker": replicas - 1},
                                     f"s{i}", namespaces[1]) for i in range(storm_jobs)]
                    beside = await victims_pods(cluster, namespaces[2], victims, storm)
                finally:
                    operator.stop()
                for ns in namespaces:
                    clean(cluster, ns)
                results[name] = (alone, beside)
                print(f"{name}: alone {alone:.1f} s, beside the storm {beside:.1f} s",
                      flush=True)
        finally:
            kubelet.stop()
    ours, theirs = results["trainop"], results["upstream"]
    what = f"the victim's {victims} jobs, time to all their pods"
    write_results("fairness", "One namespace's storm against another's jobs "
                  "(python -m bench.fairness)", [
                      Row(f"{what}, alone", ours[0], theirs[0], "s"),
                      Row(f"{what}, beside a storm of {storm_jobs} jobs x {replicas}",
                          ours[1], theirs[1], "s"),
                      Row("storm / alone, trainop", ours[1] / ours[0], None, "x", "<= 1.5"),
                      Row("storm / alone, upstream", theirs[1] / theirs[0], None, "x"),
                  ], notes=(f"Baseline: upstream's training-operator {upstream.version()} at its "
                            "defaults, on the same API server right before trainop at its "
                            "defaults (QPS 20, burst 30; one worker per kind). The storm's "
                            "jobs and the victim's are PyTorchJobs, so they share one work "
                            "queue: trainop takes them in turn by namespace, and gives out "
                            "its API budget in turn by namespace."), chart=False)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--storm", type=int, default=100)
    parser.add_argument("--victims", type=int, default=20)
    parser.add_argument("--replicas", type=int, default=4)
    a = parser.parse_args()
    asyncio.run(main(a.storm, a.victims, a.replicas))
