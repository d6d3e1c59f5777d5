"""Upstream v1.9.4 and trainop given the same manifests and the same pod phases: what each
makes and reports (objects, job status, events, webhook answers) must be the same after each
step, or be covered by a row of the README's differences table."""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import pytest

from tests.differential import peers
from tests.differential.peers import (
    LEDGER,
    Sides,
    answer_difference,
    patterns,
)
from tests.integration.kube import REPO
from tests.jobs import TYPICAL, manifest
from trainop.api import read_documents

pytestmark = pytest.mark.differential

UPSTREAM_KINDS = ("TFJob", "PyTorchJob", "MPIJob", "XGBoostJob", "PaddleJob", "JAXJob")
REPLICA_KINDS = ("TFJob", "PyTorchJob", "XGBoostJob", "PaddleJob", "JAXJob")
"""The kinds whose job logic is upstream's common one (MPIJob has its own)."""
WEBHOOK_KINDS = ("TFJob", "PyTorchJob", "XGBoostJob", "PaddleJob", "JAXJob")


def job(kind: str, **kw: Any) -> dict[str, Any]:
    """A typical job of `kind` named `job`, as a user would submit it."""
    doc = manifest(kind, TYPICAL[kind], **kw)
    del doc["metadata"]["uid"], doc["metadata"]["namespace"]
    return doc


def never(kind: str) -> dict[str, dict[str, Any]]:
    return {rt: {"restartPolicy": "Never"} for rt in TYPICAL[kind]}


def submit(sides: Sides, doc: dict[str, Any]) -> None:
    up, ours = sides.submit(doc)
    assert up.allowed and all(a.allowed for a in ours.values()), (ours, up)


def running(sides: Sides, doc: dict[str, Any]) -> list[str]:
    """Submit `doc` on every side, let its pods be made and set them Running: what differs
    at the step "running"."""
    submit(sides, doc)
    sides.settle(doc["kind"])
    sides.set_all("Running")
    return sides.compare(doc["kind"], "running")


def past_the_ttl(sides: Sides, kind: str) -> list[str]:
    """Wait out a finished job's 2-second TTL: what differs then (the job is gone from every
    side, or this fails)."""
    time.sleep(3)
    found = sides.compare(kind, "past the ttl")
    for side in sides.sides:
        assert side.kube.items(f"{kind.lower()}s.kubeflow.org") == [], side.name
    return found


def check(sides: Sides, found: list[str]) -> None:
    """Fails on a difference the README's table does not cover (peers.check)."""
    peers.check(sides, found, LEDGER)


@pytest.mark.parametrize("kind", UPSTREAM_KINDS)
def test_a_job_that_succeeds(sides: Sides, kind: str) -> None:
    submit(sides, job(kind))
    found = sides.compare(kind, "created")
    sides.set_all("Running")
    found += sides.compare(kind, "running")
    sides.set_all("Succeeded", exit_code=0)
    found += sides.compare(kind, "succeeded")
    check(sides, found)


EXAMPLES = sorted(p for p in (REPO / "trainop" / "examples").glob("*.yaml")
                  if p.name not in ("mxnet.yaml", "mpi-ssh.yaml", "mpi-v2beta1.yaml"))
"""Every example of an upstream kind (MXJob has none upstream; mpi-ssh's transport is
trainop's own field, which upstream's CRD does not declare; mpi-v2beta1 is mpi-operator's
API, which upstream does not serve: test_mpi_operator.py runs it beside mpi-operator)."""


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example(sides: Sides, path: Path) -> None:
    (doc,) = read_documents(str(path))
    doc["metadata"].pop("namespace", None)
    submit(sides, doc)
    kind = doc["kind"]
    found = sides.compare(kind, "created")
    sides.set_all("Running")
    found += sides.compare(kind, "running")
    check(sides, found)


@pytest.mark.parametrize("kind", REPLICA_KINDS)
def test_a_replica_that_fails_for_good(sides: Sides, kind: str) -> None:
    found = running(sides, job(kind, replica_extra=never(kind)))
    sides.set_pod("job-worker-1", "Failed", exit_code=3)
    found += sides.compare(kind, "failed")
    check(sides, found)


def test_exit_code_retries_a_retryable_code_and_fails_on_another(sides: Sides) -> None:
    exit_code = {rt: {"restartPolicy": "ExitCode"} for rt in ("Master", "Worker")}
    found = running(sides, job("PyTorchJob", replica_extra=exit_code))
    sides.set_pod("job-worker-0", "Failed", exit_code=137)  # retryable: recreated
    found += sides.compare("PyTorchJob", "retried")
    sides.set_all("Running")
    found += sides.compare("PyTorchJob", "running again")
    sides.set_pod("job-worker-1", "Failed", exit_code=1)  # permanent
    found += sides.compare("PyTorchJob", "failed")
    check(sides, found)


def test_the_backoff_limit_fails_a_job_whose_pods_keep_restarting(sides: Sides) -> None:
    found = running(sides, job("PyTorchJob", spec={"runPolicy": {"backoffLimit": 1}}))
    # restarts in place (OnFailure), as the kubelet counts them
    sides.set_pod("job-worker-0", "Running", restarts=2, last_exit=1)
    found += sides.compare("PyTorchJob", "restarted twice")
    check(sides, found)


