"""Kubernetes' own gang (--gang-scheduler-name=workload-api): the job's Workload and
PodGroup of scheduling.k8s.io/v1beta1, its pods naming the PodGroup, through the job's
life; a cluster that cannot gang holds the job and says so."""

from __future__ import annotations

from typing import Any

import pytest

from tests.jobs import job, v2beta1_job
from tests.sim import Cluster
from trainop.engine import EngineConfig
from trainop.engine.objects import patch_of

GANG = EngineConfig(gang_scheduler="workload-api")
OWNER = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "job", "uid": "uid-1",
         "controller": True, "blockOwnerDeletion": True}
LABELS = {"training.kubeflow.org/job-name": "job",
          "training.kubeflow.org/operator-name": "pytorchjob-controller"}


def made(c: Cluster, kind: str) -> dict[str, Any]:
    return c.created[f"{kind}/job"]


def test_a_job_gets_a_workload_and_pod_group_and_its_pods_name_it() -> None:
    c = Cluster(job("PyTorchJob", {"Master": 1, "Worker": 3}, uid="uid-1"), GANG)
    plan = c.step()
    workload, group = made(c, "Workload"), made(c, "PodGroup")
    assert workload == {
        "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload",
        "metadata": {"name": "job", "namespace": "default", "labels": LABELS,
                     "ownerReferences": [OWNER]},
        "spec": {"controllerRef": {"apiGroup": "kubeflow.org", "kind": "PyTorchJob",
                                   "name": "job"},
                 "podGroupTemplates": [{"name": "replicas",
                                        "schedulingPolicy": {"gang": {"minCount": 4}}}]}}
    assert group == {
        "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "job", "namespace": "default", "labels": LABELS,
                     "ownerReferences": [OWNER]},
        "spec": {"workloadRef": {"workloadName": "job", "templateName": "replicas"},
                 "schedulingPolicy": {"gang": {"minCount": 4}}}}
    # made before the pods, which come in the same round (kube-scheduler holds them until
    # the PodGroup is there, and binds none until 4 fit)
    kinds = [o["kind"] for o in plan.to_create]
    assert kinds[:2] == ["Workload", "PodGroup"] and kinds.count("Pod") == 4
    for name in ("job-master-0", "job-worker-2"):
        spec = c.pod(name)["spec"]
        assert spec["schedulingGroup"] == {"podGroupName": "job"}
        assert "schedulerName" not in spec  # kube-scheduler's own gang: the default one
    assert c.step().to_create == [] and c.step().update == []


@pytest.mark.parametrize(("policy", "expected"), [
    ({"minAvailable": 2}, {"schedulingPolicy": {"gang": {"minCount": 2}}}),
    # the API's least is 1: a job whose quorum is 0 binds as its first pod fits
    ({"minAvailable": 0}, {"schedulingPolicy": {"gang": {"minCount": 1}}}),
    ({"topologyKey": "topology.kubernetes.io/rack", "priorityClass": "high"},
     {"schedulingPolicy": {"gang": {"minCount": 3}},
      "schedulingConstraints": {"topology": [{"key": "topology.kubernetes.io/rack"}]},
      "priorityClassName": "high"}),
], ids=["min-available", "min-available-0", "topology-and-priority"])
def test_the_scheduling_policy_makes_the_gang(policy: dict[str, Any],
                                              expected: dict[str, Any]) -> None:
    c = Cluster(job("TFJob", {"Worker": 3}, spec={"runPolicy": {"schedulingPolicy": policy}}),
                GANG)
    c.step()
    assert made(c, "Workload")["spec"]["podGroupTemplates"] == [{"name": "replicas",
                                                                 **expected}]
    group = made(c, "PodGroup")["spec"]
    assert group == {"workloadRef": {"workloadName": "job", "templateName": "replicas"},
                     **expected}


def test_a_v2beta1_mpijob_and_its_launcher_job_are_ganged() -> None:
    c = Cluster(v2beta1_job(workers=2), GANG)
    c.step()
    assert made(c, "Workload")["spec"]["controllerRef"] == {
        "apiGroup": "kubeflow.org", "kind": "MPIJob", "name": "job"}
    assert made(c, "PodGroup")["spec"]["schedulingPolicy"] == {"gang": {"minCount": 3}}
    # the launcher's Job names the PodGroup in its template: Kubernetes' Job controller
    # then makes no group of its own for it (WorkloadWithJob)
    launcher = c.created["Job/job-launcher"]["spec"]["template"]["spec"]
    assert launcher["schedulingGroup"] == {"podGroupName": "job"}
    assert c.pod("job-worker-1")["spec"]["schedulingGroup"] == {"podGroupName": "job"}


def test_the_gang_goes_when_the_job_finishes_telling_nothing() -> None:
    c = Cluster(job("JAXJob", {"Worker": 2}), GANG)
    c.step()
    c.all("Succeeded")
    plan = c.step()
    assert sorted((r.kind, r.name, r.api_version) for r in plan.delete) == [
        ("PodGroup", "job", "scheduling.k8s.io/v1beta1"),
        ("Workload", "job", "scheduling.k8s.io/v1beta1")]
    assert not [e for e in plan.on_removed if "PodGroup" in e.message]


def test_suspend_removes_the_gang_and_resume_makes_it_again() -> None:
    c = Cluster(job("PyTorchJob", {"Master": 1, "Worker": 1}), GANG)
    c.step()
    c.all("Running")
    c.step()
    c.job.spec.run_policy.suspend = True
    plan = c.step()
    assert sorted((r.kind, r.name) for r in plan.delete if r.kind != "Service") == [
        ("Pod", "job-master-0"), ("Pod", "job-worker-0"), ("PodGroup", "job"),
        ("Workload", "job")]
    assert ("Workload", "job") not in c.objects and c.pods == {}
    c.job.spec.run_policy.suspend = False
    plan = c.step()
    assert [o["kind"] for o in plan.to_create][:2] == ["Workload", "PodGroup"]
    assert c.pod("job-worker-0")["spec"]["schedulingGroup"] == {"podGroupName": "job"}


