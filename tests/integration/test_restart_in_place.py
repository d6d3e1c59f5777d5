"""Whole-job restarts in place against a real API server: the pods as it takes them, the
attempts told and released as the kubelet's statuses (set by the test) say, and a cluster
whose API server cannot restart pods in place. (The kubelet's part runs in
tests/node/test_restart_in_place.py.)"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from testbed.apiserver import TestAPIServer
from testbed.manager import ManagerProcess
from testbed.supervisor import stop_all
from tests.integration.kube import Kube, Manager, wait_for
from tests.integration.test_reliability import private_api
from tests.jobs import manifest
from trainop.engine import inplace, supervised

pytestmark = pytest.mark.integration

PODS = ["job-master-0", "job-worker-0", "job-worker-1"]
JOB = manifest("PyTorchJob", {"Master": 1, "Worker": 2},
               spec={"runPolicy": {"restartScope": "Job", "backoffLimit": 3}},
               replica_extra={rt: {"restartPolicy": "ExitCode"} for rt in ("Master", "Worker")})


def report(kube: Kube, name: str, phase: str, barrier: dict[str, Any],
           main: dict[str, Any], agent: dict[str, Any], ip: str | None = None) -> None:
    """Set pod `name`'s status as its kubelet would: its barrier's, main container's and
    agent's states (and its IP)."""
    def status(container: str, state: dict[str, Any], restarts: int) -> dict[str, Any]:
        return {"name": container, "image": "x", "imageID": "", "restartCount": restarts,
                "ready": "running" in state, "state": state}
    restarts = int(kube.get("pod", name)["metadata"]["annotations"][inplace.ATTEMPT])
    body = {"phase": phase,
            "initContainerStatuses": [status(inplace.BARRIER, barrier, restarts)],
            "containerStatuses": [status("pytorch", main, restarts),
                                  status(inplace.AGENT, agent, restarts)]}
    if ip is not None:
        body.update(podIP=ip, podIPs=[{"ip": ip}])
    if phase == "Running" and "running" in main and "running" in agent:
        body["conditions"] = [{"type": "Ready", "status": "True"}]
    kube.api.kubectl("patch", "pod", name, "-n", kube.ns, "--subresource=status",
                     "--type=merge", "-p", json.dumps({"status": body}))


RUNNING = {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
PASSED = {"terminated": {"exitCode": 0, "reason": "Completed"}}
WAITING = {"waiting": {"reason": "PodInitializing"}}


def attempts(kube: Kube) -> dict[str, tuple[str, str]]:
    return {p["metadata"]["name"]: (p["metadata"]["annotations"][inplace.ATTEMPT],
                                    p["metadata"]["annotations"][inplace.RELEASED])
            for p in kube.items("pods")}


def test_a_job_restarts_in_place_through_the_api_server(
        kube: Kube, start_manager: Callable[..., Manager]) -> None:
    start_manager("--restart-in-place")
    kube.apply(JOB)
    kube.wait_pods(3)
    pod = kube.get("pod", "job-worker-1")
    # what the API server took: the barrier first, the agent beside the main container
    # with its rule, the files from the annotations
    assert pod["spec"]["initContainers"][0]["name"] == inplace.BARRIER
    main, agent = pod["spec"]["containers"]
    assert main["name"] == "pytorch" and "restartPolicyRules" not in main
    assert agent["name"] == inplace.AGENT and agent["restartPolicy"] == "Never"
    assert agent["restartPolicyRules"] == [inplace.RESTART_POD]
    assert {v["name"] for v in pod["spec"]["volumes"]} >= {inplace.FILES, inplace.STATE}
    assert attempts(kube) == dict.fromkeys(PODS, ("0", "0"))
    uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in kube.items("pods")}
    for name in PODS:
        report(kube, name, "Running", PASSED, RUNNING, RUNNING)
    kube.wait_condition("PyTorchJob", "job", "Running")

    # worker 1's main container fails; its agent keeps the pod
    report(kube, "job-worker-1", "Running", PASSED,
           {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}, RUNNING)
    wait_for("attempt 1 told", lambda: attempts(kube) == dict.fromkeys(PODS, ("1", "0")))
    restarting = kube.wait_condition("PyTorchJob", "job", "Restarting")
    assert "job-worker-1 exited with code 137 (OOMKilled)" in restarting["message"]
    status = kube.job("PyTorchJob", "job")["status"]
    assert status["replicaStatuses"]["Worker"]["restarts"] == 1
    assert status["lastFailure"]["pod"] == "job-worker-1"

    # every agent stops its pod: the kubelet restarts them, each held at its barrier; but
    # worker 0's kubelet missed the change to its files (its agent runs on): told again
    told_at = kube.get("pod", "job-worker-0")["metadata"]["annotations"][inplace.TOLD_AT]
    for name in ("job-master-0", "job-worker-1"):
        report(kube, name, "Pending", RUNNING, WAITING, WAITING)
    wait_for("worker 0 told again", lambda: kube.get("pod", "job-worker-0")["metadata"][
        "annotations"][inplace.TOLD_AT] != told_at, timeout=inplace.NUDGE + 10)
    assert attempts(kube) == dict.fromkeys(PODS, ("1", "0"))
    report(kube, "job-worker-0", "Pending", RUNNING, WAITING, WAITING)
    wait_for("attempt 1 released", lambda: attempts(kube) == dict.fromkeys(PODS, ("1", "1")))
    for name in PODS:
        report(kube, name, "Running", PASSED, RUNNING, RUNNING)
    kube.wait_condition("PyTorchJob", "job", "Running")
    # the same pods throughout, counted once
    assert {p["metadata"]["name"]: p["metadata"]["uid"] for p in kube.items("pods")} == uids
    assert kube.job("PyTorchJob", "job")["status"]["replicaStatuses"]["Worker"]["restarts"] == 1
    reasons = [e["reason"] for e in kube.items("events")]
    assert inplace.RESTARTING in reasons and inplace.RELEASED_REASON in reasons


