"""`trainop run`: observe local processes, reconcile with the engine, apply the plan."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from trainop import wallclock
from trainop.api.templates import containers
from trainop.api.types import Defaulted
from trainop.engine import EngineConfig, Event, Observed, OwnedObject, Plan, inplace, reconcile
from trainop.engine import conditions as cond
from trainop.engine.framework import started_by_launcher
from trainop.engine.labels import replica_of, replica_type_of
from trainop.engine.objects import content_of
from trainop.frameworks import framework_of
from trainop.local import files
from trainop.local.addressing import LocalAddressing
from trainop.local.process import LocalPod, NotRunnable, command_of

T = TypeVar("T")
ENDED = ("Succeeded", "Failed")
LOCAL_ENGINE = EngineConfig(aggregate_events=True, batch_jobs=False,
                            in_place_unavailable=inplace.LOCAL)
"""Locally the events go to a terminal: one line per round reads better than one per pod;
there is no Job controller, so a launcher mpi-operator makes by a Job is a process under
the engine's own restart rules; and no kubelet restarts a pod in place (a job that asks
restarts by recreation, told once)."""

TICK = 1.0
"""Seconds between reconciles when nothing happens (deadlines are checked this often)."""


@dataclass
class RunOptions:
    run_dir: Path
    env: dict[str, str] = field(default_factory=dict)
    timeout: float | None = None
    grace: float = 5.0


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
        self.objects: dict[tuple[str, str], OwnedObject] = {}
        self.on_line, self.on_event, self.on_change = on_line, on_event, on_change
        self._wake = asyncio.Event()
        self.started = time.monotonic()

    # -- observe ---------------------------------------------------------------------
    def observed(self) -> Observed:
        """What the runtime holds of the job's pods, as the cluster runtime observes them:
        with the pods seen to end since the last plan (`exited`, told as ExitedWithCode)."""
        exited = tuple((p.name, p.exit_code) for p in self.pods.values()
                       if p.phase in ENDED and p.exit_code is not None and not p.exit_told)
        return Observed(pods=tuple(p.state() for p in self.pods.values()),
                        objects=tuple(self.objects.values()), exited=exited)

    def finished(self) -> str | None:
        status = self.job.status
        if status is None:
            return None
        for outcome in (cond.SUCCEEDED, cond.FAILED):
            if cond.is_true(status, outcome):
                return outcome
        return None

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
                self.objects.pop((ref.kind, ref.name), None)
        for obj in plan.to_create + plan.update:
            if obj["kind"] == "Pod":
                self._create_pod(obj)
            else:
                self._store(obj)
        self.on_change()

    async def _delete(self, pod: LocalPod) -> None:
        await pod.stop(self.options.grace)
        if self.pods.get(pod.name) is pod:
            del self.pods[pod.name]
        self.wake()

    def _store(self, obj: dict[str, Any]) -> None:
        """ConfigMaps become files in the run folder; other objects only exist by name."""
        name = obj["metadata"]["name"]
        data = obj.get("data") if obj["kind"] == "ConfigMap" else None
        for key, text in (data or {}).items():
            self._write(f"volumes/{name}/{key}", text.encode())
        self.objects[(obj["kind"], name)] = OwnedObject(obj["kind"], name,
                                                        content=content_of(obj["kind"], obj))

    def _write(self, relative: str, data: bytes) -> None:
        with self._guarded(files.open_below, self.options.run_dir, relative) as out:
            out.write(data)

    @staticmethod
    def _guarded(fn: Callable[..., T], *args: Any, **kw: Any) -> T:
        """`fn` on the run folder; a path trainop must not write through ends the run."""
        try:
            return fn(*args, **kw)
        except files.UnsafePath as err:
            raise NotRunnable(str(err)) from None

    def _mounts(self, pod: dict[str, Any]) -> dict[str, Path]:
        """Mount path -> local folder, for the pod's ConfigMap volumes; the files get the
        modes the volume gives them (mpirun's agent script must be executable)."""
        volumes = {v["name"]: v["configMap"]["name"] for v in pod["spec"].get("volumes") or []
                   if isinstance(v.get("configMap"), dict) and v["configMap"].get("name")}
        for v in pod["spec"].get("volumes") or []:
            source = v.get("configMap")
            if v["name"] in volumes and isinstance(source, dict):
                for item in source.get("items") or []:
                    mode = item.get("mode", source.get("defaultMode"))
                    if isinstance(mode, int):
                        self._guarded(files.set_mode, self.options.run_dir,
                                      f"volumes/{volumes[v['name']]}/{item.get('path', '')}",
                                      mode)
        mounts = {}
        for container in containers(pod):
            for m in container.get("volumeMounts") or []:
                if m["name"] in volumes:
                    mounts[m["mountPath"]] = self.options.run_dir / "volumes" / volumes[m["name"]]
        return mounts

    def _create_pod(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        name = meta["name"]
        replica = replica_of(meta["labels"], name)
        rtype = replica_type_of(self.job, replica[0]) if replica else None
        assert replica is not None and rtype is not None  # the engine labels its own pods
        index = replica[1]
        command = None
        if not started_by_launcher(self.framework, rtype):
            command = command_of(pod, self.job.main_container, self.options.run_dir,
                                 self.options.env, self._mounts(pod))
        local = LocalPod(name=name, replica_type=rtype, index=index, command=command,
                         restart_policy=pod["spec"]["restartPolicy"],
                         log=self._guarded(files.open_below, self.options.run_dir,
                                           f"{name}.log", append=True),
                         on_line=self.on_line, on_change=self.wake,
                         container=self.job.main_container)
        self.pods[name] = local
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
            self._guarded(files.check_run_folder, self.options.run_dir.resolve())
            while True:
                self._wake.clear()
                broken = next((p for p in self.pods.values() if p.start_error), None)
                if broken is not None:  # before the engine reads it as a failed replica
                    raise NotRunnable(f"pod {broken.name}: {broken.start_error}")
                observed = self.observed()
                plan = reconcile(self.job, observed, wallclock.now(),
                                 self.framework, self.addr, LOCAL_ENGINE)
                await self.apply(plan)
                for name, _ in observed.exited:
                    if name in self.pods:
                        self.pods[name].exit_told = True
                done = self.finished()
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
