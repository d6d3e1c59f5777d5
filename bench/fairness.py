"""One namespace's storm against another namespace's jobs: the victim's time to all its
pods alone, and beside another namespace's storm of jobs, as ratios; trainop and upstream's
operator (v1.9.4) one after the other on the same API server, each at its defaults (QPS 20,
burst 30, one worker per kind), the same simulated kubelet.

    python -m bench.fairness [--storm 100] [--victims 20] [--replicas 4] [--under-way 10]

The storm: `--storm` PyTorchJobs of `--replicas` replicas in one namespace, all created
at once; the victim: `--victims` PyTorchJobs of 2 replicas in another, created `--under-way`
seconds after the storm (a storm under way), and again right after it (at the same moment).
Each scenario has an operator started afresh and its namespaces emptied after it.
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
                       storm: list[dict[str, Any]], under_way: float) -> float:
    """Seconds from the victim's first create until all its pods exist (the storm's jobs,
    if any, created first, all at once, `under_way` seconds before)."""
    client = cluster.client()
    pods = Seen(client, PODS, ns)
    try:
        await asyncio.sleep(0.5)
        if storm:
            await create_all(cluster, storm)
            await asyncio.sleep(under_way)
        start = time.monotonic()
        await create_all(cluster, [
            job_doc("PyTorchJob", {"Master": 1, "Worker": VICTIM_REPLICAS - 1}, f"v{i}", ns)
            for i in range(victims)])
        return await pods.until(victims * VICTIM_REPLICAS, 1800) - start
    finally:
        await pods.stop()
        await client.close()


async def scenario(cluster: Cluster, name: str, what: str, victims: int, storm_jobs: int,
                   replicas: int, under_way: float | None) -> float:
    """The victim's time to all its pods under a fresh operator `name`: alone (`under_way`
    None), or beside a storm created `under_way` seconds before."""
    operator = Operator(name, cluster, ())
    namespaces = [cluster.namespace(f"{name}-{what}-{role}") for role in ("victim", "storm")]
    try:
        storm = [] if under_way is None else [
            job_doc("PyTorchJob", {"Master": 1, "Worker": replicas - 1}, f"s{i}", namespaces[1])
            for i in range(storm_jobs)]
        return await victims_pods(cluster, namespaces[0], victims, storm, under_way or 0.0)
    finally:
        operator.stop()
        for ns in namespaces:
            clean(cluster, ns)


async def main(storm_jobs: int, victims: int, replicas: int, under_way: float) -> None:
    scenarios = {"alone": None, "under-way": under_way, "at-once": 0.0}
    results: dict[str, dict[str, float]] = {}
    with Cluster() as cluster:
        kubelet = Kubelet(cluster, run_seconds=3600)
        try:
            for name in ("upstream", "trainop"):
                results[name] = {}
                for what, head in scenarios.items():
                    results[name][what] = await scenario(cluster, name, what, victims,
                                                         storm_jobs, replicas, head)
                    print(f"{name}: {what} {results[name][what]:.1f} s", flush=True)
        finally:
            kubelet.stop()
    ours, theirs = results["trainop"], results["upstream"]
    what = f"the victim's {victims} jobs, time to all their pods"
    storm = f"a storm of {storm_jobs} jobs x {replicas}"
    write_results("fairness", "One namespace's storm against another's jobs "
                  "(python -m bench.fairness)", [
                      Row(f"{what}, alone", ours["alone"], theirs["alone"], "s"),
                      Row(f"{what}, {storm} under way for {under_way:g} s",
                          ours["under-way"], theirs["under-way"], "s"),
                      Row(f"{what}, {storm} made at the same moment",
                          ours["at-once"], theirs["at-once"], "s"),
                      Row("storm under way / alone, trainop",
                          ours["under-way"] / ours["alone"], None, "x", "<= 1.5"),
                      Row("storm under way / alone, upstream",
                          theirs["under-way"] / theirs["alone"], None, "x"),
                      Row("storm at the same moment / alone, trainop",
                          ours["at-once"] / ours["alone"], None, "x"),
                      Row("storm at the same moment / alone, upstream",
                          theirs["at-once"] / theirs["alone"], None, "x"),
                  ], notes=(f"Baseline: upstream's training-operator {upstream.version()} at its "
                            "defaults, on the same API server right before trainop at its "
                            "defaults (QPS 20, burst 30; one worker per kind), each started "
                            "afresh for each scenario. The storm's jobs and the victim's are "
                            "PyTorchJobs, so they share one work queue and one API budget, "
                            "which trainop shares by namespace (README, Reliability: fair "
                            "among namespaces)."), chart=False)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--storm", type=int, default=100)
    parser.add_argument("--victims", type=int, default=20)
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--under-way", type=float, default=10.0)
    a = parser.parse_args()
    asyncio.run(main(a.storm, a.victims, a.replicas, a.under_way))
