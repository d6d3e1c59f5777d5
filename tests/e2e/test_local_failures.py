"""Restarts, failures, timeouts and Ctrl-C in `trainop run`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml

from tests.e2e.conftest import EXAMPLES, processes_with, trainop_run

pytestmark = pytest.mark.e2e


def job(script: str, policy: str = "ExitCode", workers: int = 2, **run_policy: object) -> str:
    """A JAXJob (any kind would do) whose workers run `script` with plain Python."""
    template = {"spec": {"containers": [{"name": "jax", "image": "python:3.11",
                                         "command": ["python", "-c", script]}]}}
    return yaml.safe_dump({
        "apiVersion": "kubeflow.org/v1", "kind": "JAXJob", "metadata": {"name": "t"},
        "spec": {"runPolicy": run_policy, "jaxReplicaSpecs": {
            "Worker": {"replicas": workers, "restartPolicy": policy, "template": template}}}})


KILLED_ONCE = """
import os, pathlib, signal
marker = pathlib.Path(f"killed-{os.environ['PROCESS_ID']}")
if os.environ["PROCESS_ID"] == "1" and not marker.exists():
    marker.write_text("x")
    print("killing myself", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
print("worker", os.environ["PROCESS_ID"], "finished", flush=True)
"""


def test_exit_137_restarts_the_replica_then_succeeds(tmp_path: Path) -> None:
    out = trainop_run("-", "--workdir", str(tmp_path), cwd=tmp_path, stdin=job(KILLED_ONCE))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "[worker-1] killing myself" in out.stdout
    assert "JAXJobRestarting" in out.stdout
    assert "pod t-worker-1 exited with code 137 (SIGKILL)" in out.stdout
    assert "[worker-1] worker 1 finished" in out.stdout
    assert "Succeeded in" in out.stdout
    # each ended pod's code, once, in upstream's words, as in a cluster (common/pod.go:343)
    for pod, code in (("t-worker-1", 137), ("t-worker-1", 0), ("t-worker-0", 0)):
        assert f"ExitedWithCode: Pod: default.{pod} exited with code {code}" in out.stdout, pod
    assert out.stdout.count("ExitedWithCode") == 3


def test_exit_1_fails_the_job_and_names_the_replica(tmp_path: Path) -> None:
    script = "import os, sys; sys.exit(1 if os.environ['PROCESS_ID'] == '0' else 0)"
    out = trainop_run("-", cwd=tmp_path, stdin=job(script))
    assert out.returncode == 1
    # an ExitCode replica's permanent code, in upstream's words (common/pod.go:369)
    assert ('Failed      True  JAXJobFailed: job "t" is failing because "Worker" replica(s) '
            "failed. Last failure: pod t-worker-0 exited with code 1 (Error).") \
        in out.stdout, out.stdout


def test_onfailure_restarts_in_place_until_the_backoff_limit(tmp_path: Path) -> None:
    out = trainop_run("-", cwd=tmp_path, stdin=job("raise SystemExit(3)", policy="OnFailure",
                                                   workers=1, backoffLimit=2), timeout=120)
    assert out.returncode == 1, out.stdout
    assert "exited with code 3; restarting" in out.stdout
    assert "JAXJobFailed: Job t has failed because it has reached the specified backoff limit" \
        in out.stdout


def test_timeout_stops_everything(tmp_path: Path) -> None:
    marker = f"TRAINOP_TEST={uuid.uuid4().hex}"
    out = trainop_run("-", "--timeout", "3", "--env", marker, cwd=tmp_path,
                      stdin=job("import time; time.sleep(600)", policy="Never"))
    assert out.returncode == 124
    assert "TimedOut in" in out.stdout
    assert processes_with(marker) == []


def running(tmp_path: Path, script: str, workers: int) -> tuple[subprocess.Popen[str], str]:
    """`trainop run` of `workers` replicas running `script`, once each has printed `up`;
    and the marker in their environment."""
    marker = f"TRAINOP_TEST={uuid.uuid4().hex}"
    manifest = tmp_path / "job.yaml"
    manifest.write_text(job(script, policy="Never", workers=workers))
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainop.cli", "run", "--no-live", str(manifest), "--env", marker],
        cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    assert proc.stdout is not None
    seen = 0
    deadline = time.monotonic() + 60
    while seen < workers and time.monotonic() < deadline:
        if "] up" in proc.stdout.readline():
            seen += 1
    assert seen == workers
    return proc, marker


def test_ctrl_c_leaves_no_process_behind(tmp_path: Path) -> None:
    script = ("import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
              "print('up', flush=True)\ntime.sleep(600)\n")  # ignores SIGTERM: needs SIGKILL
    proc, marker = running(tmp_path, script, workers=3)
    assert len(processes_with(marker)) >= 3
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    assert "Interrupted" in out
    assert processes_with(marker) == []


def test_a_container_without_command_is_refused(tmp_path: Path) -> None:
    doc = yaml.safe_load(job("pass"))
    del doc["spec"]["jaxReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["command"]
    out = trainop_run("-", cwd=tmp_path, stdin=yaml.safe_dump(doc))
    assert out.returncode == 2
    assert out.stderr.strip().endswith("has no command (locally trainop runs the container's "
                                       "command and args)")
    assert "Traceback" not in out.stderr


def test_invalid_job_is_refused_with_every_problem(tmp_path: Path) -> None:
    doc = yaml.safe_load(job("pass"))
    doc["spec"]["jaxReplicaSpecs"]["Master"] = doc["spec"]["jaxReplicaSpecs"]["Worker"]
    doc["spec"]["runPolicy"] = {"backoffLimit": -1}
    out = trainop_run("-", cwd=tmp_path, stdin=yaml.safe_dump(doc))
    assert out.returncode == 2
    assert "spec.jaxReplicaSpecs[Master]: unknown replica type" in out.stderr
    assert "spec.runPolicy.backoffLimit: must be 0 or more, got -1" in out.stderr


@pytest.mark.parametrize("policy", ["Never", "OnFailure", "ExitCode"])
def test_a_program_that_does_not_exist_fails_the_job(tmp_path: Path, policy: str) -> None:
    doc = yaml.safe_load(job("pass", policy=policy, workers=1))
    doc["spec"]["jaxReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["command"] = [
        "no-such-program-here", "--flag"]
    out = trainop_run("-", cwd=tmp_path, stdin=yaml.safe_dump(doc), timeout=60)
    # bad input for a local run, whatever the restart policy: one line, exit 2, at once
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stderr.strip().splitlines() == [
        "trainop: pod t-worker-0: cannot start 'no-such-program-here': [Errno 2] No such file "
        "or directory: 'no-such-program-here'"]
    assert "restarting" not in out.stdout  # not restarted in place: it would not be there


def test_an_env_name_the_os_refuses_fails_the_job(tmp_path: Path) -> None:
    doc = yaml.safe_load(job("pass", policy="Never", workers=1))
    doc["spec"]["jaxReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "A=B", "value": "1"}]
    out = trainop_run("-", cwd=tmp_path, stdin=yaml.safe_dump(doc), timeout=60)
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stderr.startswith("trainop: pod t-worker-0: cannot start") and \
        "illegal environment variable name" in out.stderr


def test_a_config_map_volume_without_a_name_is_no_mount(tmp_path: Path) -> None:
    doc = yaml.safe_load(job("print('ran', flush=True)", policy="Never", workers=1))
    pod = doc["spec"]["jaxReplicaSpecs"]["Worker"]["template"]["spec"]
    pod["volumes"] = [{"name": "cfg", "configMap": {}}]
    pod["containers"][0]["volumeMounts"] = [{"name": "cfg", "mountPath": "/etc/cfg"}]
    out = trainop_run("-", cwd=tmp_path, stdin=yaml.safe_dump(doc), timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "[worker-0] ran" in out.stdout


def test_a_closed_terminal_leaves_no_process_behind(tmp_path: Path) -> None:
    proc, marker = running(tmp_path, "import time\nprint('up', flush=True)\ntime.sleep(600)\n",
                           workers=2)
    proc.send_signal(signal.SIGHUP)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    assert processes_with(marker) == []


def refusal_in_the_workdir(tmp_path: Path, work: Path) -> str:
    """A one-replica run in `work` that must not start: the one line it ends with."""
    out = trainop_run("-", "--workdir", str(work), cwd=tmp_path, timeout=60,
                      stdin=job("print('ran', flush=True)", policy="Never", workers=1))
    assert out.returncode == 2 and "ran" not in out.stdout, out.stdout + out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_a_link_planted_in_the_workdir_is_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    work = tmp_path / "shared"
    work.mkdir()
    (work / "t-worker-0.log").symlink_to(victim)
    assert refusal_in_the_workdir(tmp_path, work) == (
        f"trainop: {work}/t-worker-0.log: a symbolic link or not a file; trainop writes only "
        "files it creates")
    assert victim.read_text() == "keep me\n"


def test_a_workdir_others_may_write_in_is_not_used(tmp_path: Path) -> None:
    """A folder anyone may write in, without the sticky bit: another user could rename
    the run folder away and put hers in its place; the run refuses in one line."""
    work = tmp_path / "shared"
    work.mkdir()
    work.chmod(0o777)
    line = refusal_in_the_workdir(tmp_path, work)
    assert line.startswith(f"trainop: {work}: "), line
    assert "mode 777, no sticky bit" in line, line
    assert list(work.iterdir()) == []  # nothing written there


@pytest.mark.skipif(os.geteuid() != 0, reason="making a file of another user needs root")
def test_a_file_another_user_made_in_the_workdir_is_not_used(tmp_path: Path) -> None:
    """A shared folder where another user pre-created the replica's log: she would read it
    (and for an MPI launcher, replace its script); the run refuses in one line."""
    work = tmp_path / "shared"
    work.mkdir()
    theirs = work / "t-worker-0.log"
    theirs.write_text("")
    os.chown(theirs, 65534, 65534)
    assert refusal_in_the_workdir(tmp_path, work) == (
        f"trainop: {theirs}: a file of uid 65534, not this user's (uid 0); trainop writes "
        "only in folders and files of its own")
    assert theirs.read_text() == ""


def test_a_pod_failure_policy_and_the_last_failure_are_the_clusters_locally(
        tmp_path: Path) -> None:
    script = ("import os, sys\n"
              "if os.environ['PROCESS_ID'] == '1':\n"
              "    print('shard 3 is corrupt', flush=True); sys.exit(42)\n"
              "import time; time.sleep(30)\n")
    policy = {"rules": [{"action": "FailJob",
                         "onExitCodes": {"operator": "In", "values": [42]}}]}
    out = trainop_run("-", cwd=tmp_path, stdin=job(script, policy="Never",
                                                   podFailurePolicy=policy))
    assert out.returncode == 1, out.stdout + out.stderr
    # the Job API's reason and words, as on a cluster; then the replica's last lines
    assert ("Failed      True  PodFailurePolicy: Container jax for pod default/t-worker-1 "
            "failed with exit code 42 matching FailJob rule at index 0") in out.stdout, \
        out.stdout
    assert "last failure: pod t-worker-1 (container jax) exited with code 42" in out.stdout
    assert "    shard 3 is corrupt" in out.stdout


# Worker 1 kills itself in the first attempt; the others would sleep through it (one ignores
# SIGTERM, so it needs SIGKILL); in the next attempt each prints its attempt and ends.
IN_PLACE = """
import os, signal, time
attempt, me = os.environ["TRAINOP_ATTEMPT"], os.environ["PROCESS_ID"]
print(f"attempt {attempt} pid {os.getpid()}", flush=True)
if attempt == "0":
    if me == "2":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if me == "1":
        time.sleep(1)
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(600)
"""


@pytest.mark.parametrize("asked_by", ["flag", "job"])
def test_a_whole_job_restart_restarts_the_processes_in_place(tmp_path: Path,
                                                            asked_by: str) -> None:
    marker = f"TRAINOP_TEST={uuid.uuid4().hex}"
    policy: dict[str, object] = {"restartScope": "Job", "backoffLimit": 2}
    flags = ["--env", marker, "--workdir", str(tmp_path / "run")]
    if asked_by == "flag":
        flags.append("--restart-in-place")
    else:
        policy["restartInPlace"] = True
    out = trainop_run("-", *flags, cwd=tmp_path, timeout=120,
                      stdin=job(IN_PLACE, workers=3, **policy))
    assert out.returncode == 0, out.stdout + out.stderr
    # the failed rank's end, told as the job's failure; the others stopped, none remade
    assert "pod t-worker-1 exited with code 137 (SIGKILL); all replicas restart" in out.stdout
    assert "RestartingInPlace: Restarting the 3 pod(s) of the job in place, attempt 1" \
        in out.stdout, out.stdout
    for w in (0, 2):
        assert f"[worker-{w}] attempt 1: stopping attempt 0" in out.stdout, out.stdout
    assert "AttemptReleased: Every pod stopped for attempt 1, which starts" in out.stdout
    assert "SuccessfulDeletePod" not in out.stdout and "Deleted" not in out.stdout
    # each pod's one log: both attempts, each a new process with its attempt in its env
    for w in range(3):
        log = (tmp_path / "run" / f"t-worker-{w}.log").read_text()
        pids = [line.split()[-1] for line in log.splitlines() if line.startswith("attempt")]
        assert [line.split()[1] for line in log.splitlines() if line.startswith("attempt")] \
            == ["0", "1"], log
        assert len(set(pids)) == 2, log
    assert processes_with(marker) == []


def test_without_restart_in_place_a_whole_job_restart_makes_the_pods_again(
        tmp_path: Path) -> None:
    script = IN_PLACE.replace('os.environ["TRAINOP_ATTEMPT"]',
                              '"1" if os.path.exists("failed") else "0"').replace(
        "os.kill(", "open('failed', 'w').close(); os.kill(")
    out = trainop_run("-", "--workdir", str(tmp_path), cwd=tmp_path, timeout=120,
                      stdin=job(script, workers=3, restartScope="Job", backoffLimit=2))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "RestartingInPlace" not in out.stdout
    assert "SuccessfulDeletePod: Deleted 3 pod(s)" in out.stdout, out.stdout


def test_an_mpi_job_restarted_in_place_holds_its_workers_without_making_them_again(
        tmp_path: Path) -> None:
    # the workers have no process of their own locally (the launcher starts the ranks):
    # they are held and released with the launcher's attempt, never made again
    doc = yaml.safe_load((EXAMPLES / "mpi.yaml").read_text())
    doc["spec"]["runPolicy"] = {"restartScope": "Job", "restartInPlace": True,
                                "backoffLimit": 2}
    launcher = doc["spec"]["mpiReplicaSpecs"]["Launcher"]
    launcher["restartPolicy"] = "ExitCode"
    launcher["template"]["spec"]["containers"][0]["command"] = [
        "sh", "-c", "if [ ! -e failed ]; then touch failed; exit 137; fi; "
                    "echo attempt $TRAINOP_ATTEMPT"]
    out = trainop_run("-", "--workdir", str(tmp_path / "run"), cwd=tmp_path, timeout=60,
                      stdin=yaml.safe_dump(doc))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "RestartingInPlace: Restarting the 3 pod(s) of the job in place, attempt 1" \
        in out.stdout, out.stdout
    assert "[launcher] attempt 1" in out.stdout, out.stdout
    deleted = [line for line in out.stdout.splitlines() if "SuccessfulDeletePod" in line]
    assert all("(job finished)" in line for line in deleted), deleted
