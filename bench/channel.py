"""The rank supervisors' channel alone (supervisor/channel.go, cluster/acting/ranks.py): N
real supervisors on this machine, each supervising a rank (`sleep`), and the manager's end
of the protocol telling them all the next attempt, then releasing it. No API server, no
engine, no kubelet: what the channel itself costs a whole-job restart of N ranks.

    python -m bench.channel [--sizes 4 32 256] [--repeat 5]

Per size, the median of `repeat` restarts: the time from the first tell until every
supervisor says its rank is stopped and held (SIGTERM to its process group, reaped), and
from the release until every rank runs again; and each supervisor's resident memory.
Ratios to the smallest size are printed beside, as the figures on a shared machine only
compare within one run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import statistics
import subprocess
import time
from dataclasses import dataclass

import aiohttp
import psutil

from bench.lib import RESULTS, machine
from testbed.supervisor import built
from trainop.cluster.acting.ranks import Supervisor, encode_key
from trainop.engine.observed import RankState, Told


@dataclass
class Rank:
    proc: subprocess.Popen[bytes]
    pod: str
    key: bytes
    port: int


def start(n: int) -> list[Rank]:
    binary = str(built())
    ranks = []
    for i in range(n):
        key, pod = secrets.token_bytes(32), f"job-worker-{i}"
        proc = subprocess.Popen(
            [binary, "--listen", "127.0.0.1:0", "--pod", pod, "--grace", "1s", "--", "sleep",
             "100000"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            env={**os.environ, "TRAINOP_SUPERVISOR_KEY": encode_key(key)})
        ranks.append(Rank(proc, pod, key, 0))
    for r in ranks:
        assert r.proc.stderr is not None
        line = r.proc.stderr.readline().decode()
        r.port = int(line.rsplit(":", 1)[1])
    return ranks


async def until(sup: Supervisor, phase: str, attempt: int) -> RankState:
    state = await sup.state()
    while (state.phase, state.attempt) != (phase, attempt):
        state = await sup.state(after=state.seq, wait=10)
    return state


async def restarts(ranks: list[Rank], repeat: int) -> tuple[list[float], list[float]]:
    stops, starts = [], []
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector,
                                     timeout=aiohttp.ClientTimeout(total=60)) as session:
        sups = [Supervisor(session, f"127.0.0.1:{r.port}", r.pod, r.key) for r in ranks]
        await asyncio.gather(*(s.state() for s in sups))  # every connection open
        for attempt in range(1, repeat + 1):
            t0 = time.monotonic()
            await asyncio.gather(*(s.tell(Told(attempt, attempt - 1)) for s in sups))
            await asyncio.gather(*(until(s, "held", attempt) for s in sups))
            t1 = time.monotonic()
            await asyncio.gather(*(s.tell(Told(attempt, attempt)) for s in sups))
            await asyncio.gather(*(until(s, "running", attempt) for s in sups))
            stops.append(t1 - t0)
            starts.append(time.monotonic() - t1)
    return stops, starts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[4, 32, 256])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    rows = []
    for n in args.sizes:
        ranks = start(n)
        try:
            stops, starts = asyncio.run(restarts(ranks, args.repeat))
            rss = statistics.median(psutil.Process(r.proc.pid).memory_info().rss
                                    for r in ranks) / 2**20
        finally:
            for r in ranks:
                r.proc.terminate()
            for r in ranks:
                r.proc.wait()
        rows.append((n, statistics.median(stops), statistics.median(starts), rss))
        print(f"{n} ranks: stopped and held {rows[-1][1]:.3f}s, running again "
              f"{rows[-1][2]:.3f}s, {rss:.1f} MiB each", flush=True)
    base = rows[0][1] + rows[0][2]
    host = machine().split(", kube-apiserver")[0]  # no API server here
    lines = ["# The rank supervisors' channel: a whole-job restart of the ranks' processes\n",
             f"`python -m bench.channel --sizes {' '.join(map(str, args.sizes))} --repeat "
             f"{args.repeat}` on {host}; median of {args.repeat}. "
             "Every supervisor, its rank and the manager's end share this machine's cores "
             "(on a cluster each pod has its node's): the growth with the ranks is this "
             "machine's.\n",
             "| ranks | told until all held | released until all running | total | "
             f"total / {rows[0][0]} ranks | RSS per supervisor |",
             "|---|---|---|---|---|---|"]
    for n, stop, run, rss in rows:
        lines.append(f"| {n} | {stop:.3f} s | {run:.3f} s | {stop + run:.3f} s | "
                     f"{(stop + run) / base:.2f}x | {rss:.1f} MiB |")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "channel.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