GATES_OFF = {
    # the action refused (422): its gate off
    inplace.REFUSED: "RestartAllContainersOnContainerExits=false",
    # every container restart rule dropped as the API server stores the pod
    inplace.DROPPED: "ContainerRestartRules=false,RestartAllContainersOnContainerExits=false",
}


@pytest.fixture(params=list(GATES_OFF), ids=["action-refused", "rules-dropped"])
def gate_off_api(request: pytest.FixtureRequest) -> Any:
    """An API server that cannot restart pods in place; the reason trainop gives."""
    for api in private_api(f"--feature-gates={GATES_OFF[request.param]}"):
        yield api, request.param


def test_a_cluster_that_cannot_restart_in_place_makes_pods_and_says_so(
        gate_off_api: tuple[TestAPIServer, str], tmp_path: Path) -> None:
    api, why = gate_off_api
    kube = Kube(api)
    log = tmp_path / "manager.log"
    m = ManagerProcess(api.kubeconfig, "--namespace", kube.ns, "--restart-in-place",
                       "--enable-scheme", "pytorchjob", log_path=log)
    try:
        m.wait_ready()
        kube.apply(JOB)
        kube.wait_pods(3)
        told = wait_for("the event", lambda: [
            e for e in kube.items("events") if e["reason"] == inplace.UNAVAILABLE] or None)
    finally:
        m.stop()
    assert told[0]["message"] == f"{why}: {inplace.FALLBACK}"
    assert len(told) == 1 and told[0].get("count", 1) == 1
    pod = kube.get("pod", "job-worker-0")
    assert inplace.ATTEMPT not in (pod["metadata"].get("annotations") or {})
    assert all(c["name"] != inplace.AGENT for c in pod["spec"]["containers"])
    assert all(c["name"] != inplace.BARRIER for c in pod["spec"].get("initContainers") or [])
    # the manager says it once as it starts (the job's event is logged as well)
    said = [line for line in log.read_text().splitlines()
            if "WARNING trainop.manager" in line and why in line]
    assert len(said) == 1


# -- through the rank supervisors ----------------------------------------------------------

# The rank: notes its attempt's pid, and exits 137 once the test asks (consuming the ask,
# so that the next attempt runs on); ignores SIGTERM where the test says.
RANK = """\
import os, signal, sys, time
from pathlib import Path
here = Path(sys.argv[1])
if (here / "ignore").exists():
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
(here / f".attempt-{os.environ['TRAINOP_ATTEMPT']}").write_text(str(os.getpid()))
os.replace(here / f".attempt-{os.environ['TRAINOP_ATTEMPT']}",
           here / f"attempt-{os.environ['TRAINOP_ATTEMPT']}")
while not (here / "fail").exists():
    time.sleep(0.05)
(here / "fail").unlink()
sys.exit(137)
"""
SUPERVISED_JOB = manifest(
    "PyTorchJob", {"Master": 1, "Worker": 2},
    spec={"runPolicy": {"restartScope": "Job", "backoffLimit": 3}},
    replica_extra={rt: {"restartPolicy": "ExitCode", "template": {"spec": {"containers": [
        {"name": "pytorch", "image": "trainer", "command": ["python", "train.py"]}]}}}
        for rt in ("Master", "Worker")})


