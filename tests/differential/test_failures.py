"""Upstream v1.9.4 and trainop side by side when replicas fail: the lead replicas, MPI's
launcher and workers, restarts by recreation, the clean-pod policy and the TTL of a failed
job, an MPIJob's deadline."""

from __future__ import annotations

import json
import time

import pytest

from tests.differential.peers import Side, Sides
from tests.differential.test_side_by_side import check, job, never, past_the_ttl, running

pytestmark = pytest.mark.differential

LEADS = [("PyTorchJob", "job-master-0"), ("TFJob", "job-chief-0"), ("TFJob", "job-ps-0"),
         ("XGBoostJob", "job-master-0"), ("MPIJob", "job-launcher"), ("MPIJob", "job-worker-1")]


@pytest.mark.parametrize(("kind", "pod"), LEADS, ids=[f"{k}-{p}" for k, p in LEADS])
def test_a_lead_replica_that_fails_for_good(sides: Sides, kind: str, pod: str) -> None:
    found = running(sides, job(kind, replica_extra=never(kind)))
    sides.set_pod(pod, "Failed", exit_code=3)
    found += sides.compare(kind, "failed")
    check(sides, found)


@pytest.mark.parametrize("policy", ["All", "Running", "None"])
def test_the_clean_pod_policy_once_the_job_failed(sides: Sides, policy: str) -> None:
    found = running(sides, job("PyTorchJob", replica_extra=never("PyTorchJob"),
                               spec={"runPolicy": {"cleanPodPolicy": policy}}))
    sides.set_pod("job-worker-1", "Failed", exit_code=3)
    found += sides.compare("PyTorchJob", "failed")
    check(sides, found)


def test_the_ttl_deletes_a_failed_job(sides: Sides) -> None:
    found = running(sides, job("PyTorchJob", replica_extra=never("PyTorchJob"),
                               spec={"runPolicy": {"ttlSecondsAfterFinished": 2}}))
    sides.set_pod("job-worker-1", "Failed", exit_code=3)
    found += sides.compare("PyTorchJob", "failed")
    found += past_the_ttl(sides, "PyTorchJob")
    check(sides, found)


def test_restart_policy_always_remakes_a_failed_pod(sides: Sides) -> None:
    always = {rt: {"restartPolicy": "Always"} for rt in ("Master", "Worker")}
    found = running(sides, job("PyTorchJob", replica_extra=always))
    sides.set_pod("job-worker-0", "Failed", exit_code=1)
    found += sides.compare("PyTorchJob", "worker failed")
    sides.set_all("Running")
    found += sides.compare("PyTorchJob", "running again")
    check(sides, found)


def test_the_backoff_limit_counts_recreated_pods(sides: Sides) -> None:
    exit_code = {rt: {"restartPolicy": "ExitCode"} for rt in ("Master", "Worker")}
    found = running(sides, job("PyTorchJob", replica_extra=exit_code,
                               spec={"runPolicy": {"backoffLimit": 1}}))
    sides.set_pod("job-worker-0", "Failed", exit_code=137)  # retryable: made again
    found += sides.compare("PyTorchJob", "first retry")
    sides.set_all("Running")
    found += sides.compare("PyTorchJob", "running again")
    sides.set_pod("job-worker-0", "Failed", exit_code=137)  # the second: past the limit
    found += sides.compare("PyTorchJob", "second retry")
    check(sides, found)


def test_an_mpi_job_past_its_deadline(sides: Sides) -> None:
    found = running(sides, job("MPIJob", spec={"runPolicy": {"activeDeadlineSeconds": 3}}))
    time.sleep(4)
    found += sides.compare("MPIJob", "past the deadline")
    check(sides, found)


def test_a_pod_the_kubelet_evicted(sides: Sides) -> None:
    """A node-pressure eviction: the pod stays, Failed, with the DisruptionTarget condition
    (what --ignore-disruptions, shipped on, makes again uncounted)."""
    found = running(sides, job("PyTorchJob", replica_extra=never("PyTorchJob")))
    evicted = {"status": {"phase": "Failed", "reason": "Evicted", "conditions": [
        {"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet"}]}}

    def evict(side: Side) -> None:
        side.kube.kubectl("patch", "pod", "job-worker-1", "--subresource=status",
                          "--type=merge", "-p", json.dumps(evicted))
    sides.each(evict)
    found += sides.compare("PyTorchJob", "evicted")
    check(sides, found)


def test_an_mpi_worker_retried_under_exit_code(sides: Sides) -> None:
    exit_code = {rt: {"restartPolicy": "ExitCode"} for rt in ("Launcher", "Worker")}
    found = running(sides, job("MPIJob", replica_extra=exit_code))
    sides.set_pod("job-worker-0", "Failed", exit_code=137)  # retryable: made again
    found += sides.compare("MPIJob", "retried")
    check(sides, found)


def test_an_mpi_job_past_its_backoff_limit(sides: Sides) -> None:
    found = running(sides, job("MPIJob", spec={"runPolicy": {"backoffLimit": 1}}))
    sides.set_pod("job-worker-0", "Running", restarts=2, last_exit=1)  # restarted in place
    found += sides.compare("MPIJob", "restarted twice")
    check(sides, found)


def test_an_mpi_job_cleaned_up_and_deleted_after_success(sides: Sides) -> None:
    found = running(sides, job("MPIJob", spec={"runPolicy": {
        "cleanPodPolicy": "Running", "ttlSecondsAfterFinished": 2}}))
    sides.set_pod("job-launcher", "Succeeded", exit_code=0)
    found += sides.compare("MPIJob", "succeeded")
    found += past_the_ttl(sides, "MPIJob")
    check(sides, found)
