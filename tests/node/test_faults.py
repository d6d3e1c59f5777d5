"""Faults on the real node, with the manager deployed in the cluster: the kubelet's own
restarts, exit codes, the garbage collector, a manager killed mid-creation, suspension."""

from __future__ import annotations

import os
import signal

import pytest

from testbed.node import TestCluster
from tests.node.conftest import wait_for_webhook
from tests.node.kube import Namespace, python_job, wait_for
from trainop.engine.labels import JOB_NAME

pytestmark = pytest.mark.node


def test_on_failure_restarts_in_place_until_the_backoff_limit(
        cluster: TestCluster, manager: None) -> None:
    # the kubelet restarts the container in place: the pod never turns Failed, its
    # restartCount grows, and upstream counts those restarts against backoffLimit
    # (pkg/controller.v1/common/job.go:PastBackoffLimit, restartPolicy OnFailure)
    job = python_job("PyTorchJob", "backoff", {"Master": 1},
                     "import sys; print('failing', flush=True); sys.exit(1)",
                     restart="OnFailure",
                     spec={"runPolicy": {"backoffLimit": 2, "cleanPodPolicy": "Running"}})
    with Namespace(cluster, "backoff") as ns:
        ns.apply(job)
        done = ns.condition("PyTorchJob", "backoff", "Failed", "Succeeded", timeout=240)
        failed = next(c for c in done["status"]["conditions"] if c["type"] == "Failed")
        assert failed["reason"] == "PyTorchJobFailed"
        # pkg/controller.v1/common/job.go:210 (release-1.9)
        assert failed["message"].startswith(
            "Job backoff has failed because it has reached the specified backoff limit"), failed
        # trainop's facts after upstream's words: the pod and the kubelet's last exit
        assert "backoff-master-0 exited with code 1 (Error)" in failed["message"], failed
        last = done["status"]["lastFailure"]
        assert last["pod"] == "backoff-master-0" and last["exitCode"] == 1, last
        # the job's pods go (cleanPodPolicy Running): then none is counted active
        wait_for("the failed job's pods to go", lambda: not ns.items(
            "pods", f"{JOB_NAME}=backoff"), 60)
        def none_active() -> bool:
            job = ns.get("pytorchjob", "backoff") or {}
            return not any(rs.get("active") for rs in job["status"]["replicaStatuses"].values())
        wait_for("replica statuses without active pods", none_active, 30)


def test_exit_code_137_recreates_the_pod_and_the_job_succeeds(
        cluster: TestCluster, manager: None) -> None:
    # ExitCode: 128+ (a signal) is retryable and the pod is made again. The first run goes
    # past its memory limit and the kernel kills it (137, OOMKilled); the second succeeds.
    # (A container's PID 1 cannot SIGKILL itself: the kernel ignores that.)
    script = ("from pathlib import Path\n"
              "marker = Path('/state/killed-once')\n"
              "if not marker.exists():\n"
              "    marker.touch(); print('growing', flush=True)\n"
              "    hog = [bytearray(16 << 20) for _ in range(64)]\n"
              "print('second run done', flush=True)\n")
    job = python_job("TFJob", "retry", {"Worker": 1}, script, restart="ExitCode")
    pod_spec = job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]
    pod_spec["containers"][0]["resources"] = {"limits": {"memory": "128Mi"}}
    with Namespace(cluster, "exitcode") as ns:
        state = cluster.workdir / "state" / ns.name
        state.mkdir(parents=True)
        pod_spec["volumes"].append({"name": "state", "hostPath": {"path": str(state)}})
        pod_spec["containers"][0]["volumeMounts"].append({"name": "state",
                                                          "mountPath": "/state"})
        ns.apply(job)
        ns.succeeds("TFJob", "retry", timeout=180)
        assert "second run done" in ns.logs("retry-worker-0")
        # the Restarting condition may be gone (Running replaces it, as upstream's
        # filterOutCondition, pkg/util/status.go:130-135): its event tells the restart
        reasons = [e["reason"] for e in ns.items("events")
                   if e["involvedObject"]["name"] == "retry"]
        assert "TFJobRestarting" in reasons and "ExitedWithCode" in reasons, reasons
        restarting = next(e for e in ns.items("events") if e["reason"] == "TFJobRestarting")
        # the event in upstream's words (pod.go:362); the facts are the status's
        assert restarting["message"] == "job retry is restarting because Worker replica(s) failed."
        job_now = ns.get("tfjobs.kubeflow.org", "retry")
        assert job_now is not None
        last = job_now["status"]["lastFailure"]
        assert (last["pod"], last["exitCode"], last["reason"]) == (
            "retry-worker-0", 137, "OOMKilled")
        created = [e for e in ns.items("events") if e["reason"] == "SuccessfulCreatePod"]
        # the pod was made again, not restarted in place (alike events are counted in one)
        assert sum(e.get("count", 1) for e in created) == 2, created


