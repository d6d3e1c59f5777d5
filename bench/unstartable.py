"""Memory of a manager per job that cannot start: nine 1.3 MiB jobs of every kind whose
pods a ResourceQuota refuses (each is retried with back-off, for ever), created in two
halves; the second half's growth per job is what a job costs once the parsed-job budget
(32 MiB of JSON, every kind's together) is full, beside the job's own JSON.

    python -m bench.unstartable
"""

from __future__ import annotations

import asyncio
import time

import orjson

from bench.lib import Cluster, Manager, Row, write_results
from bench.memory import BIG_JOBS, LAYOUTS, big_job
from trainop.api.resources import job_resource
from trainop.cluster.reading.client import Client

SHIPPED_FLAGS = ("--wait-for-dns", "--aggregate-events", "--ignore-disruptions",
                 "--fallback-to-logs-on-error")
"""The behaviour flags of the shipped Deployment (config/manager/deployment.yaml)."""


def settled(manager: Manager, seconds: float = 30) -> float:
    """Resident memory once the retries of what was just made have had `seconds`."""
    time.sleep(seconds)
    return manager.rss_mib()


async def create(client: Client, ns: str, names: list[tuple[str, str]]) -> int:
    """Make the jobs (kind, name), not suspended; their JSON bytes."""
    size = 0
    for kind, name in names:
        doc = big_job(kind, name, ns)
        doc["spec"]["runPolicy"]["suspend"] = False
        size += len(orjson.dumps(doc))
        await client.create(job_resource(kind).path(ns), doc)
    return size


async def main() -> None:
    with Cluster() as cluster:
        client = cluster.client()
        ns = cluster.namespace("unstartable")
        # no pod fits: every job is refused its pods and retried
        cluster.api.kubectl("create", "quota", "none", "--hard=pods=0", "-n", ns)
        cluster.api.kubectl("patch", "quota", "none", "-n", ns, "--subresource=status",
                            "--type=merge", "-p",
                            '{"status": {"hard": {"pods": "0"}, "used": {"pods": "0"}}}')
        manager = Manager(cluster, "--namespace", ns, *SHIPPED_FLAGS, name="unstartable",
                          tuned=False).wait_ready()
        try:
            start = settled(manager, 5)
            jobs = [(kind, f"j-{kind.lower()}-{i}") for i in range(BIG_JOBS) for kind in LAYOUTS]
            half = len(jobs) // 2
            first_json = await create(client, ns, jobs[:half])
            middle = settled(manager)
            second_json = await create(client, ns, jobs[half:])
            end = settled(manager)
            later = settled(manager, 120)
            refused = manager.metric("trainop_api_requests_total", verb="post",
                                     resource="pods", code="403")
        finally:
            manager.stop()
            await client.close()
    second = len(jobs) - half
    per_job = (end - middle) / second
    json_per_job = second_json / second / 2**20
    write_results("unstartable", "Jobs that cannot start (python -m bench.unstartable)", [
        Row("resident memory before any job", start, None, "MiB"),
        Row(f"growth from the first {half} jobs ({first_json / 2**20:.0f} MiB of JSON: "
            "the parsed-job budget fills)", middle - start, None, "MiB"),
        Row(f"growth per job of the next {second}, beside its JSON", per_job, json_per_job,
            "MiB", "<= 1.5"),
        Row(f"resident memory two minutes of retries later ({refused:.0f} pods refused "
            "by then)", later, end, "MiB", "about 1"),
    ], notes=(
        "One namespace of a ResourceQuota of no pods; the manager runs with the shipped "
        "Deployment's flags and its own defaults (QPS, threads), and as the image runs "
        "it (MALLOC_ARENA_MAX=2). Jobs are nine of every kind of 1.3 MiB each (a long "
        "environment in one replica type), not suspended; each is refused its pods and "
        "retried with back-off. The baseline of the per-job row is the job's JSON: what "
        "any informer keeps of it."))


if __name__ == "__main__":
    asyncio.run(main())
