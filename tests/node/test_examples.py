"""Every example of examples/, changed only in image and volumes, submitted with
`kubectl apply`, trains in real pods on the real node and ends Succeeded; the training's own
output is read back with `kubectl logs`."""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from testbed.node import TestCluster
from tests.e2e.conftest import EXAMPLES, losses, ranks_joined
from tests.node.kube import Namespace, with_host_python
from tests.require import cannot_run
from trainop.api.kinds import KINDS
from trainop.engine.labels import JOB_NAME

pytestmark = pytest.mark.node


def on_this_node(example: Path) -> dict[str, Any]:
    """The example's job with each pod template on the python image and the host's Python."""
    job = yaml.safe_load(example.read_text())
    kind = KINDS[job["kind"]]
    for spec in job["spec"][kind.replica_specs_field].values():
        # YAML anchors share one template among replica types: change each its own copy
        spec["template"] = copy.deepcopy(spec["template"])
        with_host_python(spec["template"]["spec"])
    return dict(job)


def run_to_the_end(ns: Namespace, kind: str, job: str, timeout: float = 300
                   ) -> tuple[dict[str, Any], str]:
    """Wait for the job to end while following each pod's log from its start (cleanPodPolicy
    Running deletes the workers still finishing when the master succeeds, and their logs
    with them); returns the job and what every pod printed, each line prefixed with its
    pod's name."""
    follow: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}
    deadline = time.monotonic() + timeout
    try:
        while True:
            for pod in ns.items("pods", f"{JOB_NAME}={job}"):
                name = pod["metadata"]["name"]
                started = pod["status"].get("phase") in ("Running", "Succeeded", "Failed")
                proc, out = follow.get(name, (None, ns.cluster.workdir / f"{ns.name}-{name}"))
                # (again where it gave up before the container ran: nothing to show yet)
                if started and (proc is None or (proc.poll() and not out.stat().st_size)):
                    follow[name] = (subprocess.Popen(
                        ["kubectl", "--kubeconfig", str(ns.cluster.kubeconfig), "-n", ns.name,
                         "logs", "-f", name], stdout=out.open("wb"),
                        stderr=subprocess.DEVNULL), out)
            done = ns.get(kind, job)
            conditions = (done or {}).get("status", {}).get("conditions", [])
            if done and any(c["type"] in ("Succeeded", "Failed") and c["status"] == "True"
                            for c in conditions):
                break
            assert time.monotonic() < deadline, f"{kind} {job} did not end in {timeout}s"
            time.sleep(0.5)
        for proc, _ in follow.values():  # the last lines of pods still there
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)
    finally:
        for proc, _ in follow.values():
            proc.kill()
            proc.wait()
    logs = "\n".join(f"[{name}] {line}" for name in sorted(follow)
                     for line in follow[name][1].read_text(errors="replace").splitlines())
    return done, logs


@pytest.mark.parametrize(("example", "world"), [
    ("pytorch-ddp.yaml", 3), ("pytorch-elastic.yaml", 2), ("tensorflow.yaml", 2),
    ("xgboost.yaml", 3), ("jax.yaml", 2), ("mpi.yaml", 2), ("mpi-ssh.yaml", 2),
    ("mpi-v2beta1.yaml", 2), ("mxnet.yaml", 0), ("paddle.yaml", 0)])
def test_example_trains_in_real_pods(cluster: TestCluster, manager: None, example: str,
                                     world: int) -> None:
    if example == "paddle.yaml" and importlib.util.find_spec("paddle") is None:
        cannot_run("PaddlePaddle is not installed here (pip install -e '.[e2e]')")
    job = on_this_node(EXAMPLES / example)
    name, kind = job["metadata"]["name"], job["kind"]
    with Namespace(cluster, example.removesuffix(".yaml")) as ns:
        ns.apply(job)
        done, logs = run_to_the_end(ns, kind, name)
        conditions = {c["type"]: c for c in done["status"]["conditions"]}
        assert conditions.get("Succeeded", {}).get("status") == "True", (conditions, logs)
        if world:
            assert ranks_joined(logs) == {(r, world) for r in range(world)}, logs
        if example.startswith("mpi"):
            assert logs.count("allreduce sum 3") == 2, logs
        elif example == "mxnet.yaml":
            assert "scheduler: registered ['server', 'worker', 'worker']" in logs, logs
        elif example == "paddle.yaml":  # paddle.distributed.launch's own check, per rank
            assert logs.count("Distributed training completed") >= 2, logs
        elif world:
            curve = losses(logs)
            assert len(curve) >= 5 and curve[-1] < curve[0] * 0.8, (curve, logs)
