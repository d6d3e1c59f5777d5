"""A node lost under a running job, on the real cluster with its second node: the node shut
down (kubelet, containerd and every container killed at once), the job told, its pods there
deleted after --lost-node-grace (the job, restarting as a whole, restarts then, uncounted),
force-deleted once the node is marked out of service, made again on the first node, and the
job succeeds; the node started again runs nothing of them."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from testbed.node import NODE_NAME, SECOND_NODE, TestCluster
from tests.node.conftest import manager_as_shipped, manager_with
from tests.node.kube import Namespace, python_job, wait_for
from trainop.engine import lostnode

pytestmark = pytest.mark.node

GRACE = 5
# Each rank writes down where it runs, then waits for the test's word.
SCRIPT = ("import os, time\n"
          "from pathlib import Path\n"
          "state = Path('/state')\n"
          "with open(state / 'started', 'a') as f:\n"
          "    f.write(f\"{os.environ['HOSTNAME']} {os.environ['NODE']}\\n\")\n"
          "while not (state / 'go').exists():\n"
          "    time.sleep(0.2)\n")


@pytest.fixture
def lost_node_manager(cluster: TestCluster, manager: None) -> Iterator[None]:
    """The deployed manager with a shorter --lost-node-grace than the shipped one (the
    last given is taken)."""
    try:
        manager_with(cluster, f"--lost-node-grace={GRACE}")
        yield
    finally:
        manager_as_shipped(cluster)


def job_across_nodes(state_dir: str) -> dict[str, Any]:
    """A PyTorchJob restarting as a whole by making its pods again (not in place, as the
    shipped manager would), whose master runs on the first node and whose workers would
    rather run on the second."""
    job = python_job("PyTorchJob", "spread", {"Master": 1, "Worker": 2}, SCRIPT,
                     restart="OnFailure", spec={"runPolicy": {"restartScope": "Job",
                                                              "restartInPlace": False}})
    for rtype, rspec in job["spec"]["pytorchReplicaSpecs"].items():
        spec = rspec["template"]["spec"]
        spec["volumes"].append({"name": "state", "hostPath": {"path": state_dir}})
        main = spec["containers"][0]
        main["volumeMounts"].append({"name": "state", "mountPath": "/state"})
        main["env"] = [{"name": "NODE", "valueFrom": {"fieldRef": {
            "fieldPath": "spec.nodeName"}}}]
        if rtype == "Master":
            spec["nodeSelector"] = {"kubernetes.io/hostname": NODE_NAME}
        else:
            spec["affinity"] = {"nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100,
                    "preference": {"matchExpressions": [{
                        "key": "kubernetes.io/hostname", "operator": "In",
                        "values": [SECOND_NODE]}]}}]}}
    return job


def test_a_job_restarts_from_a_lost_node_on_the_other_and_nothing_runs_twice(
        cluster: TestCluster, lost_node_manager: None) -> None:
    second = cluster.start_second_node()
    try:
        with Namespace(cluster, "lost") as ns:
            state = cluster.workdir / "state" / ns.name
            state.mkdir(parents=True)
            state.chmod(0o777)
            ns.apply(job_across_nodes(str(state)))
            ns.wait_running(3)
            placed = {p["metadata"]["name"]: (p["spec"]["nodeName"], p["metadata"]["uid"])
                      for p in ns.items("pods")}
            assert {n: node for n, (node, _) in placed.items()} == {
                "spread-master-0": NODE_NAME, "spread-worker-0": SECOND_NODE,
                "spread-worker-1": SECOND_NODE}, placed
            wait_for("every rank to start", lambda: len(
                (state / "started").read_text().splitlines()) == 3
                if (state / "started").exists() else None, 60)

            second.shut_down()
            down = time.monotonic()
            waiting = wait_for("the workers told waiting for their node", lambda: [
                w for w in (ns.get("PyTorchJob", "spread") or {}).get("status", {}).get(
                    "waitingReplicas") or [] if w["reason"] == lostnode.REASON], 90)
            told = time.monotonic() - down
            assert sorted(w["pod"] for w in waiting) == ["spread-worker-0",
                                                         "spread-worker-1"], waiting
            assert all(w["message"].startswith(f"node {SECOND_NODE} has not been Ready")
                       for w in waiting), waiting
            warnings = [e for e in ns.items("events") if e["reason"] == lostnode.REASON]
            assert {e["type"] for e in warnings} == {"Warning"}, warnings
            assert all(SECOND_NODE in e["message"] for e in warnings), warnings

            # after the grace the workers are deleted, and stay Terminating: no kubelet
            # confirms that their containers ended, so no copy is made; the job restarts
            # as a whole (its master cannot go on without them), not counted
            def deleted() -> bool:
                return all((ns.get("pod", n) or {}).get("metadata", {}).get(
                    "deletionTimestamp") for n in ("spread-worker-0", "spread-worker-1"))
            wait_for("the workers deleted", deleted, GRACE + 30)
            time.sleep(3)
            pods = {p["metadata"]["name"]: p["metadata"]["uid"] for p in ns.items("pods")}
            assert {n: pods.get(n) for n in ("spread-worker-0", "spread-worker-1")} == {
                n: placed[n][1] for n in ("spread-worker-0", "spread-worker-1")}, pods
            message = ("PyTorchJob spread is restarting because spread-worker-0, "
                       "spread-worker-1 lost their node (not counted); all replicas restart.")
            restarts = [e for e in ns.items("events") if e["reason"] == "PyTorchJobRestarting"]
            assert [(e["type"], e["message"]) for e in restarts] == [("Warning", message)]

            # an admin says the node is down: the workers go at once, made again on the
            # first node, and the job runs its next attempt without a restart counted
            cluster.kubectl("taint", "node", SECOND_NODE,
                            f"{lostnode.OUT_OF_SERVICE}=nodeshutdown:NoExecute")

            def replaced() -> bool:
                now = ns.items("pods")
                return len(now) == 3 and all(
                    p["metadata"]["uid"] != placed[p["metadata"]["name"]][1] and
                    p["spec"].get("nodeName") == NODE_NAME and
                    p["status"].get("phase") == "Running" for p in now)
            wait_for("every rank running again on the first node", replaced, 120)
            recovered = time.monotonic() - down
            print(f"lost node: told {told:.1f} s after it stopped, running again on the "
                  f"first node {recovered:.1f} s after")
            job = ns.get("PyTorchJob", "spread")
            assert job is not None
            types = {c["type"] for c in job["status"]["conditions"] if c["status"] == "True"}
            assert "Running" in types and "Failed" not in types, job["status"]["conditions"]
            assert not any(rs.get("restarts") for rs in
                           job["status"]["replicaStatuses"].values()), job["status"]
            assert "lastFailure" not in job["status"], job["status"]

            # the node comes back: the kubelet finds its pods gone and starts none of them
            cluster.start_second_node()
            cluster.kubectl("taint", "node", SECOND_NODE, f"{lostnode.OUT_OF_SERVICE}-")
            time.sleep(10)
            assert second.pod_pids() == set()
            running = [line for line in second.ctr("tasks", "ls").stdout.splitlines()[1:]
                       if "RUNNING" in line]
            assert running == [], running
            (state / "go").touch()
            done = ns.succeeds("PyTorchJob", "spread", timeout=120)
            assert not any(rs.get("restarts") for rs in
                           done["status"]["replicaStatuses"].values()), done["status"]
            started = sorted((state / "started").read_text().splitlines())
            assert started == [
                f"spread-master-0 {NODE_NAME}", f"spread-master-0 {NODE_NAME}",
                f"spread-worker-0 {NODE_NAME}", f"spread-worker-0 {SECOND_NODE}",
                f"spread-worker-1 {NODE_NAME}", f"spread-worker-1 {SECOND_NODE}"], started
    finally:
        cluster.remove_second_node()
