"""Jobs that cannot start, on the real node: the kubelet's and the scheduler's reasons on
the job, the startup deadline, and a job deleted and applied again at once."""

from __future__ import annotations

from typing import Any

import pytest

from testbed.node import TestCluster
from tests.node.kube import Namespace, python_job, wait_for
from trainop.engine.labels import JOB_NAME

pytestmark = pytest.mark.node


def _waiting(ns: Namespace, kind: str, name: str) -> dict[str, dict[str, Any]]:
    job = ns.get(kind, name) or {}
    return {w["replicaType"]: w for w in job.get("status", {}).get("waitingReplicas") or []}


def test_replicas_that_cannot_start_say_why_and_the_startup_deadline_ends_the_job(
        cluster: TestCluster, manager: None) -> None:
    job = python_job("TFJob", "stuck", {"Chief": 1, "PS": 1, "Worker": 1},
                     "import time; time.sleep(600)",
                     spec={"runPolicy": {"startupDeadlineSeconds": 90,
                                         "cleanPodPolicy": "All"}})
    specs = job["spec"]["tfReplicaSpecs"]
    # no node fits the chief; the PS reads a ConfigMap that does not exist; the worker's
    # init container's image cannot be pulled (no registry is reachable from here)
    specs["Chief"]["template"]["spec"]["nodeSelector"] = {"trainop.test/none": "x"}
    specs["PS"]["template"]["spec"]["containers"][0]["env"] = [{"name": "X", "valueFrom": {
        "configMapKeyRef": {"name": "missing", "key": "k"}}}]
    specs["Worker"]["template"]["spec"]["initContainers"] = [{
        "name": "fetch", "image": "registry.invalid/missing:1", "command": ["true"]}]
    with Namespace(cluster, "stuck") as ns:
        ns.apply(job)
        waiting = wait_for("the three replicas to say why they wait", lambda: (
            w if set(w := _waiting(ns, "tfjob", "stuck")) == {"Chief", "PS", "Worker"}
            and w["Worker"]["reason"] != "ContainerCreating" else None), 80, 1)
        assert waiting["Chief"]["reason"] == "Unschedulable", waiting
        assert "node(s) didn't match Pod's node affinity/selector" in \
            waiting["Chief"]["message"], waiting
        assert waiting["PS"]["reason"] == "CreateContainerConfigError", waiting
        assert waiting["PS"]["message"].startswith('container tensorflow: configmap "missing"'), \
            waiting
        assert waiting["Worker"]["reason"] in ("ErrImagePull", "ImagePullBackOff"), waiting
        assert waiting["Worker"]["message"].startswith("init container fetch: "), waiting
        # each cause told once on the job, as a Warning naming the pod, in upstream's words
        told = [e for e in ns.items("events") if e["involvedObject"]["name"] == "stuck"
                and e["type"] == "Warning"]
        by_reason = {e["reason"]: e for e in told}
        assert by_reason["Unschedulable"]["message"].startswith(
            "Error pod stuck-chief-0 condition message: 0/1 nodes are available"), by_reason
        assert by_reason["CreateContainerConfigError"]["message"].startswith(
            "Error pod stuck-ps-0 container tensorflow waiting message: "), by_reason
        assert by_reason["Unschedulable"]["count"] == 1, by_reason
        # the deadline fails the job, naming a pod and its cause; cleanup as the policy says
        done = ns.condition("TFJob", "stuck", "Failed", timeout=120)
        failed = next(c for c in done["status"]["conditions"] if c["type"] == "Failed")
        assert failed["reason"] == "StartupDeadlineExceeded", failed
        assert failed["message"].startswith("TFJob stuck has failed because pod stuck-"), failed
        assert "did not start within 90s (" in failed["message"], failed
        assert "waitingReplicas" not in done["status"], done["status"]
        wait_for("the stuck pods to go", lambda: not ns.items("pods", f"{JOB_NAME}=stuck"), 60)
        assert sum(e.get("count", 1) for e in told if e["reason"] == "Unschedulable") == 1


def test_a_job_deleted_and_applied_again_at_once_waits_for_its_old_pods_and_runs(
        cluster: TestCluster, manager: None) -> None:
    # PID 1 ignores SIGTERM without a handler: each old pod stays Terminating for its grace
    job = python_job("PyTorchJob", "again", {"Master": 1, "Worker": 1},
                     "import time; print('training', flush=True); time.sleep(8)")
    for rspec in job["spec"]["pytorchReplicaSpecs"].values():
        rspec["template"]["spec"]["terminationGracePeriodSeconds"] = 15
    with Namespace(cluster, "again") as ns:
        ns.apply(job)
        ns.wait_running(2, 120)
        old = ns.get("pytorchjob", "again")
        assert old is not None
        ns.kubectl("delete", "pytorchjob", "again", "--wait=false")
        ns.apply(job)  # the same manifest, at once
        new = wait_for("the job applied again", lambda: (
            j if (j := ns.get("pytorchjob", "again")) and
            j["metadata"]["uid"] != old["metadata"]["uid"] else None), 30, 0.2)
        done = ns.succeeds("PyTorchJob", "again", timeout=180)
        assert done["metadata"]["uid"] == new["metadata"]["uid"]
        told = [e for e in ns.items("events") if e["involvedObject"].get("uid") ==
                new["metadata"]["uid"]]
        reasons = [e["reason"] for e in told]
        assert "CreateFailed" not in reasons, told
        # it said what it waited for, and then made both pods
        held = [e for e in told if e["reason"] == "NameInUse"]
        assert held and all(e["type"] == "Normal" for e in held), told
        assert any(e["message"].startswith("pod again-master-0 is waiting: Pod again-master-0 "
                                           "of an earlier PyTorchJob again is still there")
                   for e in held), held
        assert "SuccessfulCreatePod" in reasons, told
        assert "training" in ns.logs("again-master-0")


def test_the_last_failure_holds_the_node_container_and_the_end_of_the_log(
        cluster: TestCluster, manager: None) -> None:
    # the shipped Deployment's --fallback-to-logs-on-error: the program writes no
    # termination message, and the kubelet keeps the end of its log as one
    job = python_job("PyTorchJob", "lastwords", {"Master": 1},
                     "import sys; print('loading shard 7', flush=True); "
                     "print('ValueError: shard 7 is corrupt', flush=True); sys.exit(3)")
    with Namespace(cluster, "lastwords") as ns:
        ns.apply(job)
        done = ns.condition("PyTorchJob", "lastwords", "Failed", timeout=120)
        last = done["status"]["lastFailure"]
        pod = ns.get("pod", "lastwords-master-0")
        assert pod is not None
        assert (last["pod"], last["container"], last["exitCode"]) == (
            "lastwords-master-0", "pytorch", 3), last
        assert last["node"] == pod["spec"]["nodeName"], last
        assert last["message"].endswith("ValueError: shard 7 is corrupt\n"), last
        term = pod["status"]["containerStatuses"][0]["state"]["terminated"]
        assert last["time"] == term["finishedAt"], (last, term)
