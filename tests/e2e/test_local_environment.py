"""`trainop run` from a venv that is not activated: every process a replica starts (mpirun's
ranks, torchrun's workers, `python` found on PATH, console scripts) runs in trainop's own
Python environment, never in the machine's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.e2e.conftest import EXAMPLES, ranks_joined
from trainop.local.process import environment_bin

pytestmark = pytest.mark.e2e

SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@pytest.fixture
def bare_env(tmp_path: Path) -> dict[str, str]:
    """An environment as a login shell has it: only the system folders on PATH, no venv
    activated, and, first on PATH, a `python` that is not this one (as a machine whose own
    Python lacks the framework has: a rank that picks it up fails loudly)."""
    decoy = tmp_path / "decoy-bin"
    decoy.mkdir()
    for name in ("python", "python3"):
        script = decoy / name
        script.write_text("#!/bin/sh\necho 'the wrong python ran' >&2\nexit 3\n")
        script.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = f"{decoy}:{SYSTEM_PATH}"
    return env


def run(*args: str, cwd: Path, env: dict[str, str],
        stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    # the interpreter by its full path, as `.venv/bin/trainop run` would be called
    return subprocess.run([sys.executable, "-m", "trainop.cli", "run", "--no-live", *args],
                          cwd=cwd, env=env, input=stdin, capture_output=True, text=True,
                          timeout=300)


def test_mpirun_ranks_run_in_trainops_environment(tmp_path: Path,
                                                  bare_env: dict[str, str]) -> None:
    out = run(str(EXAMPLES / "mpi.yaml"), cwd=tmp_path, env=bare_env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "the wrong python ran" not in out.stdout + out.stderr
    assert ranks_joined(out.stdout) == {(0, 2), (1, 2)}
    assert out.stdout.count("allreduce sum 3") == 2


TORCHRUN_TRAINER = """
import subprocess, sys, torch.distributed as dist
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
print(f"rank {rank} of world size {world} joined", flush=True)
# a plain `python` from PATH, as a training script's helper would start it
found = subprocess.run(["python", "-c", "import sys, torch; print(sys.prefix)"],
                       capture_output=True, text=True, check=True).stdout.strip()
print(f"rank {rank}: python on PATH is {found} (torchrun's is {sys.prefix})", flush=True)
dist.destroy_process_group()
"""


def test_torchrun_workers_and_python_on_path_run_in_trainops_environment(
        tmp_path: Path, bare_env: dict[str, str]) -> None:
    trainer = tmp_path / "train.py"
    trainer.write_text(TORCHRUN_TRAINER)
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "tr"},
           "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 1, "restartPolicy": "Never",
                    "template": {"spec": {"containers": [{
                        "name": "pytorch", "image": "pytorch",
                        # a console script of the environment, found on PATH
                        "command": ["torchrun", "--standalone", "--nproc-per-node", "2",
                                    str(trainer)]}]}}}}}}
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(job))
    out = run("job.yaml", cwd=tmp_path, env=bare_env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert ranks_joined(out.stdout) == {(0, 2), (1, 2)}
    assert out.stdout.count(f"python on PATH is {sys.prefix} (torchrun's is {sys.prefix})") \
        == 2, out.stdout


def test_dry_run_shows_the_environment_first_on_path(tmp_path: Path,
                                                     bare_env: dict[str, str]) -> None:
    doc = yaml.safe_load((EXAMPLES / "jax.yaml").read_text())
    container = doc["spec"]["jaxReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    container["env"] = [{"name": "PATH", "value": "/opt/tools/bin"}]  # the job's own PATH
    out = run("--dry-run", "-", cwd=tmp_path, env=bare_env, stdin=yaml.safe_dump(doc))
    assert out.returncode == 0, out.stderr
    report = yaml.safe_load(out.stdout)
    for replica in report["replicas"]:
        assert replica["env"]["PATH"] == f"{environment_bin()}:/opt/tools/bin", replica


def test_environment_bin_holds_this_interpreter() -> None:
    assert Path(environment_bin(), Path(sys.executable).name).exists()


def test_a_pod_field_and_a_reference_to_it_are_filled_in_locally(tmp_path: Path) -> None:
    # PaddleJob rank 0 gets PADDLE_MASTER=$(POD_IP_DUMMY):port with POD_IP_DUMMY from the
    # pod's IP (upstream's envvar.go:80-92): as a process, the pod's IP is 127.0.0.1 and the
    # reference is expanded as the kubelet expands it
    script = ("import os; print(os.environ['PADDLE_MASTER'], os.environ.get('POD_IP_DUMMY'), "
              "os.environ['NAME'], flush=True)")
    container = {"name": "paddle", "image": "python:3.11", "command": ["python", "-c", script],
                 "env": [{"name": "NAME", "valueFrom": {"fieldRef": {
                     "fieldPath": "metadata.name"}}}]}
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PaddleJob", "metadata": {"name": "pd"},
           "spec": {"paddleReplicaSpecs": {"Worker": {"replicas": 2, "restartPolicy": "Never",
                                                      "template": {"spec": {
                                                          "containers": [container]}}}}}}
    out = subprocess.run([sys.executable, "-m", "trainop.cli", "run", "--no-live", "-"],
                         cwd=tmp_path, input=yaml.safe_dump(job), capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = {line.split("] ", 1)[0][1:]: line.split("] ", 1)[1]
             for line in out.stdout.splitlines() if line.startswith("[worker-")}
    master, ip, name = lines["worker-0"].split()
    assert (ip, name) == ("127.0.0.1", "pd-worker-0") and master.startswith("127.0.0.1:")
    assert lines["worker-1"].split()[0] == master  # every rank finds rank 0's master
