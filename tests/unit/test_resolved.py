"""The resolved job: one settled view of a defaulted job that every reader uses."""

from __future__ import annotations

import pytest

from tests.jobs import job, manifest
from trainop.api import parse_job
from trainop.api.model import NotDefaulted
from trainop.api.resolved import resolve


def test_counts_presence_and_slots_follow_the_spec_in_its_order() -> None:
    r = resolve(job("TFJob", {"Chief": 1, "PS": 0, "Worker": 2}))
    assert dict(r.replicas) == {"Chief": 1, "PS": 0, "Worker": 2}
    assert r.total == 3
    # one meaning of "present": a replica to run, not a key in the spec
    assert [rt for rt in ("Chief", "PS", "Worker", "Evaluator") if r.present(rt)] == [
        "Chief", "Worker"]
    assert r.replicas_of("Evaluator") == 0
    assert list(r.slots()) == [("Chief", 0), ("Worker", 0), ("Worker", 1)]
    assert r.in_spec("Worker", 1) and not r.in_spec("Worker", 2) and not r.in_spec("PS", 0)


def test_defaulting_decides_the_counts_the_view_reads() -> None:
    # MPI's workers default to 0 replicas, every other type to 1
    r = resolve(job("MPIJob", {"Launcher": None, "Worker": None}))
    assert dict(r.replicas) == {"Launcher": 1, "Worker": 0}
    assert not r.present("Worker")


@pytest.mark.parametrize(("kind", "replicas", "leader", "masters"), [
    ("TFJob", {"Chief": 1, "Worker": 2}, "Chief", {("Chief", 0)}),
    ("TFJob", {"Worker": 2}, "Worker", {("Worker", 0)}),
    ("PyTorchJob", {"Master": 1, "Worker": 1}, "Master", {("Master", 0)}),
    ("PyTorchJob", {"Worker": 2}, "Worker", {("Worker", 0)}),
    ("JAXJob", {"Worker": 2}, "Worker", {("Worker", 0)}),
    ("MPIJob", {"Launcher": 1, "Worker": 2}, "Launcher", {("Launcher", 0)}),
    ("XGBoostJob", {"Master": 1, "Worker": 1}, "Master", {("Master", 0)}),
    ("PaddleJob", {"Worker": 2}, "Worker", set()),
    ("MXJob", {"Server": 1, "Worker": 1, "Tuner": 1}, "Worker", set()),
], ids=lambda v: str(v))
def test_the_leader_and_the_master_role(kind: str, replicas: dict[str, int], leader: str,
                                        masters: set[tuple[str, int]]) -> None:
    """The first present type of the kind's master role leads; without one, worker 0 is
    the master where the kind says so (TF, PyTorch, JAX), else no replica is."""
    r = resolve(job(kind, replicas))
    assert r.leader == leader
    assert {s for s in r.slots() if r.is_master(*s)} == masters


@pytest.mark.parametrize(("policy", "scope", "pod"), [
    ("OnFailure", None, "OnFailure"),
    ("Always", None, "Always"),
    ("Never", None, "Never"),
    ("ExitCode", None, "Never"),
    ("OnFailure", "Job", "Never"),
])
def test_the_restart_policy_a_pod_gets(policy: str, scope: str | None, pod: str) -> None:
    spec = {"runPolicy": {"restartScope": scope}} if scope else None
    j = job("PyTorchJob", {"Master": 1, "Worker": 1}, spec=spec,
            replica_extra={"Worker": {"restartPolicy": policy}})
    r = resolve(j)
    assert r.restart_policies["Worker"] == policy
    assert r.pod_restart_policy("Worker") == pod


def test_a_job_that_skipped_defaulting_is_named_not_guessed_over() -> None:
    raw = parse_job(manifest("JAXJob", {"Worker": None}))
    with pytest.raises(NotDefaulted, match=r"^JAXJob default/.*jaxReplicaSpecs\[Worker\]"
                                           r"\.replicas is unset"):
        resolve(raw)


@pytest.mark.parametrize(("scope", "asked", "template_restarts", "flag", "in_place"), [
    ("Job", None, False, True, True),  # left to the manager's flag
    ("Job", None, False, False, False),
    ("Job", False, False, True, False),  # the job says, whatever the flag
    ("Job", True, False, False, True),
    ("Job", None, True, True, False),  # its template restarts its pods itself
    (None, None, False, True, False),  # replica by replica: nothing to restart together
])
def test_whole_job_restarts_are_in_place_as_the_job_then_the_flag_says(
        scope: str | None, asked: bool | None, template_restarts: bool, flag: bool,
        in_place: bool) -> None:
    policy: dict[str, object] = {}
    if scope:
        policy["restartScope"] = scope
    if asked is not None:
        policy["restartInPlace"] = asked
    container = {"name": "pytorch", "image": "i"}
    if template_restarts:
        container["restartPolicyRules"] = [{"action": "RestartAllContainers", "exitCodes": {
            "operator": "In", "values": [3]}}]  # type: ignore[assignment]
    j = job("PyTorchJob", spec={"runPolicy": policy}, replica_extra={
        "Worker": {"restartPolicy": "Never", "template": {"spec": {"containers": [container]}}}})
    assert resolve(j).restarts_in_place(flag) is in_place
