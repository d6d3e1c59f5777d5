"""Whole-job restarts in place on the real node: the kubelet restarts every container of
every pod (RestartAllContainers), the pods kept, and the job's next attempt starts once
every pod waits at its barrier."""

from __future__ import annotations

import pytest

from testbed.node import TestCluster
from tests.node.kube import Namespace, python_job, wait_for
from trainop.engine import inplace

pytestmark = pytest.mark.node

# Rank 2 fails once (143: retryable under ExitCode); the other ranks would wait for ever in
# the first attempt. In the next attempt every rank notes that it runs, and the master
# (whose end is the job's) ends once all three have.
SCRIPT = ("import os, sys, time\n"
          "from pathlib import Path\n"
          "state = Path('/state')\n"
          "rank = os.environ['RANK']\n"
          "if (state / 'failed-once').exists():\n"
          "    print(f'rank {rank}: next attempt', flush=True)\n"
          "    (state / f'next-{rank}').touch()\n"
          "    while rank == '0' and len(list(state.glob('next-*'))) < 3:\n"
          "        time.sleep(0.2)\n"
          "    sys.exit(0)\n"
          "print(f'rank {rank}: first attempt', flush=True)\n"
          "if rank == '2':\n"
          "    time.sleep(3); (state / 'failed-once').touch(); sys.exit(143)\n"
          "time.sleep(600)\n")


def test_a_job_restarted_in_place_succeeds_with_the_same_pods(
        cluster: TestCluster, manager: None) -> None:
    job = python_job("PyTorchJob", "inplace", {"Master": 1, "Worker": 2}, SCRIPT,
                     restart="ExitCode", spec={"runPolicy": {
                         "restartScope": "Job", "restartInPlace": True, "backoffLimit": 2}})
    with Namespace(cluster, "inplace") as ns:
        state = cluster.workdir / "state" / ns.name
        state.mkdir(parents=True)
        state.chmod(0o777)
        for rspec in job["spec"]["pytorchReplicaSpecs"].values():
            spec = rspec["template"]["spec"]
            spec["volumes"].append({"name": "state", "hostPath": {"path": str(state)}})
            spec["containers"][0]["volumeMounts"].append({"name": "state",
                                                          "mountPath": "/state"})
        ns.apply(job)
        ns.wait_running(3)
        uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in ns.items("pods")}
        done = ns.succeeds("PyTorchJob", "inplace", timeout=240)
        pods = ns.items("pods")
        # the same pods, each restarted once (every container: the barrier, the PyTorch
        # init container, the main one and the agent), each rank in its next attempt
        assert {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods} == uids
        for p in pods:
            name = p["metadata"]["name"]
            assert p["metadata"]["annotations"][inplace.ATTEMPT] == "1", name
            main = next(c for c in p["status"]["containerStatuses"] if c["name"] == "pytorch")
            assert main["restartCount"] == 1, (name, main)
            assert "next attempt" in ns.logs(name, "pytorch"), name
            assert "attempt 1" in ns.logs(name, inplace.BARRIER), name
        # counted as one restart, the failure told as it was
        assert done["status"]["replicaStatuses"]["Worker"]["restarts"] == 1
        last = done["status"]["lastFailure"]
        assert (last["pod"], last["exitCode"]) == ("inplace-worker-1", 143), last
        events = [e for e in ns.items("events")
                  if e["involvedObject"]["name"] == "inplace"]
        reasons = [e["reason"] for e in events]
        assert inplace.RESTARTING in reasons and inplace.RELEASED_REASON in reasons, reasons
        assert "SuccessfulDeletePod" not in reasons, reasons
        wait_for("the pods to end", lambda: all(
            p["status"].get("phase") == "Succeeded" for p in ns.items("pods")) or None, 60)
