"""The PyTorch DDP example (trainop/examples/pytorch-ddp.yaml) with one rank killed
mid-training under `trainop run --restart-in-place`: the time from the kill (SIGKILL to
worker 1's process, once the master has printed its second epoch) until every rank has
joined the next attempt's process group, training again.

    python -m bench.ddp_kill [--repeat 3]

The job is the example as shipped but for `restartScope: Job` (the whole job restarts:
the other ranks, blocked in their collective, are stopped and started again with it) and
more epochs (so that the kill falls mid-training). The time includes what a restart of a
PyTorch rank costs anyway: a new interpreter importing torch and joining the group.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import yaml

from bench.lib import REPO, RESULTS, machine

EXAMPLE = REPO / "trainop" / "examples" / "pytorch-ddp.yaml"
EPOCHS = 30
KILLED = "worker-1"
KILLED_RANK = 2
"""worker-1's rank (the master is rank 0)."""
JOINED = re.compile(r"^\[(\S+)\] rank (\d+) of world size 3 joined")


def job_text(epochs: int = EPOCHS) -> str:
    """The example restarting as a whole, training for `epochs` epochs."""
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["spec"]["runPolicy"]["restartScope"] = "Job"
    for spec in doc["spec"]["pytorchReplicaSpecs"].values():
        # (one template, which YAML's anchor gives both replica types)
        command = spec["template"]["spec"]["containers"][0]["command"]
        command[-1] = command[-1].replace("range(8)", f"range({epochs})")
        assert f"range({epochs})" in command[-1]
    return yaml.safe_dump(doc)


@dataclass(frozen=True)
class Killed:
    returncode: int
    output: str
    """What `trainop run` printed, every line."""
    seconds: float
    """From the kill until every rank joined again."""


def killed_mid_training(workdir: Path, timeout: float = 600) -> Killed:
    """Run the job, kill worker 1's rank once the master printed epoch 1, and run on to
    the end."""
    marker = f"TRAINOP_DDP_KILL={uuid.uuid4().hex}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainop.cli", "run", "--no-live", "--restart-in-place",
         "--env", marker, "--workdir", str(workdir), "-"], cwd=workdir.parent,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(job_text())
    proc.stdin.close()
    lines: list[str] = []
    killed_at = resumed = None
    joined: set[int] = set()
    deadline = time.monotonic() + timeout
    try:
        for line in proc.stdout:
            lines.append(line)
            if killed_at is None and line.startswith("[master-0] epoch 1 loss"):
                os.kill(rank_process(marker, KILLED_RANK), signal.SIGKILL)
                killed_at = time.monotonic()
            elif killed_at is not None and resumed is None and (m := JOINED.match(line)):
                joined.add(int(m.group(2)))
                if len(joined) == 3:
                    resumed = time.monotonic()
            if time.monotonic() > deadline:
                raise TimeoutError(f"the job did not end within {timeout:.0f}s")
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # trainop run stops every rank it started
            proc.wait(60)
    output = "".join(lines)
    if killed_at is None or resumed is None:
        raise RuntimeError(f"no rank killed, or training never resumed:\n{output}")
    return Killed(proc.returncode, output, resumed - killed_at)


def rank_process(marker: str, rank: int) -> int:
    """The PID of the rank's process (its environment holds `marker` and RANK)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = b"\0" + (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker.encode() in env and f"\0RANK={rank}\0".encode() in env:
            return int(entry.name)
    raise LookupError(f"no process of rank {rank}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    seconds = []
    for i in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="ddp-kill-") as tmp:
            run = killed_mid_training(Path(tmp) / "run")
        if run.returncode != 0:
            sys.exit(f"the job did not succeed:\n{run.output}")
        seconds.append(run.seconds)
        print(f"run {i + 1}: {run.seconds:.2f} s from the kill to training resumed", flush=True)
    here = machine().split(", kube-apiserver")[0]  # (no API server in this one)
    text = (f"# The DDP example, one rank killed mid-training, locally\n\n"
            f"`python -m bench.ddp_kill --repeat {args.repeat}` on {here}, "
            f"{time.strftime('%Y-%m-%d')}: `trainop run --restart-in-place` of "
            f"trainop/examples/pytorch-ddp.yaml with `restartScope: Job` and {EPOCHS} "
            f"epochs; SIGKILL to {KILLED}'s rank after the master's second epoch.\n\n"
            f"| from the kill to every rank joined again | median | runs |\n|---|---|---|\n"
            f"| trainop run, processes in place | {statistics.median(seconds):.2f} s | "
            f"{', '.join(f'{s:.2f}' for s in seconds)} |\n")
    (RESULTS / "ddp-kill.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