def test_deleting_a_job_removes_its_objects_through_the_garbage_collector(
        cluster: TestCluster, manager: None) -> None:
    job = python_job("MPIJob", "gc", {"Launcher": 1, "Worker": 2},
                     "import time; time.sleep(600)")
    with Namespace(cluster, "gc") as ns:
        ns.apply(job)
        ns.wait_running(3, 120)
        owned = {"configmap": "gc-config", "serviceaccount": "gc-launcher",
                 "role": "gc-launcher", "rolebinding": "gc-launcher"}
        assert all(ns.get(kind, name) for kind, name in owned.items())
        ns.kubectl("delete", "mpijob", "gc", "--wait=false")
        wait_for("the garbage collector", lambda: not ns.items("pods") and not any(
            ns.get(kind, name) for kind, name in owned.items()), 120)


def test_manager_killed_while_creating_a_job_makes_one_pod_per_replica(
        cluster: TestCluster, manager: None) -> None:
    # more writes (a pod and a Service each) than the client's burst of 30: the creation
    # spreads over a second or more, and the kill lands in it
    workers = 32
    job = python_job("JAXJob", "many", {"Worker": workers},
                     "import time; time.sleep(3); print('done', flush=True)",
                     restart="Never")
    with Namespace(cluster, "kill") as ns:
        ns.apply(job)
        # kill -9 the manager's process as soon as its first pods exist: the kubelet
        # restarts the container, the new process takes the lease and goes on
        wait_for("the first pods", lambda: ns.items("pods"), 60, interval=0.05)
        created = len(ns.items("pods"))
        pids = manager_pids(cluster)
        assert pids
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        ns.succeeds("JAXJob", "many", timeout=300)
        pods = ns.items("pods", f"{JOB_NAME}=many")
        names = sorted(p["metadata"]["name"] for p in pods)
        assert names == sorted(f"many-worker-{i}" for i in range(workers)), names
        assert created < workers, "the kill came after every pod was made: no test"
        restarts = cluster.kubectl("-n", "trainop-system", "get", "pods", "-o",
                                   "jsonpath={.items[*].status.containerStatuses[0]"
                                   ".restartCount}").stdout.split()
        assert sum(map(int, restarts)) >= 1
    cluster.kubectl("-n", "trainop-system", "rollout", "status", "deployment/trainop-manager",
                    "--timeout=120s", timeout=150)
    wait_for_webhook(cluster)


def manager_pids(cluster: TestCluster) -> list[int]:
    """The host pids of the processes of the deployed manager's containers, as containerd
    tells them (only what this suite started: never a process matched by its name)."""
    out = cluster.kubectl("-n", "trainop-system", "get", "pods", "-l",
                          "app.kubernetes.io/component=manager", "-o",
                          "jsonpath={.items[*].status.containerStatuses[*].containerID}")
    pids = []
    for container in out.stdout.split():
        tasks = cluster.ctr("tasks", "ps", container.removeprefix("containerd://"))
        pids += [int(line.split()[0]) for line in tasks.stdout.splitlines()[1:] if line.strip()]
    return pids


def test_suspend_then_resume(cluster: TestCluster, manager: None) -> None:
    job = python_job("PyTorchJob", "pause", {"Master": 1, "Worker": 1},
                     "import time; time.sleep(5); print('trained', flush=True)")
    with Namespace(cluster, "suspend") as ns:
        ns.apply(job)
        ns.wait_running(2, 120)
        ns.kubectl("patch", "pytorchjob", "pause", "--type=merge",
                   "-p", '{"spec":{"runPolicy":{"suspend":true}}}')
        ns.condition("PyTorchJob", "pause", "Suspended", timeout=60)
        wait_for("the suspended job's pods to go", lambda: not ns.items("pods"), 60)
        ns.kubectl("patch", "pytorchjob", "pause", "--type=merge",
                   "-p", '{"spec":{"runPolicy":{"suspend":false}}}')
        ns.succeeds("PyTorchJob", "pause", timeout=180)
        assert "trained" in ns.logs("pause-master-0")
