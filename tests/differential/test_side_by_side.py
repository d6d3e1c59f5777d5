"""Upstream v1.9.4 and trainop given the same manifests and the same pod phases: what each
makes and reports (objects, job status, events, webhook answers) must be the same after each
step, or be covered by a row of the README's differences table."""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import pytest

from tests.differential.peers import Pair, documented, undocumented
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


def submit(pair: Pair, doc: dict[str, Any]) -> None:
    up, ours = pair.submit(doc)
    assert (ours.allowed, up.allowed) == (True, True), (ours, up)


def check(found: list[str]) -> None:
    missing = undocumented(found, documented())
    assert not missing, "differences from upstream not in the README's table:\n" + "\n".join(
        missing)


@pytest.mark.parametrize("kind", UPSTREAM_KINDS)
def test_a_job_that_succeeds(pair: Pair, kind: str) -> None:
    submit(pair, job(kind))
    found = pair.compare(kind, "created")
    pair.set_all("Running")
    found += pair.compare(kind, "running")
    pair.set_all("Succeeded", exit_code=0)
    found += pair.compare(kind, "succeeded")
    check(found)


EXAMPLES = sorted(p for p in (REPO / "trainop" / "examples").glob("*.yaml")
                  if p.name not in ("mxnet.yaml", "mpi-ssh.yaml"))
"""Every example of an upstream kind (MXJob has none upstream; mpi-ssh's transport is
trainop's own field, which upstream's CRD does not declare)."""


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example(pair: Pair, path: Path) -> None:
    (doc,) = read_documents(str(path))
    doc["metadata"].pop("namespace", None)
    submit(pair, doc)
    kind = doc["kind"]
    found = pair.compare(kind, "created")
    pair.set_all("Running")
    found += pair.compare(kind, "running")
    check(found)


@pytest.mark.parametrize("kind", REPLICA_KINDS)
def test_a_replica_that_fails_for_good(pair: Pair, kind: str) -> None:
    submit(pair, job(kind, replica_extra=never(kind)))
    pair.settle(kind)
    pair.set_all("Running")
    found = pair.compare(kind, "running")
    pair.set_pod("job-worker-1", "Failed", exit_code=3)
    found += pair.compare(kind, "failed")
    check(found)


def test_exit_code_retries_a_retryable_code_and_fails_on_another(pair: Pair) -> None:
    exit_code = {rt: {"restartPolicy": "ExitCode"} for rt in ("Master", "Worker")}
    submit(pair, job("PyTorchJob", replica_extra=exit_code))
    pair.settle("PyTorchJob")
    pair.set_all("Running")
    found = pair.compare("PyTorchJob", "running")
    pair.set_pod("job-worker-0", "Failed", exit_code=137)  # retryable: recreated
    found += pair.compare("PyTorchJob", "retried")
    pair.set_all("Running")
    found += pair.compare("PyTorchJob", "running again")
    pair.set_pod("job-worker-1", "Failed", exit_code=1)  # permanent
    found += pair.compare("PyTorchJob", "failed")
    check(found)


def test_the_backoff_limit_fails_a_job_whose_pods_keep_restarting(pair: Pair) -> None:
    submit(pair, job("PyTorchJob", spec={"runPolicy": {"backoffLimit": 1}}))
    pair.settle("PyTorchJob")
    pair.set_all("Running")
    found = pair.compare("PyTorchJob", "running")
    # restarts in place (OnFailure), as the kubelet counts them
    pair.set_pod("job-worker-0", "Running", restarts=2, last_exit=1)
    found += pair.compare("PyTorchJob", "restarted twice")
    check(found)


def test_the_deadline_ends_a_running_job(pair: Pair) -> None:
    submit(pair, job("PyTorchJob", spec={"runPolicy": {"activeDeadlineSeconds": 3}}))
    pair.settle("PyTorchJob")
    pair.set_all("Running")
    found = pair.compare("PyTorchJob", "running")
    time.sleep(4)
    found += pair.compare("PyTorchJob", "past the deadline")
    check(found)


