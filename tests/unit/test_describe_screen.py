"""`trainop describe`'s screen (cluster.reading.describe.render), line by line: each replica's row,
the conditions, the waiting replicas and the last failure, as a terminal shows them."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from tests.jobs import job
from tests.sim import Cluster
from trainop.cluster.reading.describe import render
from trainop.engine import EngineConfig

JOB: dict[str, Any] = {"kind": "PyTorchJob", "metadata": {"namespace": "ns", "name": "pt"}}


def pod(name: str, rtype: str, index: int, phase: str, *, node: str | None = None,
        restarts: int = 0, state: dict[str, Any] | None = None,
        last: dict[str, Any] | None = None, deleting: bool = False,
        conditions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase, "containerStatuses": [{
        "name": "pytorch", "restartCount": restarts, "ready": phase == "Running",
        "state": state or {}, **({"lastState": {"terminated": last}} if last else {})}]}
    if conditions:
        status["conditions"] = conditions
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "labels": {
        "training.kubeflow.org/replica-type": rtype,
        "training.kubeflow.org/replica-index": str(index)}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "spec": {"nodeName": node} if node else {}, "status": status}


def screen(job: dict[str, Any], pods: list[dict[str, Any]]) -> list[str]:
    console = Console(width=240, record=True, color_system=None)
    console.print(render(job, pods))
    return [" ".join(line.replace("│", " ").replace("┃", " ").split())
            for line in console.export_text().splitlines()]


def test_each_replica_row_says_phase_node_restarts_exit_code_and_wait() -> None:
    lines = screen(JOB, [
        pod("pt-worker-1", "worker", 1, "Failed", node="n2",
            state={"terminated": {"exitCode": 3, "reason": "Error"}}),
        pod("pt-master-0", "master", 0, "Running", node="n1", restarts=2,
            state={"running": {}}, last={"exitCode": 137, "reason": "OOMKilled"}),
        pod("pt-worker-0", "worker", 0, "Running", node="n1", deleting=True,
            state={"running": {}}),
        pod("pt-worker-2", "worker", 2, "Pending", conditions=[{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": "0/3 nodes are available"}]),
    ])
    assert lines[0] == "PyTorchJob ns/pt"
    rows = [line for line in lines if line.startswith(("master-", "worker-"))]
    assert rows == [
        "master-0 pt-master-0 Running n1 2 137 (OOMKilled)",  # its last run, restarted
        "worker-0 pt-worker-0 Terminating n1 0",
        "worker-1 pt-worker-1 Failed n2 0 3 (Error)",
        "worker-2 pt-worker-2 Pending 0 Unschedulable: 0/3 nodes are available",
    ]
    assert "no pods" not in lines


def test_conditions_waiting_replicas_and_the_last_failure() -> None:
    job = {**JOB, "status": {
        "conditions": [
            {"type": "Created", "status": "True", "reason": "PyTorchJobCreated",
             "message": "PyTorchJob pt is created."},
            {"type": "Failed", "status": "True", "reason": "PyTorchJobFailed",
             "message": "PyTorchJob pt is failed because 1 Worker replica(s) failed."}],
        "waitingReplicas": [{"pod": "pt-worker-2", "reason": "ErrImagePull",
                             "message": "no such image", "since": "2026-01-01T00:00:00Z"}],
        "lastFailure": {"pod": "pt-worker-1", "container": "pytorch", "node": "n2",
                        "exitCode": 3, "reason": "Error", "time": "2026-01-01T00:01:00Z",
                        "message": "Traceback (most recent call last):\nValueError: x\n"}}}
    lines = screen(job, [])
    assert "no pods" in lines
    assert "Created True PyTorchJobCreated: PyTorchJob pt is created." in lines
    assert "Failed True PyTorchJobFailed: PyTorchJob pt is failed because 1 Worker " \
           "replica(s) failed." in lines
    assert "waiting pt-worker-2: ErrImagePull: no such image (since 2026-01-01T00:00:00Z)" \
        in lines
    assert "last failure pt-worker-1 container pytorch on n2: exit code 3 (Error) at " \
           "2026-01-01T00:01:00Z" in lines
    at = lines.index("Traceback (most recent call last):")
    assert lines[at + 1] == "ValueError: x"


def test_a_last_failure_without_node_container_or_message() -> None:
    job = {**JOB, "status": {"lastFailure": {"pod": "pt-worker-1", "exitCode": 1,
                                             "reason": "Error", "time": "t"}}}
    lines = screen(job, [])
    assert "last failure pt-worker-1: exit code 1 (Error) at t" in lines
    assert lines[-1] == "last failure pt-worker-1: exit code 1 (Error) at t"


OSC52 = "\x1b]52;c;ZWNobyBwd25lZA==\x07"  # writes the describer's clipboard
TITLE = "\x1b]0;root@prod\x07"
FAKE = "\r\x1b[2K\x1b[1A"  # back over the line just printed


def test_text_from_the_job_and_its_pods_is_shown_not_run_by_the_terminal() -> None:
    """Everything the job's author or a pod's program controls (condition and waiting
    messages, the log tail in lastFailure, the kubelet's words quoting an image name) is
    printed with its control characters escaped, and is not read as rich markup."""
    job = {**JOB, "status": {
        "conditions": [{"type": "Failed", "status": "True", "reason": "PyTorchJobFailed",
                        "message": f"failed{TITLE} [bold]not markup[/bold]"}],
        "waitingReplicas": [{"pod": "pt-worker-0", "reason": "ErrImagePull",
                             "message": f"image {FAKE}ok", "since": "t"}],
        "lastFailure": {"pod": "pt-master-0", "exitCode": 1, "reason": "Error", "time": "t",
                        "message": f"Traceback{OSC52}\n"}}}
    waiting = pod("pt-worker-0", "worker", 0, "Pending", state={"waiting": {
        "reason": "ErrImagePull", "message": f"pull {OSC52}"}})
    console = Console(width=400, record=True, force_terminal=True, color_system="standard")
    console.print(render(job, [waiting]))
    out = console.export_text(styles=True)
    for attack in (OSC52, TITLE, FAKE, "\x1b]", "\x07", "\r"):
        assert attack not in out
    assert "Traceback\\x1b]52;c;ZWNobyBwd25lZA==\\x07" in out
    assert "image \\x0d\\x1b[2K\\x1b[1Aok" in out
    assert "failed\\x1b]0;root@prod\\x07 [bold]not markup[/bold]" in out
    assert "pull \\x1b]52;c;" in out


def in_place_pods(config: EngineConfig) -> list[dict[str, Any]]:
    """The pods the engine makes for a PyTorchJob that restarts in place, the master's
    template naming its command and the workers' not."""
    commanded = {"template": {"spec": {"containers": [
        {"name": "pytorch", "image": "t", "command": ["python", "train.py"]}]}}}
    c = Cluster(job("PyTorchJob", spec={"runPolicy": {"restartScope": "Job",
                                                      "restartInPlace": True}},
                    replica_extra={"Master": commanded}), config)
    c.step()
    return [o for key, o in c.created.items() if key.startswith("Pod/")]


def test_how_pods_restart_in_place_is_said() -> None:
    pods = in_place_pods(EngineConfig(rank_supervisor_image="trainop:1"))
    for p in pods:
        p["metadata"]["annotations"]["trainop.kubeflow.org/attempt"] = "10"
    pods[-1]["metadata"]["annotations"]["trainop.kubeflow.org/attempt"] = "9"
    assert screen(JOB, pods)[-1] == ("restarts containers in place, attempt 10 (3 pod(s)); "
                                     "processes in place in 1: container pytorch runs as "
                                     "the rank supervisor's child")
    for p in pods:  # every replica names its command
        p["spec"]["containers"][0]["command"] = pods[0]["spec"]["containers"][0]["command"]
    assert screen(JOB, pods)[-1] == "restarts processes in place, attempt 10 (3 pod(s))"
    assert screen(JOB, in_place_pods(EngineConfig()))[-1] == \
        "restarts containers in place, attempt 0 (3 pod(s))"
    # pods made again at a whole-job restart show nothing of it
    assert not [line for line in screen(JOB, [pod("pt-worker-0", "worker", 0, "Running")])
                if line.startswith("restarts")]


def test_how_far_the_job_has_got_and_a_refused_report() -> None:
    job = {**JOB, "status": {"progress": {
        "percent": 45, "step": 450, "steps": 1000, "epoch": 2, "epochs": 5,
        "remainingSeconds": 3725, "metrics": [{"name": "loss", "value": "0.15"},
                                              {"name": "lr", "value": "0.001"}],
        "pod": "pt-master-0", "lastReportedTime": "2026-01-01T00:00:05Z",
        "refused": "pod pt-master-0: step 11 is past steps 10"}}}
    assert screen(job, [])[-2:] == [
        "progress 45%, step 450 of 1000, epoch 2 of 5, 1h2m left, loss 0.15, lr 0.001 (pod "
        "pt-master-0, at 2026-01-01T00:00:05Z)",
        "latest report refused: pod pt-master-0: step 11 is past steps 10"]


def test_progress_of_few_fields_and_one_not_in_trainops_shape() -> None:
    few = {"remainingSeconds": 75, "epoch": 3, "pod": "p", "lastReportedTime": "t"}
    assert screen({**JOB, "status": {"progress": few}}, [])[-1] == \
        "progress epoch 3, 1m15s left (pod p, at t)"
    none = {"pod": "p", "lastReportedTime": "t", "refused": "pod p: a report that is not JSON"}
    assert screen({**JOB, "status": {"progress": none}}, [])[-2] == \
        "progress nothing reported yet (pod p, at t)"
    bad = {"percent": "half", "pod": "p", "lastReportedTime": "t"}
    assert screen({**JOB, "status": {"progress": bad}}, [])[-1] == \
        "progress (not in trainop's shape)"
