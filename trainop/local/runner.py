"""`trainop run`: observe local processes, reconcile with the engine, apply the plan."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from trainop import wallclock
from trainop.api.types import Defaulted
from trainop.engine import EngineConfig, Event, Observed, Plan, inplace, progress, reconcile
from trainop.engine import conditions as cond
from trainop.engine.framework import started_by_launcher
from trainop.engine.labels import replica_of, replica_type_of
from trainop.frameworks import framework_of
from trainop.local import files
from trainop.local.addressing import LocalAddressing
from trainop.local.folder import RunFolder
from trainop.local.process import ContainerProcess, LocalPod, NotRunnable, command_of
from trainop.local.reports import ReportFile
from trainop.local.supervisor import LocalSupervisor

T = TypeVar("T")
ENDED = ("Succeeded", "Failed")
LOCAL_ENGINE = EngineConfig(aggregate_events=True, batch_jobs=False, progress_interval=1.0)
"""Locally the events go to a terminal: one line per round reads better than one per pod;
and there is no Job controller, so a launcher mpi-operator makes by a Job is a process under
the engine's own restart rules. A job that restarts in place has its processes restarted
where they are, each pod's by its LocalSupervisor (local/supervisor.py), as rank
supervisors do in a cluster. Progress is drawn once a second: one process reads it."""

TICK = 1.0
"""Seconds between reconciles when nothing happens (deadlines are checked this often)."""


@dataclass
class RunOptions:
    run_dir: Path
    env: dict[str, str] = field(default_factory=dict)
    timeout: float | None = None
    grace: float = 5.0
    """Seconds a process has to end after SIGTERM (a pod deleted, a rank stopped for a
    newer attempt) before SIGKILL."""
    restart_in_place: bool = False
    """As the manager's --restart-in-place: jobs with restartScope Job that leave
    runPolicy.restartInPlace unset restart their processes in place."""

    @property
    def engine(self) -> EngineConfig:
        return dataclasses.replace(LOCAL_ENGINE, restart_in_place=self.restart_in_place)


@dataclass
class RunResult:
    outcome: str  # Succeeded, Failed, NotRunnable, TimedOut, Interrupted, Suspended
    status: Any
    duration: float
    error: str | None = None
    """Why the job could not run here (NotRunnable): one line for the user."""

    @property
    def exit_code(self) -> int:
        return {"Succeeded": 0, "Failed": 1, "NotRunnable": 2, "TimedOut": 124,
                "Interrupted": 130, "Suspended": 3}[self.outcome]


class LocalRun:
    """Runs one job to its end. Output goes through `on_line(replica, line)`, engine
    events through `on_event(event)`; `on_change()` is called whenever state changed."""

    def __init__(self, job: Defaulted, options: RunOptions,
                 on_line: Callable[[str, str], None] = lambda r, s: None,
                 on_event: Callable[[Event], None] = lambda e: None,
                 on_change: Callable[[], None] = lambda: None):
        self.job = job
        self.options = options
        self.framework = framework_of(job)
        self.addr = LocalAddressing.for_job(job)
        self.pods: dict[str, LocalPod] = {}
        self.folder = RunFolder(options.run_dir)
        self.on_line, self.on_event, self.on_change = on_line, on_event, on_change
        self._wake = asyncio.Event()
        self.reports: dict[str, ReportFile] = {}
        """The report file of the lead pod, by pod name (engine/progress.py)."""
        self._exit_told: set[str] = set()
        """Pods whose end was observed (Observed.exited), and so told once."""
        self.started = time.monotonic()

    # -- observe ---------------------------------------------------------------------
    def observed(self) -> Observed:
        """What the runtime holds of the job's pods, as the cluster runtime observes them:
        with the pods seen to end since the last plan (`exited`, told as ExitedWithCode)."""
        exited = tuple((p.name, p.exit_code) for p in self.pods.values()
                       if p.phase in ENDED and p.exit_code is not None
                       and p.name not in self._exit_told)
        reports = tuple(r for f in self.reports.values() if (r := f.read()) is not None)
        return Observed(pods=tuple(p.state() for p in self.pods.values()),
                        objects=tuple(self.folder.objects.values()), exited=exited,
                        reports=reports)

    # -- apply -----------------------------------------------------------------------
    async def apply(self, plan: Plan) -> None:
        # conditions the cluster tells no event for (Created, Running) are printed here
        # all the same: locally the terminal is the only place that says so
        told = {e.reason for e in plan.events}
        quiet = [c for c in (cond.get(plan.status, t) for t in plan.transitions)
                 if c is not None and c.reason not in told]
        for c in quiet:
            self.on_event(Event("Normal", c.reason or c.type, c.message or ""))
        # a failure or restart is told with its condition's message: the facts (which pod,
        # which exit code) that the cluster's events leave to the condition
        facts = {c.reason: c.message for c in plan.status.conditions or []
                 if c.status == "True" and c.type in (cond.FAILED, cond.RESTARTING)}
        said: set[str] = set()
        for event in plan.on_removed + plan.events + plan.on_created:  # none is refused
            if event.reason in facts:
                if event.reason in said:
                    continue  # upstream's second event of the same restart
                said.add(event.reason)
                event = Event(event.type, event.reason, facts[event.reason] or event.message)
            self.on_event(event)
        self.job = self.job.model_copy(update={"status": plan.status})
        for ref in plan.delete:
            if ref.kind == "Pod" and ref.name in self.pods:
                pod = self.pods[ref.name]
                asyncio.get_running_loop().create_task(self._delete(pod))
            else:
                self.folder.objects.pop((ref.kind, ref.name), None)
        for obj in plan.to_create + plan.update:
            if obj["kind"] != "Pod":
                self.folder.store(obj)
            elif "spec" in obj:
                self._create_pod(obj)
        # what the engine tells a pod that restarts in place reaches its supervisor
        for name, attempts in plan.told.items():
            if (local := self.pods.get(name)) and local.supervisor:
                local.supervisor.tell(attempts)
        self.on_change()

    async def _delete(self, pod: LocalPod) -> None:
        await pod.stop(self.options.grace)
        if self.pods.get(pod.name) is pod:
            del self.pods[pod.name]
        self.wake()

    def _create_pod(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        name = meta["name"]
        replica = replica_of(meta["labels"], name)
        rtype = replica_type_of(self.job, replica[0]) if replica else None
        assert replica is not None and rtype is not None  # the engine labels its own pods
        index = replica[1]
        process = None
        if not started_by_launcher(self.framework, rtype):
            env = self.options.env
            if name == progress.lead_name(self.job):
                path = self.options.run_dir.resolve() / f"{name}.progress.json"
                self.reports = {name: ReportFile(name, path)}
                env = {**env, progress.ENV: str(path)}
            command = command_of(pod, self.job.main_container, self.options.run_dir,
                                 env, self.folder.mounts(pod))
            process = ContainerProcess(name, self.job.main_container, command, self.folder.guarded(
                files.open_below, self.options.run_dir, f"{name}.log", append=True),
                self.on_line)
        told = inplace.told_in(meta.get("annotations") or {})
        local = LocalPod(name=name, replica_type=rtype, index=index, process=process,
                         restart_policy=pod["spec"]["restartPolicy"], on_change=self.wake,
                         supervisor=LocalSupervisor(told, self.options.grace)
                         if told is not None else None)
        self.pods[name] = local
        self._exit_told.discard(name)  # a pod made again under the name ends anew
        local.start()

    def wake(self) -> None:
        self._wake.set()
        self.on_change()

    # -- the loop --------------------------------------------------------------------
    async def run(self) -> RunResult:
        self.options.run_dir.mkdir(parents=True, exist_ok=True)
        deadline = None if self.options.timeout is None else \
            self.started + self.options.timeout
        outcome, error = "Interrupted", None
        try:
            self.folder.guarded(files.check_run_folder, self.options.run_dir.resolve())
            while True:
                self._wake.clear()
                broken = next((p.process for p in self.pods.values()
                               if p.process and p.process.start_error), None)
                if broken is not None:  # before the engine reads it as a failed replica
                    raise NotRunnable(f"pod {broken.name}: {broken.start_error}")
                observed = self.observed()
                plan = reconcile(self.job, observed, wallclock.now(),
                                 self.framework, self.addr, self.options.engine)
                await self.apply(plan)
                self._exit_told.update(name for name, _ in observed.exited)
                done = outcome_of(self.job)
                if done:
                    outcome = done
                    break
                if self.job.spec.run_policy.suspend:
                    outcome = "Suspended"
                    break
                wait = TICK if plan.requeue_after is None else min(TICK, plan.requeue_after)
                if deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        outcome = "TimedOut"
                        break
                    wait = min(wait, left)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), wait)
        except NotRunnable as err:
            error = str(err)
            outcome = "NotRunnable"  # bad input for a local run: no job outcome at all
        finally:
            await self.stop_all()
        return RunResult(outcome, self.job.status, time.monotonic() - self.started, error)

    async def stop_all(self) -> None:
        """Stop every process still running: a local run ends with its job."""
        await asyncio.gather(*(p.stop(self.options.grace) for p in list(self.pods.values())))


def outcome_of(job: Defaulted) -> str | None:
    """Succeeded or Failed, once the job's status says it ended; else None."""
    status = job.status
    if status is None:
        return None
    for outcome in (cond.SUCCEEDED, cond.FAILED):
        if cond.is_true(status, outcome):
            return outcome
    return None
