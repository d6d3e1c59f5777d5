"""Whole-job restarts in place on the real node: the kubelet restarts every container of
every pod (RestartAllContainers), or the rank supervisors their ranks' processes, the pods
kept, and the job's next attempt starts once every pod waits for it."""

from __future__ import annotations

from typing import Any

import pytest

from bench.ddp_kill import node_once
from testbed import images
from testbed.node import TestCluster
from tests.node.kube import Namespace, python_job, state_folder, wait_for
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
          "    report = os.environ.get('TRAINOP_PROGRESS_FILE')\n"
          "    if report:  # the payload as any language writes it: whole, then renamed\n"
          "        Path(report + '.tmp').write_text('{\"trainerStatus\": {'\n"
          "            '\"progressPercentage\": 100, \"metrics\": [{\"name\": \"rank\", '\n"
          "            f'\"value\": \"{rank}\"}}]}}}}')\n"
          "        os.replace(report + '.tmp', report)\n"
          "    (state / f'next-{rank}').touch()\n"
          "    while rank == '0' and len(list(state.glob('next-*'))) < 3:\n"
          "        time.sleep(0.2)\n"
          "    sys.exit(0)\n"
          "print(f'rank {rank}: first attempt', flush=True)\n"
          "if rank == '2':\n"
          "    time.sleep(3); (state / 'failed-once').touch(); sys.exit(143)\n"
          "time.sleep(600)\n")


def in_place_job(script: str, state: str) -> dict[str, Any]:
    """A PyTorchJob of three ranks restarted in place, each with the host folder `state`."""
    job = python_job("PyTorchJob", "inplace", {"Master": 1, "Worker": 2}, script,
                     restart="ExitCode", spec={"runPolicy": {
                         "restartScope": "Job", "restartInPlace": True, "backoffLimit": 2}})
    for rspec in job["spec"]["pytorchReplicaSpecs"].values():
        spec = rspec["template"]["spec"]
        spec["volumes"].append({"name": "state", "hostPath": {"path": state}})
        spec["containers"][0]["volumeMounts"].append({"name": "state", "mountPath": "/state"})
    return job


def commandless(job: dict[str, Any]) -> dict[str, Any]:
    """The job with its main containers' command as their args (the image has no
    ENTRYPOINT): they name no command, so no rank supervisor (the containers restart)."""
    for rspec in job["spec"]["pytorchReplicaSpecs"].values():
        main = rspec["template"]["spec"]["containers"][0]
        main["args"] = main.pop("command")
    return job


def with_main(job: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """The job with `fields` set on every replica type's main container."""
    for rspec in job["spec"]["pytorchReplicaSpecs"].values():
        rspec["template"]["spec"]["containers"][0].update(fields)
    return job


def test_a_job_restarted_in_place_succeeds_with_the_same_pods(
        cluster: TestCluster, manager: None) -> None:
    # its main container names no command (the image's runs, which the pod does not show):
    # no supervisor, its containers restart in place
    with Namespace(cluster, "inplace") as ns:
        for p in restarted_in_place(cluster, ns, command=False):
            main = next(c for c in p["spec"]["containers"] if c["name"] == "pytorch")
            assert "command" not in main and main["args"][0] == "python3", main


def test_a_job_whose_ranks_run_under_the_supervisor_restarts_their_processes_in_place(
        cluster: TestCluster, manager: None) -> None:
    # the rank's output and its exit code (143, read by the failure rules) as without the
    # supervisor, which an init container copied in from the manager's image (the shipped
    # Deployment names it); the manager
    # hears every supervisor, which stops and starts its rank's processes, the containers
    # kept
    with Namespace(cluster, "supervised") as ns:
        pods = restarted_in_place(cluster, ns, processes=True)
        # the master's report (the lead's: its supervisor gave it the file, in the pod's
        # state volume) goes with its end: shown at once, as the job has ended
        progress = (ns.get("pytorchjobs", "inplace") or {})["status"]["progress"]
        assert {k: v for k, v in progress.items() if k != "lastReportedTime"} == {
            "percent": 100, "metrics": [{"name": "rank", "value": "0"}],
            "pod": "inplace-master-0"}, progress
        for p in pods:
            name = p["metadata"]["name"]
            main = next(c for c in p["spec"]["containers"] if c["name"] == "pytorch")
            command = main["command"]
            assert command[0] == "/run/trainop/bin/trainop-supervisor", main
            assert command[command.index("--") + 1:][:1] == ["python3"], main
            installed = ns.logs(name, "trainop-supervisor-install")
            assert "trainop-supervisor: installed in /run/trainop/bin" in installed, name


def restarted_in_place(cluster: TestCluster, ns: Namespace, processes: bool = False,
                       command: bool = True) -> list[dict[str, Any]]:
    """Run the job of SCRIPT in `ns`: rank 2 fails once, every pod restarts in place (its
    containers, or with `processes` its rank's processes only), and the job succeeds; its
    pods as they ended. Without `command` the main containers name none (their command
    goes to their args: the image's ENTRYPOINT is none)."""
    job = in_place_job(SCRIPT, str(state_folder(cluster, ns)))
    ns.apply(job if command else commandless(job))
    ns.wait_running(3)
    uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in ns.items("pods")}
    done = ns.succeeds("PyTorchJob", "inplace", timeout=240)
    pods = ns.items("pods")
    # the same pods, each rank in its next attempt; each pod's containers restarted once
    # (every container: the barrier, the PyTorch init container, the main one and the
    # agent), or with `processes` none (both attempts' output in one container's log)
    assert {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods} == uids
    for p in pods:
        name = p["metadata"]["name"]
        assert p["metadata"]["annotations"][inplace.ATTEMPT] == "1", name
        main = next(c for c in p["status"]["containerStatuses"] if c["name"] == "pytorch")
        assert main["restartCount"] == (0 if processes else 1), (name, main)
        log = ns.logs(name, "pytorch")
        assert "next attempt" in log, name
        assert ("first attempt" in log) is processes, name
        barrier = ns.logs(name, inplace.BARRIER)
        assert ("attempt 1" in barrier) is not processes, name
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
    return pods