@contextlib.contextmanager
def pods_supervised(kube: Kube, supervisor: Path, tmp_path: Path, grace: str = "2s",
                    ignoring: tuple[str, ...] = (), rank: str = RANK,
                    reporting: tuple[str, ...] = ()) -> Iterator[dict[str, Path]]:
    """Play each pod's kubelet: its status Running with an IP of its own on loopback
    (127.0.29.N), where a real supervisor serves the pod's channel with the key of the
    job's Secret and runs `rank`; each pod's rank's folder, by pod. A pod whose command
    the manager gave --progress (and those `reporting`, as if it had) writes its progress
    reports in its folder."""
    secret = wait_for("the key Secret", lambda: kube.get("secret", "job-trainop-ranks"))
    key = base64.b64decode(secret["data"]["key"]).decode()
    procs: list[subprocess.Popen[str]] = []
    folders = {}
    try:
        for n, name in enumerate(PODS, start=1):
            ip = f"127.0.29.{n}"
            folders[name] = tmp_path / name
            folders[name].mkdir()
            if name in ignoring:
                (folders[name] / "ignore").touch()
            command = kube.get("pod", name)["spec"]["containers"][0]["command"]
            progress = []
            if "--progress" in command or name in reporting:
                every = command[command.index("--progress-every") + 1] \
                    if "--progress-every" in command else "1s"
                progress = ["--progress", str(folders[name] / "progress.json"),
                            "--progress-every", every]
            procs.append(subprocess.Popen(
                [str(supervisor), "--listen", f"{ip}:{supervised.PORT}", "--pod", name,
                 "--attempt", "0", "--grace", grace, *progress, "--",
                 sys.executable, "-c", rank, str(folders[name])],
                env={**os.environ, supervised.KEY_ENV: key}, text=True))
            report(kube, name, "Running", PASSED, RUNNING, RUNNING, ip=ip)
        yield folders
    finally:
        for proc in procs:
            stop_all(proc)


def test_a_failed_rank_restarts_through_the_supervisors_in_the_same_containers(
        kube: Kube, start_manager: Callable[..., Manager], supervisor: Path,
        tmp_path: Path) -> None:
    start_manager("--restart-in-place", "--rank-supervisor-image", "trainop:test")
    kube.apply(SUPERVISED_JOB)
    kube.wait_pods(3)
    uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in kube.items("pods")}
    with pods_supervised(kube, supervisor, tmp_path) as folders:
        kube.wait_condition("PyTorchJob", "job", "Running")
        first = {name: wait_for("attempt 0", lambda f=f: (f / "attempt-0").exists() or None)
                 for name, f in folders.items()}
        assert all(first.values())
        (folders["job-worker-1"] / "fail").touch()
        # its supervisor says so; every rank is stopped, held and released for attempt 1,
        # with no container of any pod restarted (the statuses are the test's, unchanged)
        wait_for("attempt 1 released",
                 lambda: attempts(kube) == dict.fromkeys(PODS, ("1", "1")) or None)
        for name, f in folders.items():
            wait_for(f"{name}'s rank of attempt 1", lambda f=f: (f / "attempt-1").exists()
                     or None)
        kube.wait_condition("PyTorchJob", "job", "Running")
    assert {p["metadata"]["name"]: p["metadata"]["uid"] for p in kube.items("pods")} == uids
    status = kube.job("PyTorchJob", "job")["status"]
    assert status["replicaStatuses"]["Worker"]["restarts"] == 1
    # the rank's end as its supervisor said it, though its container never ended
    assert {k: status["lastFailure"][k] for k in ("pod", "container", "exitCode")} == {
        "pod": "job-worker-1", "container": "pytorch", "exitCode": 137}
    reasons = [e["reason"] for e in kube.items("events")]
    assert inplace.RESTARTING in reasons and inplace.RELEASED_REASON in reasons
    assert inplace.TOLD_AGAIN_REASON not in reasons  # the supervisors acted: no nudges


def test_a_manager_restarted_mid_attempt_finishes_it_from_what_it_reads(
        kube: Kube, start_manager: Callable[..., Manager], supervisor: Path,
        tmp_path: Path) -> None:
    flags = ("--restart-in-place", "--rank-supervisor-image", "trainop:test")
    first = start_manager(*flags)
    kube.apply(SUPERVISED_JOB)
    kube.wait_pods(3)
    # the master's rank ignores SIGTERM: its supervisor takes its grace (8 s) to stop it
    with pods_supervised(kube, supervisor, tmp_path, grace="8s",
                         ignoring=("job-master-0",)) as folders:
        kube.wait_condition("PyTorchJob", "job", "Running")
        for f in folders.values():
            wait_for("attempt 0", lambda f=f: (f / "attempt-0").exists() or None)
        (folders["job-worker-1"] / "fail").touch()
        # told on their channels: the job's record says so, the pods' annotations do not
        wait_for("attempt 1 recorded", lambda: kube.job("PyTorchJob", "job")["status"].get(
            "restartAttempt") == {"attempt": 1, "released": 0} or None)
        assert attempts(kube) == dict.fromkeys(PODS, ("0", "0"))
        first.stop()  # while the master's rank is still being stopped
        start_manager(*flags)
        wait_for("attempt 1 released",
                 lambda: attempts(kube) == dict.fromkeys(PODS, ("1", "1")) or None, 60)
        for name, f in folders.items():
            wait_for(f"{name}'s rank of attempt 1", lambda f=f: (f / "attempt-1").exists()
                     or None)
        kube.wait_condition("PyTorchJob", "job", "Running")
    status = kube.job("PyTorchJob", "job")["status"]
    assert status["replicaStatuses"]["Worker"]["restarts"] == 1  # counted once