def test_the_deadline_ends_a_running_job(sides: Sides) -> None:
    found = running(sides, job("PyTorchJob", spec={"runPolicy": {"activeDeadlineSeconds": 3}}))
    time.sleep(4)
    found += sides.compare("PyTorchJob", "past the deadline")
    check(sides, found)


def test_the_ttl_deletes_a_finished_job(sides: Sides) -> None:
    submit(sides, job("PyTorchJob", spec={"runPolicy": {"ttlSecondsAfterFinished": 2}}))
    sides.settle("PyTorchJob")
    sides.set_all("Running")
    sides.set_all("Succeeded", exit_code=0)
    found = sides.compare("PyTorchJob", "succeeded")
    found += past_the_ttl(sides, "PyTorchJob")
    check(sides, found)


@pytest.mark.parametrize("policy", ["All", "Running", "None"])
def test_the_clean_pod_policy_once_the_job_succeeded(sides: Sides, policy: str) -> None:
    submit(sides, job("PyTorchJob", spec={"runPolicy": {"cleanPodPolicy": policy}}))
    sides.settle("PyTorchJob")
    sides.set_all("Running")
    sides.set_pod("job-worker-1", "Succeeded", exit_code=0)
    found = sides.compare("PyTorchJob", "one worker done")
    sides.set_pod("job-master-0", "Succeeded", exit_code=0)  # the job succeeds
    found += sides.compare("PyTorchJob", "succeeded")
    check(sides, found)


def test_suspend_and_resume(sides: Sides) -> None:
    doc = job("PyTorchJob")
    found = running(sides, doc)
    suspended = copy.deepcopy(doc)
    suspended["spec"]["runPolicy"] = {"suspend": True}
    submit(sides, suspended)
    found += sides.compare("PyTorchJob", "suspended")
    submit(sides, doc | {"spec": {**doc["spec"], "runPolicy": {"suspend": False}}})
    found += sides.compare("PyTorchJob", "resumed")
    check(sides, found)


def test_a_job_created_suspended_makes_nothing(sides: Sides) -> None:
    submit(sides, job("JAXJob", spec={"runPolicy": {"suspend": True}}))
    check(sides, sides.compare("JAXJob", "created suspended"))


def test_a_job_another_controller_manages_is_left_alone(sides: Sides) -> None:
    submit(sides, job("PyTorchJob", spec={"runPolicy": {
        "managedBy": "kueue.x-k8s.io/multikueue"}}))
    found = sides.compare("PyTorchJob", "created")
    for side in sides.sides:
        assert side.kube.items("pods") == [], side.name
    check(sides, found)


def test_elastic_pytorch_gets_its_autoscaler(sides: Sides) -> None:
    doc = job("PyTorchJob")
    doc["spec"]["elasticPolicy"] = {
        "minReplicas": 1, "maxReplicas": 3, "rdzvBackend": "c10d", "maxRestarts": 3,
        "metrics": [{"type": "Resource", "resource": {
            "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]}
    del doc["spec"]["pytorchReplicaSpecs"]["Master"]
    submit(sides, doc)
    found = sides.compare("PyTorchJob", "created")
    sides.set_all("Running")
    found += sides.compare("PyTorchJob", "running")
    check(sides, found)


def _invalid(kind: str) -> dict[str, dict[str, Any]]:
    """Jobs upstream's webhook refuses (pkg/webhooks/*), and ones only trainop's refuses, by
    what is wrong with them."""
    info_container = manifest(kind, TYPICAL[kind])["spec"]
    field = next(iter(info_container))
    cases: dict[str, dict[str, Any]] = {}

    def case(name: str, change: Any) -> None:
        doc = job(kind)
        change(doc["spec"][field])
        cases[name] = doc

    first = next(iter(TYPICAL[kind]))
    case("no image", lambda s: s[first]["template"]["spec"]["containers"][0].pop("image"))
    case("no default container",
         lambda s: s[first]["template"]["spec"]["containers"][0].update(name="other"))
    case("no replica specs", lambda s: s.clear())
    if kind in ("TFJob", "PaddleJob"):  # a leading type of none, which upstream accepts
        leader = "Chief" if kind == "TFJob" else "Master"
        case("a leader of no replicas",
             lambda s: s.update({leader: {**copy.deepcopy(s["Worker"]), "replicas": 0}}))
    bad_name = job(kind)
    bad_name["metadata"]["name"] = "1-starts-with-a-digit"
    cases["name not DNS-1035"] = bad_name
    return cases


@pytest.mark.parametrize("kind", WEBHOOK_KINDS)
def test_the_webhook_answers_as_upstreams(sides: Sides, kind: str) -> None:
    found, refused = [], 0
    for name, doc in _invalid(kind).items():
        up, answers = sides.submit(doc)
        refused += not up.allowed
        for variant, ours in answers.items():
            if (line := answer_difference(name, ours, up)) is not None:
                found += sides.scoped(variant, "webhook", [line])
    assert refused >= 3, "upstream's webhook refused too few cases to compare"
    check(sides, found)


def test_no_pattern_of_the_readme_is_stale() -> None:
    """Every pattern written for a scenario that ran matched a difference in it (run last:
    tests/differential/conftest.py)."""
    if not LEDGER.ran:
        pytest.skip("no scenario of the differential suite ran")
    stale = LEDGER.stale(patterns())
    assert not stale, "patterns of the README's differences table that matched nothing:\n" \
        + "\n".join(stale)
