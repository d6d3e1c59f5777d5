"""`trainop describe KIND/NAME`: one screen that says why a job in a cluster is where it
is: each replica's pod (phase, node, restarts, exit code, what it waits for), the job's
conditions, the replicas it says wait, and its last failure."""

from __future__ import annotations

import asyncio
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from trainop.api import KINDS
from trainop.cluster.client import Client
from trainop.cluster.config import ClusterConfig
from trainop.cluster.records import waiting_cause
from trainop.cluster.resources import JOBS, PODS
from trainop.engine.labels import JOB_NAME, replica_of

REFRESH = 2.0
"""Seconds between looks with --watch."""


def kind_of(word: str) -> str | None:
    """The kind a word names as kubectl takes it: `pytorchjob`, `pytorchjobs`, `PyTorchJob`."""
    w = word.lower()
    return next((k for k, info in KINDS.items() if w in (k.lower(), info.plural)), None)


async def fetch(client: Client, kind: str, namespace: str, name: str
                ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The job and the pods it controls (an earlier job's of the same name are not)."""
    job = await client.get(JOBS[kind].path(namespace, name))
    uid = (job.get("metadata") or {}).get("uid")
    pods = await client.get(PODS.path(namespace), {"labelSelector": f"{JOB_NAME}={name}"})
    mine = [p for p in pods.get("items") or []
            if any(o.get("uid") == uid and o.get("controller")
                   for o in (p.get("metadata") or {}).get("ownerReferences") or [])]
    return job, mine


def _exit(pod: dict[str, Any]) -> str:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        term = (cs.get("state") or {}).get("terminated") or \
            (cs.get("lastState") or {}).get("terminated")
        if term and term.get("exitCode") is not None:
            reason = f" ({term['reason']})" if term.get("reason") else ""
            return f"{term['exitCode']}{reason}"
    return ""


def _replica(pod: dict[str, Any]) -> tuple[str, int]:
    return replica_of((pod.get("metadata") or {}).get("labels") or {}) or ("?", 0)


def render(job: dict[str, Any], pods: list[dict[str, Any]]) -> RenderableType:
    """The job and its pods as one screen (plain data in, rich text out)."""
    meta, status = job.get("metadata") or {}, job.get("status") or {}
    table = Table(title=f"{job.get('kind')} {meta.get('namespace')}/{meta.get('name')}",
                  title_justify="left")
    for col in ("replica", "pod", "phase", "node", "restarts", "exit code", "waiting"):
        table.add_column(col)
    for pod in sorted(pods, key=_replica):
        pmeta, pstatus = pod.get("metadata") or {}, pod.get("status") or {}
        rtype, index = _replica(pod)
        phase = "Terminating" if pmeta.get("deletionTimestamp") else \
            pstatus.get("phase") or "Pending"
        restarts = sum(int(cs.get("restartCount") or 0)
                       for cs in pstatus.get("containerStatuses") or [])
        cause = waiting_cause(pstatus) if phase == "Pending" else None
        table.add_row(f"{rtype}-{index}", pmeta.get("name", ""), phase,
                      (pod.get("spec") or {}).get("nodeName") or "", str(restarts),
                      _exit(pod), f"{cause[0]}: {cause[1]}" if cause else "")
    lines: list[RenderableType] = [table]
    if not pods:
        lines.append(Text("no pods", style="dim"))
    for c in status.get("conditions") or []:
        style = "bold red" if c.get("type") == "Failed" and c.get("status") == "True" else ""
        lines.append(Text(f"{c.get('type', ''):<11} {c.get('status', ''):<5} "
                          f"{c.get('reason', '')}: {c.get('message', '')}", style=style))
    for w in status.get("waitingReplicas") or []:
        lines.append(Text(f"waiting     {w.get('pod')}: {w.get('reason')}: {w.get('message')} "
                          f"(since {w.get('since')})", style="yellow"))
    last = status.get("lastFailure")
    if last:
        where = f" on {last['node']}" if last.get("node") else ""
        what = f" container {last['container']}" if last.get("container") else ""
        lines.append(Text(f"last failure {last.get('pod')}{what}{where}: exit code "
                          f"{last.get('exitCode')} ({last.get('reason')}) at {last.get('time')}",
                          style="red"))
        if last.get("message"):
            lines.append(Text(str(last["message"]).rstrip(), style="dim"))
    return Group(*lines)


async def describe(config: ClusterConfig, kind: str, namespace: str, name: str,
                   console: Console, watch: bool) -> None:
    """Print the screen once, or (`watch`) keep it current until interrupted."""
    client = Client(config, max_connections=2)
    try:
        if not watch:
            console.print(render(*await fetch(client, kind, namespace, name)))
            return
        with Live(console=console, auto_refresh=False) as live:
            while True:
                live.update(render(*await fetch(client, kind, namespace, name)), refresh=True)
                await asyncio.sleep(REFRESH)
    finally:
        await client.close()
