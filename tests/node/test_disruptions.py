"""Failures that are the cluster's, on the real node, beside the Kubernetes Job API: a pod
evicted through the eviction API, a replica preempted by a higher-priority pod, and a
podFailurePolicy rule that fails both a Job and a trainop job alike."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from testbed import images
from testbed.node import TestCluster
from tests.node.kube import Namespace, pod, python_job, wait_for, with_host_python

pytestmark = pytest.mark.node

# the first run waits to be evicted; the one made after it ends at once
ONCE = ("import sys, time\n"
        "from pathlib import Path\n"
        "marker = Path('/state/ran-once')\n"
        "if not marker.exists():\n"
        "    marker.touch(); print('first run', flush=True); time.sleep(300)\n"
        "print('second run', flush=True)\n")
IGNORE_DISRUPTIONS = {"rules": [{"action": "Ignore",
                                 "onPodConditions": [{"type": "DisruptionTarget"}]}]}


def _state(cluster: TestCluster, ns: Namespace, name: str, spec: dict[str, Any]) -> None:
    """A host folder at /state that outlives the pod (the marker of its first run)."""
    state = cluster.workdir / "state" / ns.name / name
    state.mkdir(parents=True)
    spec["volumes"].append({"name": "state", "hostPath": {"path": str(state)}})
    spec["containers"][0].setdefault("volumeMounts", []).append(
        {"name": "state", "mountPath": "/state"})


def batch_job(name: str, script: str, **spec: Any) -> dict[str, Any]:
    """A Kubernetes Job of one pod running `script` (restartPolicy Never)."""
    pod_spec = with_host_python({
        "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "main", "image": images.PYTHON,
                        "command": ["python3", "-c", script]}]})
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"backoffLimit": 0, "template": {"spec": pod_spec}, **spec}}


def evict(ns: Namespace, pod_name: str) -> None:
    body = {"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": pod_name, "namespace": ns.name}}
    ns.kubectl("create", "--raw", f"/api/v1/namespaces/{ns.name}/pods/{pod_name}/eviction",
               "-f", "-", input=json.dumps(body))


def _running_pod(ns: Namespace, selector: str) -> str:
    return wait_for(f"a running pod of {selector}", lambda: next(
        (p["metadata"]["name"] for p in ns.items("pods", selector)
         if p["status"].get("phase") == "Running"
         and not p["metadata"].get("deletionTimestamp")), None), 120)


def test_an_evicted_pod_is_made_again_and_counted_nowhere_as_under_the_job_api(
        cluster: TestCluster, manager: None) -> None:
    # restartPolicy Never and backoffLimit 0: one counted failure would end either job
    job = python_job("PyTorchJob", "evicted", {"Master": 1}, ONCE,
                     spec={"runPolicy": {"backoffLimit": 0,
                                         "podFailurePolicy": IGNORE_DISRUPTIONS}})
    batch = batch_job("evicted-batch", ONCE, podFailurePolicy=IGNORE_DISRUPTIONS)
    with Namespace(cluster, "evict") as ns:
        _state(cluster, ns, "trainop", job["spec"]["pytorchReplicaSpecs"]["Master"][
            "template"]["spec"])
        _state(cluster, ns, "batch", batch["spec"]["template"]["spec"])
        ns.apply(job, batch)
        evict(ns, _running_pod(ns, "training.kubeflow.org/job-name=evicted"))
        evict(ns, _running_pod(ns, "batch.kubernetes.io/job-name=evicted-batch"))
        done = ns.succeeds("PyTorchJob", "evicted", timeout=180)
        assert "second run" in ns.logs("evicted-master-0")
        wait_for("the Job to complete", lambda: any(
            c["type"] == "Complete" and c["status"] == "True"
            for c in ((ns.get("job", "evicted-batch") or {}).get("status") or {}).get(
                "conditions") or []), 120)
        # the same rule, the same outcome: neither counts the eviction against its limit
        statuses = done["status"]["replicaStatuses"]["Master"]
        assert "restarts" not in statuses, statuses
        assert not any(c["type"] == "Restarting" for c in done["status"]["conditions"])


def test_a_preempted_replica_is_made_again_and_says_why_it_waits(
        cluster: TestCluster, manager: None) -> None:
    # the node has 2 CPUs: the worker asks for most of them, then a pod of a higher
    # priority asks for as much, and the scheduler preempts the worker for it
    job = python_job("PyTorchJob", "preempted", {"Master": 1, "Worker": 1},
                     "import time; time.sleep(45)", spec={"runPolicy": {"backoffLimit": 0}})
    specs = job["spec"]["pytorchReplicaSpecs"]
    specs["Worker"]["template"]["spec"]["containers"][0]["command"] = [
        "python3", "-c", "import time; time.sleep(5)"]
    specs["Worker"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "1200m"}}
    high = pod("urgent", ["python3", "-c", "import time; time.sleep(600)"])
    high["spec"]["priorityClassName"] = "trainop-test-urgent"
    high["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1200m"}}
    priority = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": "trainop-test-urgent"}, "value": 1000000}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(priority))
    try:
        with Namespace(cluster, "preempt") as ns:
            ns.apply(job)
            first = _running_pod(ns, "training.kubeflow.org/replica-type=worker")
            uid = ns.get("pod", first)["metadata"]["uid"]  # type: ignore[index]
            ns.apply(high)
            # the worker is made again, and waits for a node while the urgent pod runs
            waiting = wait_for("the remade worker to wait for a node", lambda: next((
                w for w in (ns.get("pytorchjob", "preempted") or {}).get("status", {}).get(
                    "waitingReplicas") or [] if w["reason"] == "Unschedulable"), None), 90)
            assert waiting["pod"] == "preempted-worker-0", waiting
            assert "Insufficient cpu" in waiting["message"], waiting
            remade = ns.get("pod", "preempted-worker-0")
            assert remade is not None and remade["metadata"]["uid"] != uid
            ns.kubectl("delete", "pod", "urgent", "--wait=false")
            done = ns.succeeds("PyTorchJob", "preempted", timeout=180)
            assert "restarts" not in done["status"]["replicaStatuses"]["Worker"]
            assert "waitingReplicas" not in done["status"]
    finally:
        cluster.kubectl("delete", "priorityclass", "trainop-test-urgent", check=False)


def test_a_fail_job_rule_fails_a_job_and_a_trainop_job_alike(
        cluster: TestCluster, manager: None) -> None:
    policy = {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In",
                                                              "values": [42]}}]}
    script = "import sys; sys.exit(42)"
    # without the rule the Job would retry five times, and trainop's job fail as
    # PyTorchJobFailed (restartPolicy Never): the rule decides first, for both
    job = python_job("PyTorchJob", "fortytwo", {"Master": 1}, script, restart="Never",
                     spec={"runPolicy": {"backoffLimit": 5, "podFailurePolicy": policy}})
    batch = batch_job("fortytwo-batch", script, podFailurePolicy=policy, backoffLimit=5)
    batch["spec"]["template"]["spec"]["containers"][0]["name"] = "pytorch"
    with Namespace(cluster, "failjob") as ns:
        ns.apply(job, batch)
        done = ns.condition("PyTorchJob", "fortytwo", "Failed", timeout=120)
        ours = next(c for c in done["status"]["conditions"] if c["type"] == "Failed")

        def failed() -> dict[str, Any] | None:
            conds = ((ns.get("job", "fortytwo-batch") or {}).get("status") or {}).get(
                "conditions") or []
            return next((c for c in conds if c["type"] == "Failed" and c["status"] == "True"),
                        None)
        theirs = wait_for("the Job to fail", failed, 120)
        assert ours["reason"] == theirs["reason"] == "PodFailurePolicy", (ours, theirs)

        def shape(message: str) -> str:  # the pods' names differ
            return re.sub(r"pod \S+/\S+ failed", "pod NS/POD failed", message)
        assert shape(ours["message"]) == shape(theirs["message"]) == (
            "Container pytorch for pod NS/POD failed with exit code 42 matching FailJob rule "
            "at index 0"), (ours, theirs)
