"""`trainop describe` against the real API server, with the manager running: one screen
says which replica waits, and why."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from testbed.apiserver import TestAPIServer
from tests.integration.kube import Kube, Manager, wait_for
from tests.jobs import manifest

pytestmark = pytest.mark.integration


def describe(apiserver: TestAPIServer, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trainop.cli", "describe", *args, "--kubeconfig",
         str(apiserver.kubeconfig)], capture_output=True, text=True, timeout=60,
        env={**os.environ, "COLUMNS": "220"}, check=False)


def test_describe_shows_each_replica_and_why_one_waits(apiserver: TestAPIServer, kube: Kube,
                                                       manager: Manager) -> None:
    kube.apply(manifest("PyTorchJob", {"Master": 1, "Worker": 1}, name="pt"))
    kube.wait_pods(2)
    kube.set_pod("pt-master-0", "Running")
    unschedulable = {"phase": "Pending", "conditions": [{
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
        "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."}]}
    kube.kubectl("patch", "pod", "pt-worker-0", "--subresource=status", "--type=merge", "-p",
                 json.dumps({"status": unschedulable}))
    wait_for("the job to say its worker waits", lambda: (
        kube.job("PyTorchJob", "pt").get("status") or {}).get("waitingReplicas"))
    # a pod an earlier job of the same name left (its labels, not its owner) is not shown
    kube.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pt-worker-9", "labels": {
        "training.kubeflow.org/job-name": "pt", "training.kubeflow.org/replica-type": "worker",
        "training.kubeflow.org/replica-index": "9"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    out = describe(apiserver, "pytorchjob/pt", "-n", kube.ns)
    assert out.returncode == 0, out.stderr
    lines = [" ".join(line.replace("│", " ").split()) for line in out.stdout.splitlines()]
    assert f"PyTorchJob {kube.ns}/pt" in lines[0]
    assert any(line.startswith("master-0 pt-master-0 Running") for line in lines), lines
    assert not any("pt-worker-9" in line for line in lines), lines
    assert any(line.startswith("worker-0 pt-worker-0 Pending") and
               "Unschedulable: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu." in line
               for line in lines), lines
    assert "Running True PyTorchJobRunning: PyTorchJob pt is running." in lines, lines
    assert any(line.startswith("waiting pt-worker-0: Unschedulable: 0/3 nodes") for line in
               lines), lines


def test_describe_says_in_one_line_what_it_cannot_show(apiserver: TestAPIServer,
                                                       kube: Kube) -> None:
    missing = describe(apiserver, "pytorchjobs/nope", "-n", kube.ns)
    assert (missing.returncode, missing.stderr) == (
        2, f"trainop: describe: PyTorchJob {kube.ns}/nope not found\n")
    bad = describe(apiserver, "deployment/x")
    assert bad.returncode == 2
    assert bad.stderr.startswith("trainop: describe deployment/x: give KIND/NAME, KIND one of ")
    assert len(bad.stderr.splitlines()) == 1
