"""The manager's own part of a whole-job restart through the rank supervisors, at up to
1,000 ranks: a real API server and the manager (--restart-in-place, --rank-supervisor-image),
and in place of the pods' kubelets and supervisors this process, which sets each pod's status
(Running, Ready, an IP of its own on loopback) and serves each pod's channel there, speaking
the supervisor's protocol (supervisor/channel.go: every request and answer signed with the
job's key) and acting at once: a rank told a newer attempt is held, a held one released runs.

    python -m bench.many_ranks [--sizes 32 1000] [--repeat 3]

Per size, a TFJob of N workers runs; worker 1's rank then says it exited with 137. The time
is from that exit until every rank runs the next attempt, split at the moment every rank is
held (the manager heard the exit, decided, and told every supervisor) and the release. The
supervisors' own part (stopping a process group: bench.channel, bench.restart) is not in it.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hmac
import ipaddress
import json
import statistics
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from bench.lib import RESULTS, Cluster, Manager, create_job, job_doc, machine
from trainop.api.resources import PODS, SECRETS, SERVICES, job_resource
from trainop.cluster.acting.ranks import mac
from trainop.cluster.reading.client import Client
from trainop.engine import inplace, supervised
from trainop.engine.labels import JOB_NAME

FAILING = 1
FIRST_IP = ipaddress.ip_address("127.77.0.1")


@dataclass
class Rank:
    """One pod's simulated supervisor."""

    pod: str
    key: bytes
    seq: int = 1
    phase: str = "running"
    attempt: int = 0
    told: tuple[int, int, bool] = (0, 0, False)
    last: dict[str, Any] | None = None
    polled: bool = False
    held_at: dict[int, float] = field(default_factory=dict)
    runs_at: dict[int, float] = field(default_factory=dict)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def bump(self, phase: str) -> None:
        self.phase, self.seq = phase, self.seq + 1
        self.changed.set()
        self.changed = asyncio.Event()

    def act(self) -> None:
        """As the supervisor acts on what it was told, at once."""
        attempt, released, _ = self.told
        if attempt > self.attempt and self.phase in ("running", "exited"):
            self.bump("held")
            self.held_at[attempt] = time.monotonic()
        if self.phase == "held" and released >= attempt > self.attempt:
            self.attempt = attempt
            self.bump("running")
            self.runs_at[attempt] = time.monotonic()

    def exit(self, code: int) -> None:
        self.last = {"code": code, "signal": code - 128,
                     "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        self.bump("exited")

    def answer(self) -> bytes:
        attempt, released, finish = self.told
        return orjson.dumps({"pod": self.pod, "seq": self.seq, "phase": self.phase,
                             "attempt": self.attempt, "told": {
                                 "attempt": attempt, "released": released, "finish": finish},
                             "last": self.last})


class Supervisors:
    """Every pod's simulated supervisor, each served on its pod's IP."""

    def __init__(self) -> None:
        self.by_ip: dict[str, Rank] = {}
        self.runner: web.AppRunner | None = None

    async def handle(self, request: web.Request) -> web.Response:
        rank = self.by_ip[request.transport.get_extra_info("sockname")[0]]  # type: ignore
        body = await request.read()
        nonce = request.headers.get("X-Trainop-Nonce", "")
        want = mac(rank.key, "request", request.method, request.path, request.query_string,
                   rank.pod, nonce, body).hex()
        if not hmac.compare_digest(request.headers.get("X-Trainop-Mac", ""), want):
            return web.Response(status=401, text="not authenticated")
        if request.path == "/tell":
            t = orjson.loads(body)
            told = (t["attempt"], t["released"], t["finish"])
            if told > rank.told:
                rank.told = told
                rank.seq += 1
                rank.act()
        else:
            rank.polled = True
            after = int(request.query["after"])
            deadline = time.monotonic() + min(int(request.query["wait"]) / 1000, 30)
            while rank.seq <= after and (left := deadline - time.monotonic()) > 0:
                try:
                    await asyncio.wait_for(rank.changed.wait(), left)
                except TimeoutError:
                    break
        answer = rank.answer()
        return web.Response(body=answer, content_type="application/json", headers={
            "X-Trainop-Mac": mac(rank.key, "answer", rank.pod, nonce, answer).hex()})

    async def serve(self, ranks: dict[str, Rank]) -> None:
        app = web.Application()
        app.router.add_route("*", "/{path}", self.handle)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        for ip, rank in ranks.items():
            self.by_ip[ip] = rank
            await web.TCPSite(self.runner, ip, supervised.PORT).start()

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()


def pod_status(ip: str, main: str) -> dict[str, Any]:
    """A supervised pod's status as its kubelet shows it once it runs."""
    def one(name: str, state: dict[str, Any]) -> dict[str, Any]:
        return {"name": name, "image": "x", "imageID": "", "restartCount": 0,
                "ready": "running" in state, "state": state}
    running = {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
    done = {"terminated": {"exitCode": 0, "reason": "Completed"}}
    return {"status": {
        "phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
        "conditions": [{"type": "Ready", "status": "True"}],
        "initContainerStatuses": [one(inplace.BARRIER, done), one(supervised.INSTALL, done)],
        "containerStatuses": [one(main, running), one(inplace.AGENT, running)]}}


async def until(what: str, check: Any, timeout: float = 600) -> Any:
    deadline = time.monotonic() + timeout
    while (found := check()) in (None, False):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} within {timeout:.0f}s")
        await asyncio.sleep(0.05)
    return found


async def one(client: Client, ns: str, workers: int) -> tuple[float, float]:
    """Seconds from worker 1's exit until every rank is held, and until every rank runs
    the next attempt."""
    name = f"r{uuid.uuid4().hex[:6]}"
    doc = job_doc("TFJob", {"Worker": workers}, name, ns, restartScope="Job", backoffLimit=3)
    doc["spec"]["tfReplicaSpecs"]["Worker"]["restartPolicy"] = "ExitCode"
    await create_job(client, doc)
    pods: list[dict[str, Any]] = []

    async def listed() -> bool:
        pods[:] = (await client.get(PODS.path(ns), {
            "labelSelector": f"{JOB_NAME}={name}"}))["items"]
        return len(pods) == workers
    while not await listed():
        await asyncio.sleep(0.5)
    secret = (await client.get(SECRETS.path(ns), {
        "fieldSelector": f"metadata.name={supervised.key_secret(name)}"}))["items"][0]
    key = base64.urlsafe_b64decode(base64.b64decode(secret["data"]["key"]) + b"==")
    ranks: dict[str, Rank] = {}
    for i, pod in enumerate(sorted(pods, key=lambda p: p["metadata"]["name"])):
        ranks[str(FIRST_IP + i)] = Rank(pod["metadata"]["name"], key)
    sups = Supervisors()
    await sups.serve(ranks)
    try:
        sem = asyncio.Semaphore(64)

        async def running(ip: str, rank: Rank) -> None:
            async with sem:
                await client.patch(PODS.path(ns, rank.pod) + "/status",
                                   pod_status(ip, "tensorflow"))
        await asyncio.gather(*(running(ip, r) for ip, r in ranks.items()))
        # every supervisor polled (the manager follows a pod from Ready), its next poll
        # held open
        await until("every rank followed", lambda: all(r.polled for r in ranks.values()))
        await asyncio.sleep(1)
        failed = next(r for r in ranks.values() if r.pod == f"{name}-worker-{FAILING}")
        exited = time.monotonic()
        failed.exit(137)
        held = await until("every rank held", lambda: len(
            [r for r in ranks.values() if 1 in r.held_at]) == workers and max(
                r.held_at[1] for r in ranks.values()))
        runs = await until("every rank running attempt 1", lambda: len(
            [r for r in ranks.values() if 1 in r.runs_at]) == workers and max(
                r.runs_at[1] for r in ranks.values()))
        return held - exited, runs - exited
    finally:
        # (no garbage collector here: what the job owned goes with it by hand)
        await client.delete(job_resource("TFJob").path(ns, name))
        for res in (PODS, SERVICES, SECRETS):
            await client.delete(res.path(ns))
        await sups.stop()


async def run(sizes: list[int], repeat: int) -> dict[int, list[tuple[float, float]]]:
    out: dict[int, list[tuple[float, float]]] = {n: [] for n in sizes}
    with Cluster() as cluster:
        manager = Manager(cluster, "--restart-in-place", "--rank-supervisor-image",
                          "trainop.test/supervisor:1", "--enable-scheme", "tfjob").wait_ready()
        client = cluster.client()
        try:
            for n in sizes:
                for i in range(repeat):
                    ns = cluster.namespace(f"ranks-{n}-{i}")
                    held, runs = await one(client, ns, n)
                    out[n].append((held, runs))
                    print(f"{n} ranks: every rank held {held:.2f} s, running attempt 1 "
                          f"{runs:.2f} s after the exit", flush=True)
        finally:
            await client.close()
            manager.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[32, 1000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    out = asyncio.run(run(args.sizes, args.repeat))
    rows = []
    base = statistics.median(r for _, r in out[args.sizes[0]])
    for n in args.sizes:
        held = statistics.median(h for h, _ in out[n])
        runs = statistics.median(r for _, r in out[n])
        rows.append(f"| {n} | {held:.2f} s | {runs:.2f} s | {runs / base:.1f}x |")
    text = (f"# The manager's part of a restart through the rank supervisors\n\n"
            f"`python -m bench.many_ranks --sizes {' '.join(map(str, args.sizes))} --repeat "
            f"{args.repeat}` on {machine()}, {time.strftime('%Y-%m-%d')}; medians. From a "
            f"rank's exit (its simulated supervisor says so) until every rank is held, and "
            f"until every rank runs the next attempt; supervisors acting at once.\n\n"
            f"| ranks | every rank held | every rank runs again | vs {args.sizes[0]} |\n"
            f"|---|---|---|---|\n" + "\n".join(rows) + "\n")
    (RESULTS / "many-ranks.md").write_text(text)
    print(text)
    print(json.dumps({str(n): v for n, v in out.items()}))


if __name__ == "__main__":
    main()