def test_the_ttl_deletes_a_finished_job(pair: Pair) -> None:
    submit(pair, job("PyTorchJob", spec={"runPolicy": {"ttlSecondsAfterFinished": 2}}))
    pair.settle("PyTorchJob")
    pair.set_all("Running")
    pair.set_all("Succeeded", exit_code=0)
    found = pair.compare("PyTorchJob", "succeeded")
    time.sleep(3)
    found += pair.compare("PyTorchJob", "past the ttl")
    for side in pair.sides:
        assert side.kube.items("pytorchjobs.kubeflow.org") == [], side.name
    check(found)


@pytest.mark.parametrize("policy", ["All", "Running", "None"])
def test_the_clean_pod_policy_once_the_job_succeeded(pair: Pair, policy: str) -> None:
    submit(pair, job("PyTorchJob", spec={"runPolicy": {"cleanPodPolicy": policy}}))
    pair.settle("PyTorchJob")
    pair.set_all("Running")
    pair.set_pod("job-worker-1", "Succeeded", exit_code=0)
    found = pair.compare("PyTorchJob", "one worker done")
    pair.set_pod("job-master-0", "Succeeded", exit_code=0)  # the job succeeds
    found += pair.compare("PyTorchJob", "succeeded")
    check(found)


def test_suspend_and_resume(pair: Pair) -> None:
    doc = job("PyTorchJob")
    submit(pair, doc)
    pair.settle("PyTorchJob")
    pair.set_all("Running")
    found = pair.compare("PyTorchJob", "running")
    suspended = copy.deepcopy(doc)
    suspended["spec"]["runPolicy"] = {"suspend": True}
    submit(pair, suspended)
    found += pair.compare("PyTorchJob", "suspended")
    submit(pair, doc | {"spec": {**doc["spec"], "runPolicy": {"suspend": False}}})
    found += pair.compare("PyTorchJob", "resumed")
    check(found)


def test_a_job_created_suspended_makes_nothing(pair: Pair) -> None:
    submit(pair, job("JAXJob", spec={"runPolicy": {"suspend": True}}))
    check(pair.compare("JAXJob", "created suspended"))


def test_a_job_another_controller_manages_is_left_alone(pair: Pair) -> None:
    submit(pair, job("PyTorchJob", spec={"runPolicy": {
        "managedBy": "kueue.x-k8s.io/multikueue"}}))
    found = pair.compare("PyTorchJob", "created")
    for side in pair.sides:
        assert side.kube.items("pods") == [], side.name
    check(found)


def test_elastic_pytorch_gets_its_autoscaler(pair: Pair) -> None:
    doc = job("PyTorchJob")
    doc["spec"]["elasticPolicy"] = {
        "minReplicas": 1, "maxReplicas": 3, "rdzvBackend": "c10d", "maxRestarts": 3,
        "metrics": [{"type": "Resource", "resource": {
            "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]}
    del doc["spec"]["pytorchReplicaSpecs"]["Master"]
    submit(pair, doc)
    found = pair.compare("PyTorchJob", "created")
    pair.set_all("Running")
    found += pair.compare("PyTorchJob", "running")
    check(found)


def _invalid(kind: str) -> dict[str, dict[str, Any]]:
    """Jobs upstream's webhook refuses (pkg/webhooks/*), by what is wrong with them."""
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
    bad_name = job(kind)
    bad_name["metadata"]["name"] = "1-starts-with-a-digit"
    cases["name not DNS-1035"] = bad_name
    return cases


@pytest.mark.parametrize("kind", WEBHOOK_KINDS)
def test_the_webhook_answers_as_upstreams(pair: Pair, kind: str) -> None:
    found, refused = [], 0
    for name, doc in _invalid(kind).items():
        up, ours = pair.submit(doc)
        refused += not up.allowed
        if ours.allowed != up.allowed:
            found.append(f"webhook: webhook {kind} {name}: allowed {ours.allowed} != "
                         f"{up.allowed} ({ours.message} | {up.message})")
        elif ours.message != up.message:
            found.append(f"webhook: webhook {kind} {name}: message {ours.message} != "
                         f"{up.message}")
    assert refused >= 3, "upstream's webhook refused too few cases to compare"
    print("\n".join(found))
    check(found)
