"""Gang scheduling (Volcano, scheduler-plugins) and the elastic HPA."""

from __future__ import annotations

from fractions import Fraction

import pytest

from tests.jobs import job
from tests.sim import Cluster
from trainop.engine import EngineConfig, OwnedObject, quantity

VOLCANO = EngineConfig(gang_scheduler="volcano")
PLUGINS = EngineConfig(gang_scheduler="scheduler-plugins-scheduler")


def resources(cpu: str, memory: str) -> dict[str, object]:
    return {"template": {"spec": {"containers": [{
        "name": "pytorch", "image": "i",
        "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}}}


def test_volcano_pod_group_and_pods_held_until_admitted() -> None:
    j = job("PyTorchJob", {"Master": 1, "Worker": 2}, replica_extra={
        "Master": resources("500m", "1Gi"), "Worker": resources("1", "512Mi")},
        spec={"runPolicy": {"schedulingPolicy": {"queue": "research", "priorityClass": "high"}}})
    c = Cluster(j, VOLCANO)
    plan = c.step()
    pg = c.created["PodGroup/job"]
    assert pg["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    assert pg["spec"] == {"minMember": 3, "queue": "research", "priorityClassName": "high",
                          "minResources": {"cpu": "2500m", "memory": str(2 * 2**30)}}
    # until admitted, as upstream (job.go:318-330): neither pods nor services, and no
    # status but the round's lastReconcileTime (no startTime, no replica statuses)
    assert plan.create == []
    status = c.job.status
    assert status is not None and status.last_reconcile_time is not None
    assert status.start_time is None and status.replica_statuses is None
    c.objects[("PodGroup", "job")] = OwnedObject("PodGroup", "job", phase="Pending")
    assert c.step().create == []
    c.objects[("PodGroup", "job")] = OwnedObject("PodGroup", "job", phase="Inqueue")
    plan = c.step()
    pods = [o for o in plan.create if o["kind"] == "Pod"]
    assert len(pods) == 3 and len(plan.create) == 6  # and their services
    assert c.job.status is not None and c.job.status.start_time is not None
    master = c.pod("job-master-0")
    assert master["spec"]["schedulerName"] == "volcano"
    assert master["metadata"]["annotations"] == {"scheduling.k8s.io/group-name": "job",
                                                 "volcano.sh/task-spec": "master"}
    c.all("Succeeded")
    plan = c.step()
    # the PodGroup goes with the finished job, told in upstream's words (job.go:238-243)
    assert [r.kind for r in plan.delete] == ["PodGroup"]
    assert [(e.reason, e.message) for e in plan.on_removed if "PodGroup" in e.message] == [
        ("JobTerminated", "Job has been terminated. Deleting PodGroup"),
        ("SuccessfulDeletePodGroup", "Deleted PodGroup: job")]


def test_scheduler_plugins_pod_group() -> None:
    j = job("TFJob", {"Worker": 4}, spec={"runPolicy": {"schedulingPolicy": {
        "minAvailable": 2, "scheduleTimeoutSeconds": 120, "minResources": {"cpu": 4}}}})
    c = Cluster(j, PLUGINS)
    plan = c.step()
    pg = c.created["PodGroup/job"]
    assert pg["apiVersion"] == "scheduling.x-k8s.io/v1alpha1"
    assert pg["spec"] == {"minMember": 2, "minResources": {"cpu": "4"},
                          "scheduleTimeoutSeconds": 120}
    assert len([o for o in plan.create if o["kind"] == "Pod"]) == 4  # no admission to wait for
    pod = c.pod("job-worker-3")
    assert pod["spec"]["schedulerName"] == "scheduler-plugins-scheduler"
    assert pod["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "job"


def test_pod_group_deleted_when_the_job_finishes() -> None:
    c = Cluster(job("JAXJob", {"Worker": 1}), PLUGINS)
    c.step()
    c.all("Succeeded")
    plan = c.step()
    assert [(r.kind, r.api_version) for r in plan.delete] == [
        ("PodGroup", "scheduling.x-k8s.io/v1alpha1")]


def test_no_gang_no_pod_group() -> None:
    c = Cluster(job("JAXJob", {"Worker": 1}))
    c.step()
    assert "PodGroup/job" not in c.created
    assert "schedulerName" not in c.pod("job-worker-0")["spec"]


@pytest.mark.parametrize(("text", "value"), [
    ("1", Fraction(1)), ("500m", Fraction(1, 2)), ("1Gi", Fraction(2**30)),
    ("2k", Fraction(2000)), ("1.5", Fraction(3, 2)), (3, Fraction(3)), ("1e3", Fraction(1000)),
    ("250n", Fraction(1, 4 * 10**6)), ("2u", Fraction(2, 10**6)), (".5", Fraction(1, 2)),
    ("1E-2", Fraction(1, 100))],
    ids=["1", "500m", "1Gi", "2k", "1.5", "int-3", "1e3", "250n", "2u", ".5", "1E-2"])
def test_quantities(text: str | int, value: Fraction) -> None:
    assert quantity.parse(text) == value


def test_quantity_format_and_errors() -> None:
    assert quantity.fmt(Fraction(5, 2)) == "2500m"
    assert quantity.fmt(Fraction(7)) == "7"
    with pytest.raises(ValueError):
        quantity.parse("lots")


@pytest.mark.parametrize("text", ["1e999999999", "1e-999999999", "9" * 65, "1e" + "9" * 40,
                                  "1.2.3", "1e", "²", "1 Gi"])
def test_a_quantity_too_large_to_count_or_malformed_is_refused_at_once(text: str) -> None:
    # the API server's schema takes 1e999999999 in a pod template: counted exactly, it
    # would hold the manager for minutes
    with pytest.raises(ValueError):
        quantity.parse(text)


def test_a_gang_of_a_template_asking_for_an_uncountable_amount_leaves_it_out() -> None:
    huge = {"Worker": {"template": {"spec": {"containers": [{
        "name": "pytorch", "image": "i",
        "resources": {"requests": {"cpu": "1e999999999", "memory": "1Gi"}}}]}}}}
    c = Cluster(job("PyTorchJob", {"Worker": 2}, replica_extra=huge),
                config=EngineConfig(gang_scheduler="volcano"))
    c.step()
    assert c.created["PodGroup/job"]["spec"]["minResources"] == {"memory": str(2 * 2**30)}


METRICS = [{"type": "Resource", "resource": {"name": "cpu", "target": {
    "type": "Utilization", "averageUtilization": 80}}}]


def test_elastic_hpa_targets_the_scale_subresource() -> None:
    j = job("PyTorchJob", {"Worker": 2}, spec={"elasticPolicy": {
        "minReplicas": 1, "maxReplicas": 5, "metrics": METRICS}})
    c = Cluster(j)
    c.step()
    hpa = c.created["HorizontalPodAutoscaler/job"]
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"] == {
        "scaleTargetRef": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "job"},
        "minReplicas": 1, "maxReplicas": 5, "metrics": METRICS}


def test_no_metrics_no_hpa() -> None:
    c = Cluster(job("PyTorchJob", {"Worker": 2}, spec={"elasticPolicy": {"maxReplicas": 3}}))
    c.step()
    assert "HorizontalPodAutoscaler/job" not in c.created


def test_hpa_deleted_on_suspend() -> None:
    j = job("PyTorchJob", {"Worker": 2}, spec={"elasticPolicy": {"metrics": METRICS}})
    c = Cluster(j)
    c.step()
    c.job.spec.run_policy.suspend = True
    plan = c.step()
    assert ("HorizontalPodAutoscaler", "job") in [(r.kind, r.name) for r in plan.delete]
