"""Steady state: API writes per minute of a manager with 1,000 running jobs and nothing
changing (only lease renewals are expected).

    python -m bench.steady [--jobs 1000] [--minutes 1]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import time
import urllib.request

from bench.lib import Cluster, Kubelet, Manager, Row, create_job, job_doc, write_results
from trainop.api.resources import job_resource

WRITES = ("post", "put", "patch", "delete")


def writes(manager: Manager) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{manager.metrics_port}/metrics") as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for m in re.finditer(r'trainop_api_requests_total\{(.*)\} ([0-9.e+]+)', text):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        if labels["verb"] in WRITES:
            out[labels["resource"]] = out.get(labels["resource"], 0) + float(m.group(2))
    return out


async def main(jobs: int, minutes: float) -> None:
    with Cluster() as cluster:
        kubelet = Kubelet(cluster, run_seconds=24 * 3600)
        client = cluster.client()
        ns = cluster.namespace("steady")
        try:
            manager = Manager(cluster, "--leader-elect", "--leader-election-namespace",
                              "default").wait_ready()
            sem = asyncio.Semaphore(64)

            async def one(i: int) -> None:
                async with sem:
                    await create_job(client, job_doc("PyTorchJob", {"Master": 1, "Worker": 1},
                                                     f"s{i}", ns))
            await asyncio.gather(*(one(i) for i in range(jobs)))
            deadline = time.monotonic() + 600
            while True:
                items = (await client.get(job_resource("PyTorchJob").path(ns)))["items"]
                up = sum(1 for j in items if any(
                    c["type"] == "Running" and c["status"] == "True"
                    for c in (j.get("status") or {}).get("conditions") or []))
                if up == jobs or time.monotonic() > deadline:
                    break
                await asyncio.sleep(2)
            await asyncio.sleep(10)  # let the last events and status writes land
            before = writes(manager)
            await asyncio.sleep(minutes * 60)
            after = writes(manager)
            manager.stop()
        finally:
            kubelet.stop()
            await client.close()
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    lease = delta.pop("leases", 0) / minutes
    other = sum(delta.values()) / minutes
    write_results("steady", "Steady state (python -m bench.steady)", [
        Row(f"API writes per minute, {up} running jobs, apart from the lease", other, None,
            "/min", "0"),
        Row("lease renewals per minute", lease, None, "/min"),
    ], notes=f"Writes by resource over {minutes} min: {delta or 'none'}.", chart=False)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--minutes", type=float, default=1.0)
    a = parser.parse_args()
    asyncio.run(main(a.jobs, a.minutes))
