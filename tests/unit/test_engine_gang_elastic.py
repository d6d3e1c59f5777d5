"""Gang scheduling (Volcano, scheduler-plugins) and the elastic HPA."""

from __future__ import annotations

from fractions import Fraction

import pytest

from tests.jobs import job, v2beta1_job
from tests.sim import Cluster
from trainop.engine import EngineConfig, OwnedObject, quantity
from trainop.engine.objects import patch_of

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


def test_a_changed_scheduling_policy_updates_the_pod_group() -> None:
    # upstream's SyncPodGroup and mpi-operator's getOrCreatePodGroups write the spec again
    j = job("TFJob", {"Worker": 4}, spec={"runPolicy": {"schedulingPolicy": {
        "minAvailable": 4, "scheduleTimeoutSeconds": 120, "minResources": {"cpu": 4,
                                                                         "memory": "1Gi"}}}})
    c = Cluster(j, PLUGINS)
    c.step()
    assert c.step().update == []  # current: nothing to write
    c.job.spec.run_policy.scheduling_policy.schedule_timeout_seconds = 30
    c.job.spec.run_policy.scheduling_policy.min_resources = {"cpu": 2}
    plan = c.step()
    assert [(o["kind"], o["metadata"]["name"]) for o in plan.update] == [("PodGroup", "job")]
    # a JSON patch: minResources replaced whole (a merge patch would keep the memory)
    assert patch_of(plan.update[0]) == [
        {"op": "add", "path": "/spec/minMember", "value": 4},
        {"op": "add", "path": "/spec/minResources", "value": {"cpu": "2"}},
        {"op": "add", "path": "/spec/priorityClassName", "value": None},
        {"op": "add", "path": "/spec/scheduleTimeoutSeconds", "value": 30}]
    assert c.step().update == []  # once


def test_a_volcano_pod_group_keeps_its_queue_and_phase_when_updated() -> None:
    policy = {"minAvailable": 2, "queue": "a"}
    c = Cluster(job("PyTorchJob", {"Worker": 2}, spec={"runPolicy": {
        "schedulingPolicy": policy}}), VOLCANO)
    c.step()
    c.objects[("PodGroup", "job")] = OwnedObject(
        "PodGroup", "job", phase="Inqueue", content=c.objects[("PodGroup", "job")].content)
    c.step()
    c.job.spec.run_policy.scheduling_policy.queue = "b"  # upstream keeps the first queue
    assert c.step().update == []
    c.job.spec.run_policy.scheduling_policy.min_available = 1
    plan = c.step()
    assert [o["spec"]["minMember"] for o in plan.update] == [1]
    assert "/spec/queue" not in {op["path"] for op in patch_of(plan.update[0])}
    assert c.step().update == [] and not c.step().create  # admitted still: nothing held


def test_a_v2beta1_job_under_volcano_is_made_at_once() -> None:
    # mpi-operator makes the pods and the launcher Job with the PodGroup and leaves the
    # gang to the scheduler; upstream v1 waits for the PodGroup's admission
    c = Cluster(v2beta1_job(), VOLCANO)
    made = {f"{o['kind']}/{o['metadata']['name']}" for o in c.step().to_create}
    assert {"PodGroup/job", "Pod/job-worker-0", "Pod/job-worker-1", "Job/job-launcher"} <= made
    worker = c.pod("job-worker-0")
    # its decoration: the scheduler's name always, the group annotation, no task annotation
    assert worker["spec"]["schedulerName"] == "volcano"
    assert worker["metadata"]["annotations"] == {"scheduling.k8s.io/group-name": "job"}
    launcher = c.created["Job/job-launcher"]["spec"]["template"]
    assert launcher["spec"]["schedulerName"] == "volcano"
    assert launcher["metadata"]["annotations"] == {"scheduling.k8s.io/group-name": "job"}


