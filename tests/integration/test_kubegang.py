"""Kubernetes' own gang (--gang-scheduler-name=workload-api) against real API servers of
the suites' release: one with GenericWorkload and TopologyAwareWorkloadScheduling on (the
job's Workload, PodGroup and pods as it takes them), one with GenericWorkload alone (it
drops a topology), and the shared one, where scheduling.k8s.io/v1beta1 is not served.
(kube-scheduler's part runs in tests/node/test_kubegang.py.)"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testbed.apiserver import TestAPIServer, release, serves_workload_api
from tests.integration.kube import Kube, Manager, wait_for
from tests.integration.test_reliability import private_api
from tests.jobs import manifest

pytestmark = pytest.mark.integration

API = "--runtime-config=scheduling.k8s.io/v1beta1=true"
WORKLOADS, PODGROUPS = "workloads.scheduling.k8s.io", "podgroups.scheduling.k8s.io"
RACK = "topology.kubernetes.io/rack"


def workload_api_release() -> None:
    if not serves_workload_api():
        pytest.skip(f"Kubernetes {release()} has no Workload API (1.37+)")


@pytest.fixture(scope="module")
def gang_api() -> Iterator[TestAPIServer]:
    workload_api_release()
    yield from private_api(API, "--feature-gates=GenericWorkload=true,"
                                "TopologyAwareWorkloadScheduling=true")


@pytest.fixture(scope="module")
def no_topology_api() -> Iterator[TestAPIServer]:
    workload_api_release()
    yield from private_api(API, "--feature-gates=GenericWorkload=true")


def run_manager(api: TestAPIServer, kube: Kube, tmp_path: Path) -> Manager:
    return Manager(api, "--namespace", kube.ns, "--gang-scheduler-name", "workload-api",
                   log_dir=tmp_path).wait_ready()


def job(name: str, workers: int, policy: dict[str, Any] | None = None) -> dict[str, Any]:
    return manifest("PyTorchJob", {"Master": 1, "Worker": workers}, name=name, spec={
        "runPolicy": {"schedulingPolicy": policy or {}}})


def held(kube: Kube, name: str) -> dict[str, Any]:
    return kube.wait_condition("PyTorchJob", name, "GangSchedulingUnavailable")


def test_a_job_is_ganged_as_the_api_server_takes_it(gang_api: TestAPIServer,
                                                    tmp_path: Path) -> None:
    kube = Kube(gang_api)
    m = run_manager(gang_api, kube, tmp_path)
    try:
        kube.apply(job("job", 2, {"topologyKey": RACK, "minAvailable": 2}))
        kube.wait_pods(3)
        workload = kube.get(WORKLOADS, "job")
        group = kube.get(PODGROUPS, "job")
        uid = kube.job("PyTorchJob", "job")["metadata"]["uid"]
        # what the API server kept of them (it drops what a gate that is off does not
        # allow, and refuses a shape it does not know)
        gang = {"schedulingPolicy": {"gang": {"minCount": 2}},
                "schedulingConstraints": {"topology": [{"key": RACK}]}}
        assert workload["spec"] == {
            "controllerRef": {"apiGroup": "kubeflow.org", "kind": "PyTorchJob", "name": "job"},
            "podGroupTemplates": [{"name": "replicas", **gang}]}
        assert group["spec"] == {
            "workloadRef": {"workloadName": "job", "templateName": "replicas"},
            # (the API server's defaults, and its Priority admission's)
            "disruptionMode": {"single": {}}, "priority": 0, **gang}
        for obj in (workload, group):
            assert [(o["kind"], o["uid"], o["controller"]) for o in obj["metadata"][
                "ownerReferences"]] == [("PyTorchJob", uid, True)]
        # the API server's admission guards the group while pods name it
        assert group["metadata"]["finalizers"] == ["scheduling.k8s.io/podgroup-protection"]
        for pod in kube.items("pods"):
            assert pod["spec"]["schedulingGroup"] == {"podGroupName": "job"}
            assert pod["spec"]["schedulerName"] == "default-scheduler"
        # the quorum follows the job (minCount is mutable; the rest is not)
        kube.kubectl("patch", "pytorchjob", "job", "--type=merge", "-p", json.dumps(
            {"spec": {"runPolicy": {"schedulingPolicy": {"minAvailable": 3}}}}))
        wait_for("minCount 3", lambda: kube.get(PODGROUPS, "job")["spec"][
            "schedulingPolicy"] == {"gang": {"minCount": 3}} and kube.get(WORKLOADS, "job")[
            "spec"]["podGroupTemplates"][0]["schedulingPolicy"] == {"gang": {"minCount": 3}})
        # suspended: the gang goes with the pods (the group once no pod names it)
        kube.kubectl("patch", "pytorchjob", "job", "--type=merge", "-p",
                     '{"spec": {"runPolicy": {"suspend": true}}}')
        wait_for("the workload gone", lambda: kube.get(WORKLOADS, "job") is None)
        wait_for("the group deleted", lambda: kube.get(PODGROUPS, "job") is None or kube.get(
            PODGROUPS, "job")["metadata"].get("deletionTimestamp"))
    finally:
        m.stop()
    assert m.api_warnings() == []


def test_a_topology_the_api_server_drops_holds_only_the_jobs_that_name_one(
        no_topology_api: TestAPIServer, tmp_path: Path) -> None:
    kube = Kube(no_topology_api)
    m = run_manager(no_topology_api, kube, tmp_path)
    try:
        kube.apply(job("placed", 1, {"topologyKey": RACK}))
        kube.apply(job("free", 1))
        told = held(kube, "placed")
        kube.wait_pods(2)
        assert kube.names("pods") == ["free-master-0", "free-worker-0"]
        assert kube.get(PODGROUPS, "free") is not None
        assert kube.get(PODGROUPS, "placed") is None and kube.get(WORKLOADS, "placed") is None
    finally:
        m.stop()
    assert told["message"] == (
        f"The job's pods are not made: schedulingPolicy.topologyKey {RACK}: the API server "
        "drops a PodGroup's topology constraint (the TopologyAwareWorkloadScheduling feature "
        "gate is off).")
    said = [line for line in m.log_path.read_text().splitlines()
            if "WARNING" in line and "TopologyAwareWorkloadScheduling" in line]
    assert len(said) == 1


def test_a_cluster_without_the_api_holds_every_job_and_says_so(
        kube: Kube, start_manager: Any) -> None:
    m = start_manager("--gang-scheduler-name", "workload-api")
    kube.apply(job("job", 1))
    told = held(kube, "job")
    assert (told["reason"], told["status"]) == ("GangSchedulingUnavailable", "True")
    assert told["message"].startswith(
        "The job's pods are not made: the cluster does not serve scheduling.k8s.io/v1beta1 "
        "workloads and podgroups (Kubernetes 1.37+, with the GenericWorkload feature gate on")
    events = wait_for("the event", lambda: [e for e in kube.items("events")
                                            if e["reason"] == "GangSchedulingUnavailable"])
    assert [(e["type"], e.get("count", 1)) for e in events] == [("Warning", 1)]
    # nothing of it made: no pod, service or anything else it owns
    assert kube.items("pods") == [] and kube.items("services") == []
    said = [line for line in m.log_path.read_text().splitlines()
            if "WARNING" in line and "--gang-scheduler-name=workload-api" in line]
    assert len(said) == 1
