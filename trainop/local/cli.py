"""The `trainop run` command's work: load, override, run, report."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import signal
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console

from trainop import wallclock
from trainop.api import InvalidJob, Job, load_job
from trainop.api.numbers import whole_number
from trainop.api.templates import containers, main_container
from trainop.api.types import Defaulted
from trainop.engine import EngineConfig, Observed, reconcile
from trainop.engine.framework import started_by_launcher
from trainop.engine.labels import replica_of, replica_type_of
from trainop.frameworks import framework_of
from trainop.local.addressing import LocalAddressing
from trainop.local.process import NotRunnable, command_of
from trainop.local.runner import LocalRun, RunOptions, RunResult
from trainop.local.view import RunView


def _err(message: str) -> int:
    print(f"trainop: {message}", file=sys.stderr)
    return 2


def prepare(doc: dict[str, Any], replicas: dict[str, str]) -> Defaulted:
    """The job with --replicas applied, defaulted and validated (InvalidJob otherwise)."""
    doc = dict(doc)
    meta = doc.get("metadata")
    if isinstance(meta, dict):  # anything else is for load_job to report
        doc["metadata"] = {"namespace": "default", "uid": "local", **meta}
    if replicas:
        job = load_job(doc)  # validate first, so that the override names a real type
        info = job.info
        specs = doc["spec"][info.replica_specs_field]
        for rtype, count in replicas.items():
            canonical = info.canonical_replica_type(rtype)
            number = whole_number(count)
            if canonical is None or number is None:
                raise ValueError(f"--replicas {rtype}={count}: expected one of "
                                 f"{', '.join(job.spec.replica_specs)} and a whole number")
            key = next(k for k in specs if k.lower() == canonical.lower())
            specs[key] = {**specs[key], "replicas": number}
    return load_job(doc)


def run_job(doc: dict[str, Any], where: str, replicas: dict[str, str], env: dict[str, str],
            workdir: Path | None, timeout: float | None, dry_run: bool,
            live: bool | None, restart_in_place: bool) -> int:
    try:
        job = prepare(doc, replicas)
    except InvalidJob as err:
        for problem in err.problems:
            print(f"trainop: {where}: {problem}", file=sys.stderr)
        return 2
    except ValueError as err:
        return _err(str(err))

    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    run_dir = (workdir or Path("runs") / f"{job.name}-{stamp}").resolve()
    console = Console(highlight=False)
    if dry_run:
        return dry_run_report(job, run_dir, env, console)

    console.print(f"trainop: running {job.kind} {job.name} from {where} locally; "
                  f"logs in {run_dir}", highlight=False, soft_wrap=True)
    if any(_images(job)):
        console.print(f"trainop: images are not used locally ({', '.join(sorted(_images(job)))}"
                      "); commands run in this Python environment", style="dim", soft_wrap=True)
    view = RunView(console, job.name, live=console.is_terminal if live is None else live)
    run = LocalRun(job, RunOptions(run_dir=run_dir, env=env, timeout=timeout,
                                   restart_in_place=restart_in_place),
                   on_line=view.line, on_event=view.event, on_change=view.changed)
    view.run = run
    with view:
        result = asyncio.run(_run_until_signal(run))
    if result.error:
        _err(result.error)
    else:
        view.summary(result, str(run_dir))
    return result.exit_code


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


async def _run_until_signal(run: LocalRun) -> RunResult:
    """Run; on SIGINT, SIGTERM or SIGHUP (the terminal closed) stop every replica (process
    groups) and report."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    stopped = False

    def stop() -> None:
        nonlocal stopped
        stopped = True
        task.cancel()

    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, stop)
    try:
        return await run.run()
    except asyncio.CancelledError:
        if not stopped:
            raise
        with contextlib.suppress(asyncio.CancelledError):
            await run.stop_all()
        return RunResult("Interrupted", run.job.status, time.monotonic() - run.started)
    finally:
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)


def _images(job: Job) -> set[str]:
    out = set()
    for rspec in job.spec.replica_specs.values():
        for c in containers(rspec.template):
            if c.get("image"):
                out.add(str(c["image"]))
    return out


def dry_run_report(job: Defaulted, run_dir: Path, env: dict[str, str], console: Console) -> int:
    """Print every replica's command and trainop's environment for it; start nothing."""
    fw = framework_of(job)
    plan = reconcile(job, Observed(), wallclock.now(), fw, LocalAddressing.for_job(job),
                     EngineConfig())
    report = []
    for obj in plan.create:
        if obj["kind"] != "Pod":
            continue
        name = obj["metadata"]["name"]
        replica = replica_of(obj["metadata"]["labels"], name)
        rtype = replica_type_of(job, replica[0]) if replica else None
        assert rtype is not None  # the engine labels its own pods
        entry: dict[str, Any] = {"replica": name, "restartPolicy": obj["spec"]["restartPolicy"]}
        if started_by_launcher(fw, rtype):
            entry["process"] = "none (started by the launcher)"
        else:
            try:
                cmd = command_of(obj, job.main_container, run_dir, env, {})
            except NotRunnable as err:
                return _err(str(err))
            entry["command"] = cmd.argv[:2] + (["..."] if len(cmd.argv) > 2 else [])
            main = main_container(obj, job.main_container) or {}
            # the container's variables as the process gets them (pod fields filled in,
            # $(NAME) expanded), and its PATH: this Python environment's bin folder first
            names = [e["name"] for e in main.get("env") or [] if e.get("name") in cmd.env]
            entry["env"] = {n: cmd.env[n] for n in [*names, "PATH"]}
        report.append(entry)
    console.print(yaml.safe_dump({"job": f"{job.kind}/{job.name}", "replicas": report},
                                 sort_keys=False), highlight=False, soft_wrap=True)
    return 0
