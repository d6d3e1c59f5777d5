"""The failure rules alone: a failed pod's verdict by restart policy, and the judgement on
a job's failed pods and limits, without running a reconcile."""

from __future__ import annotations

import pytest

from tests.jobs import job
from trainop.api import JobStatus, ReplicaStatus
from trainop.engine import PodState
from trainop.engine.failures import Verdict, classify, judge
from trainop.frameworks import framework_for

FW = framework_for("JAXJob")


@pytest.mark.parametrize(("policy", "exit_code", "verdict"), [
    ("Never", 0, Verdict.FAIL), ("Never", 137, Verdict.FAIL),
    ("OnFailure", 1, Verdict.RESTART), ("Always", 1, Verdict.RESTART),
    ("ExitCode", 1, Verdict.FAIL), ("ExitCode", 127, Verdict.FAIL),
    ("ExitCode", 128, Verdict.RESTART), ("ExitCode", 137, Verdict.RESTART),
    ("ExitCode", None, Verdict.RESTART),  # evicted: no exit code at all
    ("Unheard-of", 1, Verdict.FAIL),
], ids=["never-0", "never-137", "onfailure-evicted", "always", "exitcode-1", "exitcode-127",
        "exitcode-128", "exitcode-oom", "exitcode-evicted", "unknown-policy"])
def test_a_failed_pods_verdict(policy: str, exit_code: int | None, verdict: Verdict) -> None:
    assert classify(policy, PodState("p", "Worker", 0, "Failed", exit_code=exit_code)) \
        is verdict


def failed(name: str, index: int, code: int) -> PodState:
    return PodState(name, "Worker", index, "Failed", exit_code=code, reason="Error")


def test_nothing_failed_nothing_judged() -> None:
    j = job("JAXJob", {"Worker": 2})
    assert judge(j, [PodState("w0", "Worker", 0, "Running")], JobStatus(), FW) is None


def test_a_permanent_failure_fails_the_job_and_names_the_pod() -> None:
    j = job("JAXJob", {"Worker": 2}, replica_extra={"Worker": {"restartPolicy": "ExitCode"}})
    verdict = judge(j, [failed("w1", 1, 2), failed("w0", 0, 137)], JobStatus(), FW)
    assert verdict is not None and verdict.verdict is Verdict.FAIL
    assert verdict.reason == "JAXJobFailed"
    # upstream's words for an ExitCode replica's permanent code (common/pod.go:369), then
    # the failure that decided
    assert verdict.message == ('job "job" is failing because "Worker" replica(s) failed. '
                               "Last failure: pod w1 exited with code 2 (Error).")


def test_a_retryable_failure_restarts_its_pod_and_counts_it() -> None:
    j = job("JAXJob", {"Worker": 2}, replica_extra={"Worker": {"restartPolicy": "ExitCode"}})
    verdict = judge(j, [failed("w0", 0, 137), PodState("w1", "Worker", 1, "Running")],
                    JobStatus(), FW)
    assert verdict is not None and verdict.verdict is Verdict.RESTART
    assert [p.name for p in verdict.restart] == ["w0"] and verdict.recreations == {"Worker": 1}
    assert verdict.message == ("job job is restarting because Worker replica(s) failed. "
                               "Last failure: pod w0 exited with code 137 (Error).")  # pod.go:362


def test_the_backoff_limit_counts_what_the_status_remembers() -> None:
    j = job("JAXJob", {"Worker": 1}, spec={"runPolicy": {"backoffLimit": 2}},
            replica_extra={"Worker": {"restartPolicy": "ExitCode"}})
    status = JobStatus(replica_statuses={"Worker": ReplicaStatus(restarts=2)})
    verdict = judge(j, [failed("w0", 0, 137)], status, FW)
    assert verdict is not None and verdict.verdict is Verdict.FAIL
    assert verdict.reason == "JAXJobFailed"  # upstream: pkg/controller.v1/common/job.go:245


def test_a_replica_without_a_restart_policy_is_judged_by_its_kinds_default() -> None:
    # one reading of the restart policy for pods and failures, the one defaulting wrote: a
    # PyTorch worker left without one restarts as OnFailure, its pods' policy
    from tests.jobs import manifest
    from trainop.api import default_job, parse_job
    from trainop.api.model import NotDefaulted
    from trainop.api.resolved import resolve

    raw = parse_job(manifest("PyTorchJob", {"Master": 1, "Worker": 1}))
    assert raw.spec.replica_specs["Worker"].restart_policy is None
    defaulted = default_job(raw)
    assert resolve(defaulted).pod_restart_policy("Worker") == "OnFailure"
    verdict = judge(defaulted, [failed("pt-worker-0", 0, 1)], JobStatus(),
                    framework_for("PyTorchJob"))
    assert verdict is not None and verdict.verdict is Verdict.RESTART
    # a job that skipped defaulting is said by the field it lacks, never guessed over
    with pytest.raises(NotDefaulted, match=r"pytorchReplicaSpecs\[Master\]\.restartPolicy"):
        judge(raw, [failed("pt-worker-0", 0, 1)], JobStatus(), framework_for("PyTorchJob"))


def test_the_last_failure_names_the_node_container_time_and_message_of_the_first_to_fail(
        ) -> None:
    from tests.sim import Cluster
    from trainop.engine import Ended

    c = Cluster(job("PyTorchJob", {"Master": 1, "Worker": 2},
                    replica_extra={"Worker": {"restartPolicy": "ExitCode"}}))
    c.step()
    c.all("Running")
    c.step()
    # worker 1 failed first (CUDA); worker 0 lost its peer a second later
    c.set("job-worker-0", phase="Failed", exit_code=1, reason="Error", node="gpu-2",
          ended=Ended("pytorch", "2026-01-01T00:05:01Z", "connection reset by peer"))
    c.set("job-worker-1", phase="Failed", exit_code=1, reason="Error", node="gpu-1",
          ended=Ended("pytorch", "2026-01-01T00:05:00Z", "CUDA error: an illegal memory "
                      "access was encountered"))
    c.step()
    assert c.job.status is not None and c.job.status.last_failure is not None
    assert c.job.status.last_failure.to_dict() == {
        "replicaType": "Worker", "index": 1, "pod": "job-worker-1", "exitCode": 1,
        "reason": "Error", "time": "2026-01-01T00:05:00Z", "node": "gpu-1",
        "container": "pytorch",
        "message": "CUDA error: an illegal memory access was encountered"}
    failed = c.condition("Failed")
    # upstream's words first (both workers counted), then the first to fail
    assert failed.message == ('job "job" is failing because "Worker" replica(s) failed. '
                              "Last failure: pod job-worker-1 exited with code 1 (Error).")


@pytest.mark.parametrize("on", [False, True])
def test_logs_stand_in_for_a_missing_termination_message_with_the_flag(on: bool) -> None:
    from tests.sim import Cluster
    from trainop.engine import EngineConfig

    extra = {"Worker": {"template": {"spec": {"containers": [
        {"name": "pytorch", "image": "x"},
        {"name": "sidecar", "image": "x", "terminationMessagePolicy": "File"}]}}}}
    c = Cluster(job("PyTorchJob", {"Master": 1, "Worker": 1}, replica_extra=extra),
                config=EngineConfig(fallback_to_logs_on_error=on))
    c.step()
    policies = [ct.get("terminationMessagePolicy")
                for ct in c.pod("job-worker-0")["spec"]["containers"]]
    # the template's own choice is kept either way
    assert policies == (["FallbackToLogsOnError", "File"] if on else [None, "File"])
