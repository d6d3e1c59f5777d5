"""Conformance with training-operator v1.9 on the real API server: the same scenarios for
every kind, asserting what an upstream client reads (object names and labels, conditions'
reasons and messages and their order, replica statuses, events' reasons, metrics), each
value from tests/upstream.py, which says where upstream writes it.

Pods are moved through their phases as a kubelet would report them (tests/integration's
Kube.set_pod); the manager is the real one, as a process, watching one namespace.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.kube import Kube, Manager, wait_for
from tests.jobs import manifest
from tests.upstream import CREATED_AT, FACTS, IDS, Facts, failed_reason

pytestmark = pytest.mark.integration
COMMON = "pkg/controller.v1/common"
SCALED = {"PyTorchJob", "PaddleJob", "JAXJob"}
"""Kinds with a scale subresource: only they get replicaStatuses.selector (e.g.
pkg/controller.v1/pytorch/pytorchjob_controller.go:372)."""


def _never(facts: Facts) -> dict[str, dict[str, Any]]:
    return {rt: {"restartPolicy": "Never"} for rt in facts.replicas}


def _conditions(kube: Kube, kind: str) -> list[dict[str, Any]]:
    return list(kube.job(kind, "job").get("status", {}).get("conditions") or [])


def _pods(facts: Facts) -> list[str]:
    return sorted("job-launcher" if rt == "Launcher" else f"job-{rt.lower()}-{i}"
                  for rt, n in facts.replicas.items() for i in range(n))


@pytest.mark.parametrize("facts", FACTS, ids=IDS)
def test_a_job_runs_and_succeeds_as_upstream_shows_it(kube: Kube, manager: Manager,
                                                      facts: Facts) -> None:
    kind, ns = facts.kind, kube.ns
    running, succeeded, _ = facts.words(ns)
    kube.apply(manifest(kind, facts.replicas, spec={"runPolicy": {"cleanPodPolicy": "None"}}))
    pods = kube.wait_pods(len(_pods(facts)))
    assert pods == _pods(facts)
    masters = sorted(p["metadata"]["name"] for p in kube.items("pods") if p["metadata"][
        "labels"].get("training.kubeflow.org/job-role") == "master")
    assert masters == facts.masters, facts.where  # IsMasterRole
    if kind != "MPIJob":  # one headless service per pod (common/service.go:229-234)
        services = kube.items("services")
        assert sorted(s["metadata"]["name"] for s in services) == pods
        assert all(s["spec"]["clusterIP"] == "None" and
                   not s["spec"].get("publishNotReadyAddresses") for s in services)
    created = wait_for("Created", lambda: kube.condition(kind, "job", "Created"))
    assert (created["reason"], created["message"]) == (
        f"{kind}Created", f"{kind} job is created."), CREATED_AT[kind]

    kube.set_pod(facts.lead, "Running")  # the others still pending
    cond = kube.wait_condition(kind, "job", "Running")
    assert (cond["reason"], cond["message"]) == (f"{kind}Running", running), facts.where

    kube.set_all("Running")
    kube.set_all("Succeeded", exit_code=0)
    cond = kube.wait_condition(kind, "job", "Succeeded")
    assert (cond["reason"], cond["message"]) == (f"{kind}Succeeded", succeeded), facts.where
    job = kube.job(kind, "job")
    status = job["status"]
    # Succeeded last (the State column), Running turned False (pkg/util/status.go:121-134)
    assert [c["type"] for c in status["conditions"]][-1] == "Succeeded"
    assert {c["type"]: c["status"] for c in status["conditions"]}["Running"] == "False"
    assert status["completionTime"] and status["startTime"]
    for rtype, n in facts.replicas.items():
        rs = status["replicaStatuses"][rtype]
        # every replica counted succeeded once the job is (common/job.go:131-135)
        assert rs.get("succeeded") == n and not rs.get("active"), (rtype, rs)
        assert ("selector" in rs) is (kind in SCALED) and "labelSelector" not in rs
    reasons = {e["reason"] for e in kube.items("events")
               if e["involvedObject"]["name"] == "job"}
    assert {f"{kind}Succeeded", "SuccessfulCreatePod"} <= reasons, reasons
    # v1.9 tells no event for Created or Running (pkg/util/status.go: UpdateJobConditions
    # records none)
    assert not {f"{kind}Created", f"{kind}Running"} & reasons, reasons
    if kind != "MPIJob":  # common/pod.go:343-346
        wait_for("ExitedWithCode", lambda: "ExitedWithCode" in {
            e["reason"] for e in kube.items("events")})
    # pkg/common/metrics.go: by job_namespace and framework
    assert manager.metric("training_operator_jobs_created_total", job_namespace=ns) == 1
    assert manager.metric("training_operator_jobs_successful_total", job_namespace=ns) == 1
    assert manager.metric("training_operator_jobs_failed_total", job_namespace=ns) == 0


@pytest.mark.parametrize("facts", FACTS, ids=IDS)
def test_a_failed_replica_fails_the_job_as_upstream_words_it(kube: Kube, manager: Manager,
                                                              facts: Facts) -> None:
    kind, ns = facts.kind, kube.ns
    kube.apply(manifest(kind, facts.replicas, replica_extra=_never(facts)))
    kube.wait_pods(len(_pods(facts)))
    kube.set_all("Running")
    kube.set_pod("job-worker-1", "Failed", exit_code=3)
    cond = kube.wait_condition(kind, "job", "Failed")
    assert cond["reason"] == failed_reason(kind), facts.where
    assert cond["message"].startswith(facts.words(ns)[2] + " "), (cond["message"], facts.where)
    status = kube.job(kind, "job")["status"]
    assert [c["type"] for c in status["conditions"]][-1] == "Failed"
    assert status["completionTime"]
    assert status["replicaStatuses"]["Worker"]["failed"] == 1
    # a job failed by its replicas counts as failed (e.g. pytorchjob_controller.go:442)
    wait_for("failed counted", lambda: manager.metric(
        "training_operator_jobs_failed_total", job_namespace=ns) == 1)


@pytest.mark.parametrize("facts", FACTS, ids=IDS)
def test_suspend_and_resume_as_upstream(kube: Kube, manager: Manager, facts: Facts) -> None:
    kind = facts.kind
    kube.apply(manifest(kind, facts.replicas))
    kube.wait_pods(len(_pods(facts)))
    kube.set_all("Running")
    kube.wait_condition(kind, "job", "Running")
    started = kube.job(kind, "job")["status"]["startTime"]
    kube.kubectl("patch", f"{kind.lower()}s.kubeflow.org", "job", "--type=merge",
                 "-p", '{"spec":{"runPolicy":{"suspend":true}}}')
    cond = kube.wait_condition(kind, "job", "Suspended")
    # common/job.go:146-165: pods gone, active 0, Running False then Suspended True (last),
    # startTime kept
    assert (cond["reason"], cond["message"]) == (f"{kind}Suspended",
                                                 f"{kind} job is suspended.")
    wait_for("pods deleted", lambda: kube.names("pods") == [])
    status = kube.job(kind, "job")["status"]
    assert [c["type"] for c in status["conditions"]][-1] == "Suspended"
    assert {c["type"]: c["status"] for c in status["conditions"]}["Running"] == "False"
    assert status["startTime"] == started
    assert all(not rs.get("active") for rs in status["replicaStatuses"].values())

    kube.kubectl("patch", f"{kind.lower()}s.kubeflow.org", "job", "--type=merge",
                 "-p", '{"spec":{"runPolicy":{"suspend":false}}}')
    # common/job.go:167-173: Suspended False (Resumed), startTime anew, pods again
    resumed = wait_for("resumed", lambda: next(
        (c for c in _conditions(kube, kind) if c["type"] == "Suspended"
         and c["status"] == "False"), None))
    assert (resumed["reason"], resumed["message"]) == (f"{kind}Resumed",
                                                       f"{kind} job is resumed.")
    kube.wait_pods(len(_pods(facts)))
    assert any(e["reason"] == f"{kind}Resumed" for e in kube.items("events"))