def test_a_v2beta1_pod_group_is_mpi_operators() -> None:
    # podgroup.go newPodGroup: no queue by default, the job's annotations not copied
    c = Cluster(v2beta1_job(), VOLCANO)
    c.step()
    pg = c.created["PodGroup/job"]
    assert pg["spec"] == {"minMember": 3, "minResources": {}}
    assert "annotations" not in pg["metadata"]
    # the queue from the job's Volcano annotation, the priority from the launcher's
    # template, the workers past minMember - 1 left out of minResources, limits counted
    # where nothing is requested
    template = {"template": {"spec": {"priorityClassName": "low", "containers": [{
        "name": "mpi", "image": "i", "resources": {"requests": {"cpu": "1"},
                                                   "limits": {"cpu": "2", "memory": "1Gi"}}}]}}}
    j = v2beta1_job({"runPolicy": {"schedulingPolicy": {"minAvailable": 2}},
                 "mpiReplicaSpecs": {"Launcher": {"replicas": 1, **template},
                                     "Worker": {"replicas": 3, **template}}}, workers=3)
    j.metadata.annotations = {**(j.metadata.annotations or {}),
                              "scheduling.volcano.sh/queue-name": "q"}
    d = Cluster(j, VOLCANO)
    d.step()
    assert d.created["PodGroup/job"]["spec"] == {
        "minMember": 2, "queue": "q", "priorityClassName": "low",
        "minResources": {"cpu": "2", "memory": str(2 * 2**30)}}
    # scheduler-plugins: the timeout always written, 0 by default; no empty minResources
    e = Cluster(v2beta1_job(), PLUGINS)
    e.step()
    assert e.created["PodGroup/job"]["spec"] == {"minMember": 3, "scheduleTimeoutSeconds": 0}
    # a template's own scheduler is overwritten
    mine = {"replicas": 1, "template": {"spec": {"schedulerName": "mine", "containers": [
        {"name": "m", "image": "i"}]}}}
    f = Cluster(v2beta1_job({"mpiReplicaSpecs": {"Launcher": mine, "Worker": mine}},
                            workers=1), PLUGINS)
    f.step()
    assert f.pod("job-worker-0")["spec"]["schedulerName"] == "scheduler-plugins-scheduler"


@pytest.mark.parametrize(("policy", "deleted"), [(None, False), ("Running", True),
                                                 ("All", True)])
def test_a_finished_v2beta1_jobs_pod_group_goes_as_mpi_operator_cleans_up(
        policy: str | None, deleted: bool) -> None:
    # mpi-operator deletes it with the workers only (cleanUpWorkerPods), telling nothing
    extra = {"runPolicy": {"cleanPodPolicy": policy}} if policy else {}
    c = Cluster(v2beta1_job(extra), VOLCANO)
    c.step()
    c.all("Running")
    c.set_job("job-launcher", running=1, started=True)
    c.step()
    c.set_job("job-launcher", finished="Complete", running=0)
    plan = c.step()
    assert c.condition("Succeeded").status == "True"
    assert [r.kind for r in plan.delete if r.kind == "PodGroup"] == (
        ["PodGroup"] if deleted else [])
    assert not [e for e in plan.events + plan.on_removed if "PodGroup" in e.message]


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


@pytest.mark.parametrize("value", [None, {"cpu": 1}, [1], True, float("inf"), float("nan"),
                                   -float("inf")], ids=["null", "object", "list", "bool",
                                                        "inf", "nan", "minus-inf"])
def test_what_is_no_quantity_at_all_is_refused_as_malformed(value: object) -> None:
    # a template's amounts are the tenant's JSON: whatever they hold, one ValueError
    with pytest.raises(ValueError, match="not a quantity"):
        quantity.parse(value)  # type: ignore[arg-type]


def test_a_gang_of_a_template_asking_for_amounts_of_no_type_leaves_them_out() -> None:
    odd = {"Worker": {"template": {"spec": {"containers": [{
        "name": "pytorch", "image": "i",
        "resources": {"requests": {"cpu": None, "example.com/x": {"a": 1},
                                   "memory": "1Gi"}}}]}}}}
    c = Cluster(job("PyTorchJob", {"Worker": 2}, replica_extra=odd),
                config=EngineConfig(gang_scheduler="volcano"))
    c.step()
    group, = [o for o in c.created.values() if o["kind"] == "PodGroup"]
    assert group["spec"]["minResources"] == {"memory": str(2 * 2**30)}


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


@pytest.mark.parametrize("odd", [["cpu"], "4", 7, None])
def test_amounts_of_no_shape_count_for_nothing(odd: object) -> None:
    # a template's resources are its author's: read past the schema, limits that are no
    # map count for nothing (not a failed reconcile), and the rest is summed as ever
    from trainop.engine import gang

    j = job("PyTorchJob", {"Master": 1, "Worker": 1})
    for rtype, limits in (("Master", odd), ("Worker", {"cpu": "2"})):
        spec = j.spec.replica_specs[rtype]
        spec.template = {"spec": {"containers": [{"name": "pytorch", "image": "i",
                                                  "resources": {"limits": limits}}]}}
    assert gang.min_resources(j) == {"cpu": "2"}
    j.spec.replica_specs["Master"].template = {"spec": {"containers": [
        {"name": "pytorch", "image": "i", "resources": odd}]}}
    assert gang.min_resources(j) == {"cpu": "2"}
