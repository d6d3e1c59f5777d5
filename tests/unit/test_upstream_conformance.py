"""What upstream training-operator v1.9 clients read, encoded from upstream's code (branch
release-1.9 of kubeflow/training-operator; each case cites the file and line). The first
cases of the conformance work: condition texts common to every kind, and pod services."""

from __future__ import annotations

import pytest

from tests.jobs import TYPICAL, job
from tests.sim import Cluster
from trainop.api import KINDS

CREATED_AT = {
    "JAXJob": "pkg/controller.v1/jax/jaxjob_controller.go:472",
    "MPIJob": "pkg/controller.v1/mpi/mpijob_controller.go:322",
    "PaddleJob": "pkg/controller.v1/paddlepaddle/paddlepaddle_controller.go:515",
    "PyTorchJob": "pkg/controller.v1/pytorch/pytorchjob_controller.go:521",
    "TFJob": "pkg/controller.v1/tensorflow/tfjob_controller.go:656",
    "XGBoostJob": "pkg/controller.v1/xgboost/xgboostjob_controller.go:461",
    "MXJob": "(no v1.9 controller: MXJob is kept by trainop, worded as the others)",
}


@pytest.mark.parametrize("kind", sorted(KINDS), ids=sorted(KINDS))
def test_created_is_worded_with_the_jobs_name_only(kind: str) -> None:
    # e.g. `msg := fmt.Sprintf("PyTorchJob %s is created.", e.Object.GetName())`, reason
    # NewReason(kind, JobCreatedReason) (pkg/util/status.go:14, :32)
    c = Cluster(job(kind, TYPICAL[kind]))
    c.step()
    created = c.condition("Created")
    assert (created.reason, created.message) == (f"{kind}Created", f"{kind} job is created."), \
        CREATED_AT[kind]


@pytest.mark.parametrize("kind", sorted(set(KINDS) - {"MPIJob"}), ids=sorted(set(KINDS) - {
    "MPIJob"}))
def test_a_replicas_service_is_headless_with_ready_endpoints_only(kind: str) -> None:
    # pkg/controller.v1/common/service.go:229-234: ClusterIP None, the replica's labels as
    # selector, the default container's ports; no publishNotReadyAddresses
    c = Cluster(job(kind, TYPICAL[kind]))
    plan = c.step()
    services = [o for o in plan.create if o["kind"] == "Service"]
    assert services
    for svc in services:
        assert set(svc["spec"]) == {"clusterIP", "selector", "ports"}
        assert svc["spec"]["clusterIP"] == "None"
        assert svc["spec"]["selector"] == svc["metadata"]["labels"]


@pytest.mark.parametrize(("kind", "replicas", "masters", "where"), [
    ("PyTorchJob", {"Master": 1, "Worker": 2}, ["job-master-0"],
     "pkg/controller.v1/pytorch/pytorchjob_controller.go:499-506"),
    ("PyTorchJob", {"Worker": 2}, ["job-worker-0"],
     "pkg/controller.v1/pytorch/pytorchjob_controller.go:504-505"),
    ("TFJob", {"Chief": 1, "Worker": 2}, ["job-chief-0"],
     "pkg/controller.v1/tensorflow/tfjob_controller.go:600-601"),
    ("TFJob", {"PS": 1, "Worker": 2}, ["job-worker-0"],
     "pkg/controller.v1/tensorflow/tfjob_controller.go:603-604"),
    ("JAXJob", {"Worker": 3}, ["job-worker-0"], "pkg/controller.v1/jax/jaxjob_controller.go:464"),
    ("XGBoostJob", {"Master": 1, "Worker": 2}, ["job-master-0"],
     "pkg/controller.v1/xgboost/xgboostjob_controller.go:453"),
    ("PaddleJob", {"Worker": 2}, [],
     "pkg/controller.v1/paddlepaddle/paddlepaddle_controller.go:507"),
    ("MPIJob", {"Launcher": 1, "Worker": 2}, ["job-launcher"],
     "pkg/controller.v1/mpi/mpijob_controller.go:306"),
], ids=["pytorch-master", "pytorch-no-master", "tf-chief", "tf-no-chief", "jax", "xgboost",
        "paddle-no-master", "mpi"])
def test_the_master_role_label(kind: str, replicas: dict[str, int], masters: list[str],
                               where: str) -> None:
    # the label the SDK's `is_master=True` lookups and get_job_logs read
    # (pkg/controller.v1/common/pod.go:320 and :406-407)
    c = Cluster(job(kind, replicas))
    plan = c.step()
    labelled = sorted(o["metadata"]["name"] for o in plan.create if o["kind"] == "Pod" and
                      o["metadata"]["labels"].get("training.kubeflow.org/job-role") == "master")
    assert labelled == masters, where


def _gang_job(**run_policy: object) -> Cluster:
    from trainop.engine import EngineConfig

    extra = {rt: {"template": {"spec": {"containers": [{
        "name": "pytorch", "image": "i", "resources": {"requests": {"cpu": cpu}}}]}}}
        for rt, cpu in (("Master", "2"), ("Worker", "1"))}
    j = job("PyTorchJob", {"Master": 1, "Worker": 3}, replica_extra=extra,
            spec={"runPolicy": run_policy})
    j.metadata.annotations = {"team": "vision"}
    return Cluster(j, EngineConfig(gang_scheduler="volcano"))


def test_volcano_pod_group_as_upstream_makes_it() -> None:
    c = _gang_job()
    c.step()
    pg = c.created["PodGroup/job"]
    # queue "default" unless given (pkg/controller.v1/common/job.go:252,265-266); the job's
    # annotations copied (pkg/controller.v1/common/scheduling.go:54)
    assert pg["spec"] == {"minMember": 4, "queue": "default", "minResources": {"cpu": "5"}}
    assert pg["metadata"]["annotations"] == {"team": "vision"}


def test_pod_group_min_resources_cover_the_first_min_member_pods() -> None:
    # pkg/controller.v1/common/util.go:108-140: pod by pod until minMember, in type order
    c = _gang_job(schedulingPolicy={"minAvailable": 2})
    c.step()
    assert c.created["PodGroup/job"]["spec"]["minResources"] == {"cpu": "3"}  # master + 1


def test_a_templates_own_scheduler_is_kept() -> None:
    # pkg/controller.v1/control/podgroup_control.go:66-68 (scheduler-plugins: :132-134)
    from trainop.engine import EngineConfig, OwnedObject

    extra = {"Worker": {"template": {"spec": {"schedulerName": "my-scheduler", "containers": [
        {"name": "jax", "image": "i"}]}}}}
    c = Cluster(job("JAXJob", {"Worker": 1}, replica_extra=extra),
                EngineConfig(gang_scheduler="volcano"))
    c.step()
    c.objects[("PodGroup", "job")] = OwnedObject("PodGroup", "job", phase="Inqueue")
    c.step()
    assert c.pod("job-worker-0")["spec"]["schedulerName"] == "my-scheduler"