def test_a_container_that_cannot_start_again_in_place_is_told_and_starts_when_it_can(
        cluster: TestCluster, manager: None) -> None:
    # the ranks' image under a name of its own, taken off the node once they run: after the
    # restart in place their containers cannot start (the kubelet may not pull it)
    gone = images.PYTHON.replace("/python:", "/python-gone:")
    cluster.ctr("images", "tag", "--force", images.PYTHON, gone)
    script = SCRIPT.replace("    time.sleep(3); (state / 'failed-once')",
                            "    while not (state / 'fail').exists(): time.sleep(0.2)\n"
                            "    (state / 'failed-once')")
    assert script != SCRIPT
    with Namespace(cluster, "noimage") as ns:
        state = state_folder(cluster, ns)
        # (no supervisor: the kubelet's path, which starts the containers again)
        ns.apply(with_main(commandless(in_place_job(script, str(state))), image=gone,
                           imagePullPolicy="Never"))
        ns.wait_running(3)
        uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in ns.items("pods")}
        cluster.ctr("images", "rm", gone)
        (state / "fail").touch()

        # the master is told waiting for its image (the workers' init container waits for
        # its name, which cluster DNS gives once it runs: they are on their way)
        def told() -> list[dict[str, Any]]:
            return list((ns.get("PyTorchJob", "inplace") or {}).get("status", {}).get(
                "waitingReplicas") or [])
        waiting = wait_for("the master told waiting for its image", told, 120)
        assert [(w["pod"], w["reason"]) for w in waiting] == [
            ("inplace-master-0", "ErrImageNeverPull")], waiting
        assert waiting[0]["message"] == (f'container pytorch: Container image "{gone}" is '
                                         "not present with pull policy of Never"), waiting
        warnings = [e for e in ns.items("events") if e["reason"] == "ErrImageNeverPull" and
                    e["involvedObject"]["kind"] == "PyTorchJob"]
        assert [e["type"] for e in warnings] == ["Warning"], warnings
        conditions = (ns.get("PyTorchJob", "inplace") or {})["status"]["conditions"]
        assert "Failed" not in {c["type"] for c in conditions}, conditions
        # the image back: the kubelet starts the containers at its next try, the same pods
        # run the next attempt, and nothing waits any more
        cluster.ctr("images", "tag", "--force", images.PYTHON, gone)
        done = ns.succeeds("PyTorchJob", "inplace", timeout=240)
        assert {p["metadata"]["name"]: p["metadata"]["uid"] for p in ns.items("pods")} == uids
        assert not done["status"].get("waitingReplicas"), done["status"]
        assert done["status"]["replicaStatuses"]["Worker"]["restarts"] == 1


def test_the_ddp_example_with_a_rank_killed_mid_training_restarts_its_processes_in_place(
        cluster: TestCluster, manager: None) -> None:
    with Namespace(cluster, "ddp-killed") as ns:
        run = node_once(cluster, ns.name, "ddp")
    status = run.job["status"]
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions["Succeeded"] == "True", status
    # the kill is the job's one failure; every rank's process started again in its
    # container (none restarted, no pod made again) and joined the group a second time
    last = status["lastFailure"]
    assert (last["pod"], last["exitCode"]) == ("ddp-worker-1", 137), last
    assert status["replicaStatuses"]["Worker"]["restarts"] == 1, status
    assert run.joined == {"ddp-master-0": 2, "ddp-worker-0": 2, "ddp-worker-1": 2}, run.joined
    for p in run.pods:
        main = next(c for c in p["status"]["containerStatuses"] if c["name"] == "pytorch")
        assert main["restartCount"] == 0, (p["metadata"]["name"], main)
        assert p["metadata"]["annotations"][inplace.ATTEMPT] == "1", p["metadata"]


# Rank 2's first attempt takes more memory than its container may have: the kernel's OOM
# killer ends it (its supervisor, far smaller, lives on). Its next attempt, and every other
# rank's, ends at once.
OOM = ("import os, sys, time\n"
       "from pathlib import Path\n"
       "state = Path('/state')\n"
       "if os.environ['TRAINOP_ATTEMPT'] != '0':\n"
       "    sys.exit(0)\n"
       "if os.environ['RANK'] == '2':\n"
       "    time.sleep(2); hog = bytearray(400 << 20)\n"
       "time.sleep(600)\n")


def test_a_rank_the_oom_killer_ends_in_its_live_container_is_told_oom_killed(
        cluster: TestCluster, manager: None) -> None:
    with Namespace(cluster, "supervised-oom") as ns:
        ns.apply(with_main(in_place_job(OOM, str(state_folder(cluster, ns))),
                           resources={"limits": {"memory": "128Mi"}}))
        done = ns.succeeds("PyTorchJob", "inplace", timeout=240)
        pods = ns.items("pods")
    # told as the kubelet tells a container that ran out of memory, though the container
    # lived on and only its rank's process was restarted
    last = done["status"]["lastFailure"]
    assert (last["pod"], last["exitCode"], last["reason"]) == (
        "inplace-worker-1", 137, "OOMKilled"), last
    for p in pods:
        main = next(c for c in p["status"]["containerStatuses"] if c["name"] == "pytorch")
        assert main["restartCount"] == 0, (p["metadata"]["name"], main)
