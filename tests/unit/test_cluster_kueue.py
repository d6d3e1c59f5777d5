"""The manager's reading of a queued job for Kueue (trainop/cluster/kueue.py): the state Kueue's
integration reads, and the admitted job the engine makes pods from."""

from __future__ import annotations

from typing import Any

from tests.jobs import TYPICAL, job, manifest
from trainop.api import Job, load_job
from trainop.cluster.kueue import admitted_job, job_state
from trainop.engine.queueing import JobState
from trainop.engine.workload import PodSetInfo


def with_status(status: dict[str, Any], suspend: bool = False) -> Job:
    doc = manifest("PyTorchJob", TYPICAL["PyTorchJob"],
                   spec={"runPolicy": {"suspend": suspend}})
    return load_job({**doc, "status": status})


def test_the_state_kueue_reads_of_a_job() -> None:
    fresh = job("PyTorchJob")
    assert job_state(fresh) == JobState(suspended=False, active=False, running=False,
                                        ended=None, started=False)
    status = {"startTime": "2026-12-03T08:00:00Z",
              "replicaStatuses": {"Master": {"active": 1}, "Worker": {"succeeded": 2}},
              "conditions": [{"type": "Running", "status": "True"}]}
    assert job_state(with_status(status)) == JobState(
        suspended=False, active=True, running=True, ended=None, started=True)
    status = {**status, "replicaStatuses": {"Master": {"failed": 1}}, "conditions": [
        {"type": "Running", "status": "False"},
        {"type": "Failed", "status": "True", "message": "it failed"}]}
    assert job_state(with_status(status, suspend=True)) == JobState(
        suspended=True, active=False, running=False, ended=(False, "it failed"), started=True)


def test_the_admission_goes_to_the_engines_copy_of_the_templates_only() -> None:
    j = job("PyTorchJob")
    info = PodSetInfo(labels={"kueue.x-k8s.io/podset": "worker"},
                      node_selector={"pool": "a"})
    admitted = admitted_job(j, {"worker": info})
    worker = admitted.spec.replica_specs["Worker"].template or {}
    assert worker["spec"]["nodeSelector"] == {"pool": "a"}
    assert worker["metadata"]["labels"] == {"kueue.x-k8s.io/podset": "worker"}
    assert "nodeSelector" not in (admitted.spec.replica_specs["Master"].template or {})["spec"]
    # the parsed job the manager keeps is not changed
    assert "nodeSelector" not in (j.spec.replica_specs["Worker"].template or {})["spec"]
    assert admitted_job(j, {}) is j