def test_the_quorum_follows_the_replicas_of_an_elastic_job() -> None:
    c = Cluster(job("PyTorchJob", {"Worker": 2}, spec={"elasticPolicy": {
        "minReplicas": 1, "maxReplicas": 4}}), GANG)
    c.step()
    c.job.spec.replica_specs["Worker"].replicas = 4  # the HPA scaled it up
    plan = c.step()
    updated = {o["kind"]: o for o in plan.update}
    assert set(updated) == {"Workload", "PodGroup"}
    # merge patches of what may change: minCount (the template list is sent whole)
    assert patch_of(updated["PodGroup"]) == {
        "spec": {"schedulingPolicy": {"gang": {"minCount": 4}}}}
    assert patch_of(updated["Workload"]) == {"spec": {"podGroupTemplates": [
        {"name": "replicas", "schedulingPolicy": {"gang": {"minCount": 4}}}]}}
    assert c.step().update == []


MISSING = "the cluster does not serve scheduling.k8s.io/v1beta1 workloads and podgroups"


def test_a_cluster_without_the_api_holds_the_job_and_says_so_once() -> None:
    c = Cluster(job("PyTorchJob", {"Master": 1, "Worker": 1}),
                EngineConfig(gang_scheduler="workload-api", gang_unavailable=MISSING))
    plan = c.step()
    assert plan.to_create == [] and plan.prerequisites == []  # nothing half-made
    held = c.condition("GangSchedulingUnavailable")
    assert (held.status, held.reason) == ("True", "GangSchedulingUnavailable")
    assert held.message == f"The job's pods are not made: {MISSING}."
    assert [(e.type, e.reason, e.message) for e in plan.events
            if e.reason == "GangSchedulingUnavailable"] == [
        ("Warning", "GangSchedulingUnavailable", f"The job's pods are not made: {MISSING}.")]
    assert c.job.status is not None and c.job.status.start_time is None
    plan = c.step()
    assert plan.to_create == [] and not [e for e in plan.events
                                         if e.reason == "GangSchedulingUnavailable"]
    # a manager started again where the API is served: the job runs
    c.config = GANG
    plan = c.step()
    assert [o["kind"] for o in plan.to_create].count("Pod") == 2
    assert c.condition("GangSchedulingUnavailable").status == "False"
    assert c.condition("GangSchedulingUnavailable").reason == "GangSchedulingAvailable"


def test_a_topology_the_cluster_drops_holds_only_the_jobs_that_name_one() -> None:
    config = EngineConfig(gang_scheduler="workload-api",
                          gang_topology_unavailable="the API server drops it")
    placed = Cluster(job("TFJob", {"Worker": 2}, spec={"runPolicy": {"schedulingPolicy": {
        "topologyKey": "rack"}}}), config)
    assert placed.step().to_create == []
    assert placed.condition("GangSchedulingUnavailable").message == (
        "The job's pods are not made: schedulingPolicy.topologyKey rack: "
        "the API server drops it.")
    free = Cluster(job("TFJob", {"Worker": 2}), config)
    assert [o["kind"] for o in free.step().to_create].count("Pod") == 2
    assert free.condition("GangSchedulingUnavailable") is None


def test_other_gangs_are_not_held_by_what_the_workload_api_lacks() -> None:
    c = Cluster(job("TFJob", {"Worker": 2}), EngineConfig(
        gang_scheduler="scheduler-plugins-scheduler", gang_unavailable=MISSING))
    assert [o["kind"] for o in c.step().to_create].count("Pod") == 2


def test_pods_made_again_by_a_whole_job_restart_rejoin_the_gang() -> None:
    c = Cluster(job("PyTorchJob", {"Master": 1, "Worker": 2},
                    spec={"runPolicy": {"restartScope": "Job", "backoffLimit": 3}}), GANG)
    c.step()
    c.all("Running")
    c.step()
    c.set("job-worker-1", phase="Failed", exit_code=137)
    plan = c.step()
    assert sorted(r.name for r in plan.delete if r.kind == "Pod") == [
        "job-master-0", "job-worker-0", "job-worker-1"]
    assert not [r for r in plan.delete if r.kind in ("Workload", "PodGroup")]  # kept
    c.step()
    made = [o for o in c.plans[-1].to_create if o["kind"] == "Pod"]
    assert len(made) == 3
    assert all(o["spec"]["schedulingGroup"] == {"podGroupName": "job"} for o in made)


def test_a_job_that_runs_where_the_api_went_away_runs_on_and_is_told() -> None:
    # made under a gang; the manager started again on a cluster that no longer serves the
    # API (its gate turned off): the job is watched to its end, nothing of a gang made
    c = Cluster(job("PyTorchJob", {"Master": 1, "Worker": 1}), GANG)
    c.step()
    c.all("Running")
    c.step()
    c.objects.pop(("Workload", "job"))
    c.objects.pop(("PodGroup", "job"))  # (no cache of them where they are not served)
    c.config = EngineConfig(gang_scheduler="workload-api", gang_unavailable=MISSING)
    plan = c.step()
    assert plan.to_create == [] and plan.prerequisites == []
    told = c.condition("GangSchedulingUnavailable")
    assert (told.status, told.message) == (
        "True", f"The job's pods made again join no gang: {MISSING}.")
    c.all("Succeeded")
    c.step()
    assert c.condition("Succeeded").status == "True"
