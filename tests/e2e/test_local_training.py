"""`trainop run` with real frameworks: every rank takes part and the loss falls."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.ddp_kill import EPOCHS, killed_mid_training
from tests.e2e.conftest import EXAMPLES, losses, ranks_joined, trainop_run

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize(("example", "world"), [
    ("pytorch-ddp.yaml", 3), ("xgboost.yaml", 3), ("jax.yaml", 2), ("pytorch-elastic.yaml", 2),
    ("tensorflow.yaml", 2)])
def test_distributed_training_succeeds(tmp_path: Path, example: str, world: int) -> None:
    out = trainop_run(str(EXAMPLES / example), "--workdir", str(tmp_path / "run"), cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert ranks_joined(out.stdout) == {(r, world) for r in range(world)}
    curve = losses(out.stdout)
    assert len(curve) >= 5 and curve[-1] < curve[0] * 0.8, curve
    assert "Succeeded in" in out.stdout
    logs = sorted(p.name for p in (tmp_path / "run").glob("*.log"))
    assert len(logs) >= world and all(p.stat().st_size > 0 for p in (tmp_path / "run").glob(
        "*.log"))


def test_default_job_is_the_pytorch_ddp_example(tmp_path: Path) -> None:
    out = trainop_run("--workdir", str(tmp_path / "run"), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "from the built-in example pytorch-ddp.yaml" in out.stdout
    assert ranks_joined(out.stdout) == {(0, 3), (1, 3), (2, 3)}
    assert {p.name for p in (tmp_path / "run").glob("*.log")} == {
        "pytorch-ddp-master-0.log", "pytorch-ddp-worker-0.log", "pytorch-ddp-worker-1.log"}
    assert "[master-0] epoch 7 loss" in out.stdout
    # what a newcomer's first run shows: every replica ends once, cleanly, and nothing
    # warns of a missing package (torch imports numpy where it is there)
    # each replica seen to end is told once, with 0 (one still leaving when the master's
    # success ends the run is stopped with it, untold)
    ended = [line for line in out.stdout.splitlines() if "exited with code" in line]
    told = {f"trainop: ExitedWithCode: Pod: default.pytorch-ddp-{pod} exited with code 0"
            for pod in ("master-0", "worker-0", "worker-1")}
    assert len(ended) == len(set(ended)) and set(ended) <= told, ended
    assert "trainop: ExitedWithCode: Pod: default.pytorch-ddp-master-0 exited with code 0" \
        in ended
    assert "restarting" not in out.stdout
    assert "terminate called" not in out.stdout
    assert "Failed to initialize NumPy" not in out.stdout
    done = [line.split("] ", 1)[1] for line in out.stdout.splitlines() if line.endswith(" done")]
    assert sorted(done) == ["rank 0 done", "rank 1 done", "rank 2 done"]
    # the master reports its epochs and loss: lines as they come (no terminal here), the
    # last at the end; the workers report nothing (only the master has the file)
    told = [line for line in out.stdout.splitlines() if line.startswith("trainop: progress:")]
    assert told and len(told) <= 8, told
    summary = [line for line in out.stdout.splitlines() if line.startswith("  progress ")]
    assert len(summary) == 1 and re.fullmatch(
        r"  progress    100%, epoch 8 of 8, loss 0\.0\d+", summary[0]), out.stdout
    assert told[-1] == "trainop: progress: " + summary[0].split(None, 1)[1]
    assert [p.name for p in (tmp_path / "run").glob("*.progress.json")] == [
        "pytorch-ddp-master-0.progress.json"]


def test_replicas_override(tmp_path: Path) -> None:
    out = trainop_run(str(EXAMPLES / "jax.yaml"), "--replicas", "worker=3", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert ranks_joined(out.stdout) == {(0, 3), (1, 3), (2, 3)}


def test_dmlc_layout_runs(tmp_path: Path) -> None:
    out = trainop_run(str(EXAMPLES / "mxnet.yaml"), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "scheduler: registered ['server', 'worker', 'worker']" in out.stdout


def test_paddle_collective_runs(tmp_path: Path) -> None:
    out = trainop_run(str(EXAMPLES / "paddle.yaml"), cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    # paddle.distributed.launch's own check, on each of the two workers
    assert "[worker-0] Distributed training completed" in out.stdout
    assert "[worker-1] Distributed training completed" in out.stdout


@pytest.mark.parametrize("example", ["mpi.yaml", "mpi-ssh.yaml", "mpi-v2beta1.yaml"])
def test_mpi_allreduce_under_mpirun(tmp_path: Path, example: str) -> None:
    # both transports, and mpi-operator's v2beta1 API: mpirun starts the ranks on this
    # machine (the kubectl-exec agent is in place, executable, and never needed for
    # 127.0.0.1)
    out = trainop_run(str(EXAMPLES / example), cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert ranks_joined(out.stdout) == {(0, 2), (1, 2)}
    assert out.stdout.count("allreduce sum 3") == 2


def test_the_ddp_example_with_a_rank_killed_mid_training_restarts_in_place(
        tmp_path: Path) -> None:
    run = killed_mid_training(tmp_path / "run")
    out = run.output
    assert run.returncode == 0, out
    # the killed rank's end is the job's failure; every rank's process started again where
    # it was (none made again), joined the group anew and trained to the end
    assert "pod pytorch-ddp-worker-1 exited with code 137 (SIGKILL); all replicas restart" \
        in out, out
    assert "RestartingInPlace: Restarting the 3 pod(s) of the job in place, attempt 1" in out
    deleted = [line for line in out.splitlines() if "SuccessfulDeletePod" in line]
    assert all("(job finished)" in line for line in deleted), deleted
    joined = [line for line in out.splitlines() if "of world size 3 joined" in line]
    assert sorted(joined) == sorted([f"[{pod}] rank {rank} of world size 3 joined"
                                     for pod, rank in (("master-0", 0), ("worker-0", 1),
                                                       ("worker-1", 2))] * 2), joined
    resumed = out[out.index("attempt 1 starts"):]
    curve = losses(resumed)
    assert len(curve) >= 5 and curve[-1] < curve[0] * 0.8, curve
    assert f"[master-0] epoch {EPOCHS - 1} loss" in resumed
