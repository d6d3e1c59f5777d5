"""A simulated kubelet: moves trainop's new (Pending) pods to Running at once, and after
--run-seconds to Succeeded (or Failed with exit code 1 for every --fail-every-th pod).
Thousands of pods a second; it runs until stopped.

    python -m testbed.kubelet --kubeconfig KUBECONFIG --run-seconds 5
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Iterator
from typing import Any

from trainop.api.resources import PODS
from trainop.cluster.reading.client import REQUEST_ERRORS, APIError, Client
from trainop.cluster.reading.config import from_kubeconfig
from trainop.engine.labels import JOB_NAME

CONCURRENCY = 64


def retry_delays() -> Iterator[float]:
    """0.5s, 1s, 2s, ... at most 8s, for ever."""
    delay = 0.5
    while True:
        yield delay
        delay = min(delay * 2, 8.0)


def status(phase: str, exit_code: int | None = None) -> dict[str, Any]:
    state: dict[str, Any] = {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
    if exit_code is not None:
        state = {"terminated": {"exitCode": exit_code,
                                "reason": "Completed" if exit_code == 0 else "Error"}}
    return {"status": {"phase": phase, "containerStatuses": [{
        "name": "main", "ready": phase == "Running", "restartCount": 0, "image": "x",
        "imageID": "", "state": state}]}}


async def main(kubeconfig: str, run_seconds: float, fail_every: int) -> None:
    client = Client(from_kubeconfig(kubeconfig), max_connections=CONCURRENCY)
    sem = asyncio.Semaphore(CONCURRENCY)
    seen: set[str] = set()
    running: set[asyncio.Task[None]] = set()  # held: the loop keeps only weak references
    count = 0

    async def patch(ns: str, name: str, body: dict[str, Any]) -> None:
        # A real kubelet keeps reporting until the API server takes it: a phase change
        # lost to throttling would leave its job waiting forever.
        for delay in retry_delays():
            async with sem:
                try:
                    await client.patch(PODS.path(ns, name, "status"), body)
                    return
                except REQUEST_ERRORS as err:
                    if isinstance(err, APIError) and err.status == 404:
                        return  # deleted meanwhile
                    problem = str(err) or type(err).__name__
            print(f"{time.strftime('%X')} kubelet: {ns}/{name}: {problem}; retrying",
                  flush=True)
            await asyncio.sleep(delay)

    async def lifecycle(ns: str, name: str, n: int) -> None:
        await patch(ns, name, status("Running"))
        await asyncio.sleep(run_seconds)
        failed = fail_every and n % fail_every == 0
        await patch(ns, name, status("Failed", 1) if failed else status("Succeeded", 0))

    def start(obj: dict[str, Any]) -> None:
        nonlocal count
        m = obj.get("metadata") or {}
        if m.get("uid") in seen or (obj.get("status") or {}).get("phase", "Pending") != "Pending":
            return
        seen.add(m["uid"])
        count += 1
        task = asyncio.get_running_loop().create_task(lifecycle(m["namespace"], m["name"], count))
        running.add(task)
        task.add_done_callback(running.discard)

    while True:  # list, then watch from there; after any error (410 Gone too) list again
        try:
            listing = await client.get(PODS.path(), {"labelSelector": JOB_NAME})
            for obj in listing["items"]:
                start(obj)
            async for event in client.watch(PODS.path(), {
                    "labelSelector": JOB_NAME,
                    "resourceVersion": listing["metadata"]["resourceVersion"]}):
                if event["type"] == "ADDED":
                    start(event["object"])
        except REQUEST_ERRORS as err:
            print(f"{time.strftime('%X')} kubelet: watch ended ({err}); listing again",
                  flush=True)
            await asyncio.sleep(0.5)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--run-seconds", type=float, default=5.0)
    p.add_argument("--fail-every", type=int, default=0)
    a = p.parse_args()
    asyncio.run(main(a.kubeconfig, a.run_seconds, a.fail_every))
