"""The PyTorch DDP example (trainop/examples/pytorch-ddp.yaml) with one rank killed
mid-training under `trainop run`: the time from the kill (SIGKILL to
worker 1's process, once the master has printed its second epoch) until every rank has
joined the next attempt's process group, training again.

    python -m bench.ddp_kill [--repeat 3] [--node]

With --node the same job runs on the real node of tests/node (testbed/node.py: kubelet,
containerd, scheduler, cluster DNS) under a manager with --rank-supervisor-image, each rank
in a pod on the python image with the host's Python: the supervisors stop and start the
ranks' processes, the containers kept. The kill is SIGKILL to worker 1's rank from the host;
the resumed time is the log's own (containerd's timestamps) of the last rank's second
"joined" line. Needs root and what the real-node suite needs (hack/node-deps.sh,
hack/test-assets.sh).

The job is the example as shipped but for `restartScope: Job` and `restartInPlace: true`
(the whole job restarts in place: the other ranks, blocked in their collective, are stopped
and started again with it) and more epochs (so that the kill falls mid-training). The time
includes what a restart of a PyTorch rank costs anyway: a new interpreter importing torch and
joining the group.
"""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import json
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
from typing import Any

import yaml

from bench.lib import REPO, RESULTS, machine, wait
from bench.restart import SUPERVISOR_IMAGE, supervisor_image
from testbed import images
from testbed.manager import ManagerProcess
from testbed.node import TestCluster
from trainop.engine import supervised

EXAMPLE = REPO / "trainop" / "examples" / "pytorch-ddp.yaml"
EPOCHS = 30
KILLED = "worker-1"
KILLED_RANK = 2
"""worker-1's rank (the master is rank 0)."""
JOINED = re.compile(r"^\[(\S+)\] rank (\d+) of world size 3 joined")


def job_text(epochs: int = EPOCHS) -> str:
    """The example restarting as a whole in place, training for `epochs` epochs."""
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["spec"]["runPolicy"].update(restartScope="Job", restartInPlace=True)
    for spec in doc["spec"]["pytorchReplicaSpecs"].values():
        # (one template, which YAML's anchor gives both replica types)
        command = spec["template"]["spec"]["containers"][0]["command"]
        command[-1] = command[-1].replace("epochs = 8\n", f"epochs = {epochs}\n")
        assert f"epochs = {epochs}\n" in command[-1]
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
        [sys.executable, "-m", "trainop.cli", "run", "--no-live", "--env", marker,
         "--workdir", str(workdir), "-"], cwd=workdir.parent,
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
    """The PID of the rank's process (its environment holds `marker` and RANK; its
    supervisor's, which holds them too, is not it)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = b"\0" + (entry / "environ").read_bytes()
            exe = os.readlink(entry / "exe")
        except OSError:
            continue
        if marker.encode() in env and f"\0RANK={rank}\0".encode() in env and \
                not exe.endswith(supervised.BINARY.rsplit("/", 1)[1]):
            return int(entry.name)
    raise LookupError(f"no process of rank {rank}")


def on_node(repeat: int) -> list[float]:
    """Seconds from the kill to training resumed, `repeat` times on the real node."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the node taken down, as ^C
    cluster = TestCluster().start()
    manager: ManagerProcess | None = None
    try:
        cluster.kubectl("apply", "--server-side", "-k", str(REPO / "config" / "crd"))
        cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd",
                        "--all")
        cluster.kubectl("create", "namespace", NAMESPACE)
        cluster.import_image(supervisor_image(cluster.workdir))
        manager = ManagerProcess(
            cluster.kubeconfig, "--namespace", NAMESPACE, "--log-level", "warning",
            "--rank-supervisor-image", SUPERVISOR_IMAGE,
            log_path=RESULTS.parent / ".manager-ddp.log").wait_ready()
        return [node_once(cluster, NAMESPACE, f"ddp-{i}").seconds for i in range(repeat)]
    finally:
        if manager is not None:
            manager.stop()
        cluster.stop()


NAMESPACE = "bench-ddp"


@dataclass(frozen=True)
class OnNode:
    seconds: float
    """From the kill until every rank joined again."""
    job: dict[str, Any]
    """The job as it ended."""
    pods: list[dict[str, Any]]
    """Its pods as they were when every rank had joined again."""
    joined: dict[str, int]
    """Times each pod's rank joined, by pod."""