def test_supervisors_the_manager_cannot_reach_are_said_once_and_the_job_runs(
        kube: Kube, start_manager: Callable[..., Manager]) -> None:
    start_manager("--restart-in-place", "--rank-supervisor-image", "trainop:test")
    kube.apply(SUPERVISED_JOB)
    kube.wait_pods(3)
    # starting (their main containers not running yet, as the supervisor is not): not
    # taken for supervisors that cannot be reached
    for n, name in enumerate(PODS, start=1):
        report(kube, name, "Running", PASSED, WAITING, RUNNING, ip=f"127.0.29.{n}")
    time.sleep(6)  # more than 3 polls would take
    assert not [e for e in kube.items("events") if e["reason"] == supervised.UNREACHABLE]
    for n, name in enumerate(PODS, start=1):  # IPs where no supervisor serves
        report(kube, name, "Running", PASSED, RUNNING, RUNNING, ip=f"127.0.29.{n}")
    kube.wait_condition("PyTorchJob", "job", "Running")
    told = wait_for("the warning", lambda: [e for e in kube.items("events")
                                            if e["reason"] == supervised.UNREACHABLE] or None)
    assert told[0]["type"] == "Warning"
    # (the pods found so when it is said: the first to miss enough polls)
    assert re.fullmatch(r"The manager cannot reach the rank supervisor of job-\w+-\d"
                        r"(, job-\w+-\d)* on port 29611 \(a NetworkPolicy, or the port "
                        r"taken by the pod's own process\?\): their ranks restart by "
                        r"restarting their containers", told[0]["message"]), told[0]
    time.sleep(8)  # more failed polls: nothing said again
    again = [e for e in kube.items("events") if e["reason"] == supervised.UNREACHABLE]
    assert len(again) == 1 and again[0].get("count", 1) == 1


# A training script's report, once its rank starts (a no-op where it is not asked)
REPORTING_RANK = """\
from trainop import progress
progress.report(step=3, steps=10, remaining_seconds=70, metrics={"loss": 0.5})
""" + RANK


def test_the_lead_ranks_progress_reaches_the_jobs_status_columns_and_metrics(
        kube: Kube, start_manager: Callable[..., Manager], supervisor: Path,
        tmp_path: Path) -> None:
    manager = start_manager("--restart-in-place", "--rank-supervisor-image", "trainop:test",
                            "--progress-interval", "1")
    kube.apply(SUPERVISED_JOB)
    kube.wait_pods(3)
    # a worker's supervisor passes reports on too, as if it had been asked: not the lead's
    with pods_supervised(kube, supervisor, tmp_path, rank=REPORTING_RANK,
                         reporting=("job-worker-1",)):
        shown = wait_for("the progress", lambda: kube.job("PyTorchJob", "job")[
            "status"].get("progress"))
        assert {k: v for k, v in shown.items() if k != "lastReportedTime"} == {
            "percent": 30, "step": 3, "steps": 10, "remainingSeconds": 70,
            "metrics": [{"name": "loss", "value": "0.5"}], "pod": "job-master-0"}
        # kubectl's wide output has the column; its default output is upstream's
        wide = kube.kubectl("get", "pytorchjob", "job", "-o", "wide").split("\n")
        assert wide[0].split() == ["NAME", "STATE", "AGE", "PROGRESS"]
        assert wide[1].split()[0::3] == ["job", "30"]
        assert kube.kubectl("get", "pytorchjob", "job").split("\n")[0].split() == [
            "NAME", "STATE", "AGE"]
        labels = {"job_namespace": kube.ns, "job_name": "job", "kind": "PyTorchJob"}
        assert manager.metric("trainop_job_progress_percent", **labels) == 30
        assert manager.metric("trainop_job_remaining_seconds", **labels) == 70
    kube.kubectl("delete", "pytorchjob", "job", "--wait=false")
    wait_for("the series gone", lambda: not [
        s for s in manager.samples() if s.name.startswith("trainop_job_")
        and s.labels.get("job_namespace") == kube.ns] or None)
