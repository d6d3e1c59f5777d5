"""`trainop describe KIND/NAME`: one screen that says why a job in a cluster is where it
is: each replica's pod (phase, node, restarts, exit code, what it waits for), the job's
conditions, the replicas it says wait, how far it has got, and its last failure."""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import ValidationError
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from trainop.api import KINDS, templates
from trainop.api.resources import PODS, job_resource
from trainop.api.types import Progress
from trainop.cluster.reading.client import Client
from trainop.cluster.reading.config import ClusterConfig
from trainop.cluster.reading.records import pod_record
from trainop.engine import progress, supervised
from trainop.engine.labels import JOB_NAME
from trainop.terminal import printable

REFRESH = 2.0
"""Seconds between looks with --watch."""
def kind_of(word: str) -> str | None:
    """The kind a word names as kubectl takes it: `pytorchjob`, `pytorchjobs`, `PyTorchJob`."""
    w = word.lower()
    return next((k for k, info in KINDS.items() if w in (k.lower(), info.plural)), None)


async def fetch(client: Client, kind: str, namespace: str, name: str
                ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The job and the pods it controls (an earlier job's of the same name are not)."""
    job = await client.get(job_resource(kind).path(namespace, name))
    uid = (job.get("metadata") or {}).get("uid")
    pods = await client.get(PODS.path(namespace), {"labelSelector": f"{JOB_NAME}={name}"})
    mine = [p for p in pods.get("items") or []
            if any(o.get("uid") == uid and o.get("controller")
                   for o in (p.get("metadata") or {}).get("ownerReferences") or [])]
    return job, mine


def render(job: dict[str, Any], pods: list[dict[str, Any]]) -> RenderableType:
    """The job and its pods as one screen (plain data in, rich text out); each pod read as
    the manager's cache reads it (records.pod_record)."""
    meta, status = job.get("metadata") or {}, job.get("status") or {}
    info = KINDS.get(str(job.get("kind")))
    main = info.default_container if info else ""
    table = Table(title=printable(f"{job.get('kind')} {meta.get('namespace')}/"
                                  f"{meta.get('name')}"), title_justify="left")
    for col in ("replica", "pod", "phase", "node", "restarts", "exit code", "waiting"):
        table.add_column(col)
    records = [r for r in map(pod_record, pods) if r is not None]
    for rec in sorted(records, key=lambda r: (r.replica_type, r.index)):
        code = rec.exit_code(main)
        last = rec.last_run(main)
        if code is None and last is not None:
            code, reason = last  # restarted in place: its last run
        else:
            reason = rec.reason
        shown = "" if code is None else f"{code} ({reason})" if reason else str(code)
        table.add_row(*map(printable, (
            f"{rec.replica_type}-{rec.index}", rec.meta.name,
            "Terminating" if rec.terminating else rec.phase, rec.node or "",
            str(rec.restarts), shown,
            f"{rec.waiting.reason}: {rec.waiting.message}" if rec.waiting else "")))
    lines: list[RenderableType] = [table]
    if not pods:
        lines.append(Text("no pods", style="dim"))
    if (restarts := restart_path(pods, main)) is not None:
        lines.append(printable(f"restarts    {restarts}"))
    for c in status.get("conditions") or []:
        style = "bold red" if c.get("type") == "Failed" and c.get("status") == "True" else ""
        lines.append(printable(f"{c.get('type', ''):<11} {c.get('status', ''):<5} "
                               f"{c.get('reason', '')}: {c.get('message', '')}", style))
    for w in status.get("waitingReplicas") or []:
        lines.append(printable(f"waiting     {w.get('pod')}: {w.get('reason')}: "
                               f"{w.get('message')} (since {w.get('since')})", "yellow"))
    lines += progress_lines(status.get("progress"))
    last = status.get("lastFailure")
    if last:
        where = f" on {last['node']}" if last.get("node") else ""
        what = f" container {last['container']}" if last.get("container") else ""
        lines.append(printable(f"last failure {last.get('pod')}{what}{where}: exit code "
                               f"{last.get('exitCode')} ({last.get('reason')}) at "
                               f"{last.get('time')}", "red"))
        if last.get("message"):
            lines.append(printable(str(last["message"]).rstrip(), "dim"))
    return Group(*lines)


def progress_lines(block: object) -> list[RenderableType]:
    """The job's progress (engine/progress.py), where its lead rank reported any."""
    if block is None:
        return []
    try:
        p = Progress.model_validate(block)
    except ValidationError:
        return [Text("progress    (not in trainop's shape)", style="dim")]
    lines: list[RenderableType] = [printable(
        f"progress    {progress.summary(p)} (pod {p.pod}, at {p.last_reported_time})", "cyan")]
    if p.refused:
        lines.append(printable(f"            latest report refused: {p.refused}", "yellow"))
    return lines


def restart_path(pods: list[dict[str, Any]], main: str) -> str | None:
    """How the job's pods restart as a whole, as they show it (engine/inplace.py,
    engine/supervised.py), where they restart in place."""
    records = [(p, r) for p in pods
               if (r := pod_record(p)) is not None and r.in_place is not None]
    if not records:
        return None
    attempt = max(r.in_place.attempt for _, r in records if r.in_place is not None)
    ranks = sum(1 for p, _ in records
                if ((templates.container(p, main) or {}).get("command") or [None])[0]
                == supervised.BINARY)
    how = supervised.CONTAINERS if ranks < len(records) else supervised.PROCESSES
    said = f"{how}, attempt {attempt} ({len(records)} pod(s))"
    if 0 < ranks < len(records):
        said += f"; {supervised.PROCESSES} in {ranks}: container {main} runs as the rank " \
                "supervisor's child"
    return said


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