def node_once(cluster: TestCluster, namespace: str, name: str) -> OnNode:
    """The job as `name` in `namespace`, worker 1's rank killed after the master's second
    epoch, run to its end."""
    marker = f"TRAINOP_DDP_KILL={uuid.uuid4().hex}"
    doc = yaml.safe_load(job_text())
    doc["metadata"]["name"] = name
    volumes, mounts = images.python_volumes()
    for spec in doc["spec"]["pytorchReplicaSpecs"].values():
        pod = spec["template"] = copy.deepcopy(spec["template"])  # (YAML's anchor shares it)
        pod["spec"]["volumes"] = volumes
        (main,) = pod["spec"]["containers"]
        main.update(image=images.PYTHON, volumeMounts=mounts,
                    env=[{"name": k, "value": v} for k, v in [marker.split("=", 1)]])
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(doc))
    pods = [f"{name}-master-0", f"{name}-worker-0", f"{name}-worker-1"]

    def log(pod: str) -> list[str]:
        out = cluster.kubectl("logs", "-n", namespace, pod, "-c", "pytorch", "--timestamps",
                              check=False)
        return out.stdout.splitlines() if out.returncode == 0 else []
    wait("the master's second epoch", lambda: any(" epoch 1 loss" in line
                                                  for line in log(pods[0])), 600)
    os.kill(rank_process(marker, KILLED_RANK), signal.SIGKILL)
    killed = time.time()

    def joined_again() -> list[float] | None:
        times = []
        for pod in pods:
            joined = [line for line in log(pod) if "of world size 3 joined" in line]
            if len(joined) < 2:
                return None
            times.append(stamp(joined[1].split(" ", 1)[0]))
        return times
    resumed = max(wait("every rank joined again", joined_again, 300))
    pods_then = json.loads(cluster.kubectl("get", "pods", "-n", namespace, "-o", "json",
                                           ).stdout)["items"]
    joined = {pod: sum("of world size 3 joined" in line for line in log(pod)) for pod in pods}
    job = wait("the job to end", lambda: ended(cluster, namespace, name), 600)
    cluster.kubectl("delete", "-n", namespace, "pytorchjob", name, "--wait=false")
    return OnNode(resumed - killed, job, pods_then, joined)


def stamp(text: str) -> float:
    """A log line's RFC 3339 time (nanoseconds) as seconds since the epoch."""
    whole, _, frac = text.rstrip("Z").partition(".")
    return dt.datetime.fromisoformat(whole).replace(tzinfo=dt.UTC).timestamp() + float(
        f"0.{frac or 0}")


def ended(cluster: TestCluster, namespace: str, name: str) -> dict[str, Any] | None:
    """The job, once it ended."""
    job: dict[str, Any] = json.loads(cluster.kubectl("get", "pytorchjob", "-n", namespace, name,
                                                     "-o", "json").stdout)
    return job if any(c["type"] in ("Succeeded", "Failed") and c["status"] == "True"
                      for c in job.get("status", {}).get("conditions") or []) else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--node", action="store_true",
                        help="on the real node too (root), after the local runs")
    args = parser.parse_args()
    seconds = []
    for i in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="ddp-kill-") as tmp:
            run = killed_mid_training(Path(tmp) / "run")
        if run.returncode != 0:
            sys.exit(f"the job did not succeed:\n{run.output}")
        seconds.append(run.seconds)
        print(f"run {i + 1}: {run.seconds:.2f} s from the kill to training resumed", flush=True)
    rows = {"trainop run, processes in place": seconds}
    if args.node:
        node = on_node(args.repeat)
        print("on the node: " + ", ".join(f"{s:.2f}" for s in node) + " s", flush=True)
        rows["the real node, processes in place"] = node
    here = machine().split(", kube-apiserver")[0]  # (the node's releases: README)
    text = (f"# The DDP example, one rank killed mid-training\n\n"
            f"`python -m bench.ddp_kill --repeat {args.repeat}"
            f"{' --node' if args.node else ''}` on {here}, {time.strftime('%Y-%m-%d')}: "
            f"trainop/examples/pytorch-ddp.yaml with `restartScope: Job` and {EPOCHS} "
            f"epochs, restarted in place; SIGKILL to {KILLED}'s rank after the master's "
            f"second epoch.\n\n"
            f"| from the kill to every rank joined again | median | runs |\n|---|---|---|\n"
            + "".join(f"| {label} | {statistics.median(runs):.2f} s | "
                      f"{', '.join(f'{s:.2f}' for s in runs)} |\n"
                      for label, runs in rows.items()))
    (RESULTS / "ddp-kill.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
