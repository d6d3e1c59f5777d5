"""What a user sees of a local run: prefixed output, events, a live table, a summary."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from trainop.api.types import Progress
from trainop.engine import Event, progress
from trainop.terminal import printable

if TYPE_CHECKING:
    from trainop.local.runner import LocalRun, RunResult

BAR = 30
"""The progress bar's width, in characters."""
COLORS = ["cyan", "magenta", "green", "yellow", "blue", "red", "bright_cyan", "bright_magenta"]


class RunView:
    """Streams replica output as `[worker-1] line`; with a terminal, keeps a live table of
    replicas (state, restarts, exit code) and the job's conditions below the output."""

    def __init__(self, console: Console, job_name: str, live: bool):
        self.console = console
        self.prefix_cut = len(job_name) + 1
        self.colors: dict[str, str] = {}
        self.run: LocalRun | None = None
        self.live: Live | None = Live(console=console, auto_refresh=False,
                                      transient=True) if live else None
        self.progress_told: Progress | None = None

    def __enter__(self) -> RunView:
        if self.live is not None:
            self.live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.stop()

    def replica(self, pod_name: str) -> str:
        return pod_name[self.prefix_cut:]

    def line(self, pod_name: str, text: str) -> None:
        name = self.replica(pod_name)
        color = self.colors.setdefault(name, COLORS[len(self.colors) % len(COLORS)])
        out = Text(f"[{name}] ", style=color)
        out.append(text)
        self.console.print(out, soft_wrap=True, highlight=False)

    def event(self, event: Event) -> None:
        style = "bold red" if event.type == "Warning" else "dim"
        self.console.print(Text(f"trainop: {event.reason}: {event.message}", style=style),
                           soft_wrap=True, highlight=False)

    def changed(self) -> None:
        if self.run is None:
            return
        if self.live is not None:
            self.live.update(self.table(self.run), refresh=True)
            return
        # no terminal: a plain line each time the job's progress changes
        block = self.run.job.status.progress if self.run.job.status else None
        if block is not None and block != self.progress_told:
            self.progress_told = block
            self.console.print(printable(f"trainop: progress: {progress.summary(block)}"),
                               soft_wrap=True, highlight=False)

    def table(self, run: LocalRun) -> Group:
        table = Table(title=f"{run.job.kind} {run.job.name} "
                            f"({time.monotonic() - run.started:.0f}s)", title_justify="left")
        for col in ("replica", "state", "restarts", "exit code", "pid"):
            table.add_column(col)
        for pod in sorted(run.pods.values(), key=lambda p: p.name):
            state = "Terminating" if pod.terminating else pod.phase
            table.add_row(self.replica(pod.name), state, str(pod.restarts),
                          "" if pod.exit_code is None else str(pod.exit_code),
                          str((pod.process and pod.process.pid) or ""))
        conditions = (run.job.status.conditions if run.job.status else None) or []
        lines = [Text(f"{c.type}={c.status}: {c.message}") for c in conditions[-3:]]
        block = run.job.status.progress if run.job.status else None
        if block is not None:
            lines.append(bar(block))
        return Group(table, *lines)

    def summary(self, result: RunResult, run_dir: str) -> None:
        conditions = (result.status.conditions if result.status else None) or []
        for c in conditions:
            self.console.print(f"  {c.type:<11} {c.status:<5} {c.reason}: {c.message}",
                               soft_wrap=True, highlight=False)
        block = result.status.progress if result.status else None
        if block is not None:
            self.console.print(printable(f"  progress    {progress.summary(block)}"),
                               soft_wrap=True, highlight=False)
        last = result.status.last_failure if result.status else None
        if last is not None and result.outcome != "Succeeded":
            self.console.print(f"  last failure: pod {last.pod} (container {last.container}) "
                               f"exited with code {last.exit_code}; its last lines:",
                               soft_wrap=True, highlight=False)
            for line in (last.message or "").splitlines()[-5:]:
                self.console.print(Text(f"    {line}", style="dim"), soft_wrap=True,
                                   highlight=False)
        style = "bold green" if result.outcome == "Succeeded" else "bold red"
        self.console.print(Text(f"{result.outcome} in {result.duration:.1f}s; "
                                f"logs in {run_dir}", style=style), highlight=False)


def bar(block: Progress) -> Text:
    """The job's progress as a bar and what its lead rank last said."""
    out = Text("progress ")
    if block.percent is not None:
        done = BAR * block.percent // 100
        out.append("━" * done, style="green")
        out.append("━" * (BAR - done), style="dim")
        out.append(" ")
    out.append_text(printable(progress.summary(block)))
    return out
