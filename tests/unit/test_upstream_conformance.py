"""What upstream training-operator v1.9 clients read, encoded from upstream's code (branch
release-1.9 of kubeflow/training-operator; each case cites the file and line): condition
texts and when they are set, pod services, the master role label, gang scheduling. MPIJob's
own objects: test_mpi_v1.py."""

from __future__ import annotations

import pytest

from tests.jobs import TYPICAL, job
from tests.sim import Cluster
from tests.upstream import CREATED_AT, FACTS, IDS, Facts, failed_reason
from trainop.api import KINDS


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


@pytest.mark.parametrize("facts", FACTS, ids=IDS)
def test_the_master_role_label(facts: Facts) -> None:
    # the label the SDK's `is_master=True` lookups and get_job_logs read
    # (pkg/controller.v1/common/pod.go:320 and :406-407; each kind's IsMasterRole)
    c = Cluster(job(facts.kind, facts.replicas))
    plan = c.step()
    labelled = sorted(o["metadata"]["name"] for o in plan.create if o["kind"] == "Pod" and
                      o["metadata"]["labels"].get("training.kubeflow.org/job-role") == "master")
    assert labelled == facts.masters, facts.where


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


# -- Running, Succeeded, Failed and Restarting: when, and in each kind's words -------------

@pytest.mark.parametrize("facts", FACTS, ids=IDS)
def test_running_once_the_lead_runs_and_each_kinds_words(facts: Facts) -> None:
    running, succeeded, _ = facts.words("default")
    c = Cluster(job(facts.kind, facts.replicas))
    c.step()
    c.set(facts.lead, phase="Running")  # the others still pending
    c.step()
    cond = c.condition("Running")
    assert cond is not None, facts.where
    assert (cond.reason, cond.message) == (f"{facts.kind}Running", running), facts.where
    c.all("Succeeded")
    c.step()
    cond = c.condition("Succeeded")
    assert (cond.reason, cond.message) == (f"{facts.kind}Succeeded", succeeded), facts.where


def test_no_running_before_the_lead_runs() -> None:
    c = Cluster(job("PyTorchJob", {"Master": 1, "Worker": 2}))
    c.step()
    c.all("Running", rtype="Worker")  # workers only: upstream looks at the Master (PT:384)
    c.step()
    assert c.condition("Running") is None


@pytest.mark.parametrize("facts", FACTS, ids=IDS)
def test_failed_starts_with_the_kinds_words(facts: Facts) -> None:
    never = {rt: {"restartPolicy": "Never"} for rt in facts.replicas}
    c = Cluster(job(facts.kind, facts.replicas, replica_extra=never))
    c.step()
    c.set("job-worker-1", phase="Failed", exit_code=3, reason="Error")
    c.step()
    failed = c.condition("Failed")
    assert failed.reason == failed_reason(facts.kind), facts.where
    # upstream's message first; what failed after it (README: differences)
    assert failed.message == f"{facts.words('default')[2]} Last failure: pod job-worker-1 " \
        "exited with code 3 (Error).", facts.where


@pytest.mark.parametrize(("kind", "replicas", "message", "where"), [
    ("PyTorchJob", {"Master": 1, "Worker": 2},
     "job job is restarting because Worker replica(s) failed.",
     "pkg/controller.v1/common/pod.go:362"),
    ("MPIJob", {"Launcher": 1, "Worker": 2},
     "MPIJob job is restarting because 1 Worker replica(s) failed.",
     "pkg/controller.v1/mpi/mpijob_controller.go:602"),
], ids=["common", "mpi"])
def test_restarting_starts_with_upstreams_words(kind: str, replicas: dict[str, int],
                                                message: str, where: str) -> None:
    c = Cluster(job(kind, replicas, replica_extra={"Worker": {"restartPolicy": "ExitCode"}}))
    c.step()
    c.set("job-worker-1", phase="Failed", exit_code=137, reason="OOMKilled")
    c.step()
    restarting = c.condition("Restarting")
    assert restarting.reason == f"{kind}Restarting", where
    assert restarting.message == f"{message} Last failure: pod job-worker-1 exited with " \
        "code 137 (OOMKilled).", where


# -- training_operator_jobs_*_total: what counts ----------------------------------------

def _counted(c: Cluster) -> dict[str, int]:
    total: dict[str, int] = {}
    for plan in c.plans:
        for name, n in plan.metrics.items():
            total[name] = total.get(name, 0) + n
    return total


def test_a_job_is_counted_created_then_successful_once() -> None:
    # created: each kind's onOwnerCreateFunc (e.g. pytorchjob_controller.go:523);
    # successful: the Succeeded branch of UpdateJobStatus (:399)
    c = Cluster(job("PyTorchJob", {"Master": 1, "Worker": 1}))
    c.step()
    c.all("Running")
    c.step()
    c.all("Succeeded")
    c.step()
    c.step()
    assert _counted(c) == {"created": 1, "successful": 1}


def test_each_restarted_pod_counts_once() -> None:
    # pkg/controller.v1/common/pod.go:355-366: one restart per failed pod deleted
    c = Cluster(job("JAXJob", {"Worker": 3}, replica_extra={"Worker": {
        "restartPolicy": "ExitCode"}}))
    c.step()
    c.set("job-worker-0", phase="Failed", exit_code=137)
    c.set("job-worker-2", phase="Failed", exit_code=137)
    c.step()
    assert _counted(c)["restarted"] == 2


@pytest.mark.parametrize(("spec", "failed"), [
    ({}, 1),  # replicas failed: UpdateJobStatus's failed branch (pytorchjob_controller.go:442)
    ({"runPolicy": {"backoffLimit": 0}}, 0),  # a limit: job.go:216-247 counts nothing
], ids=["by-replicas", "by-backoff-limit"])
def test_only_a_job_failed_by_its_replicas_counts_as_failed(spec: dict[str, object],
                                                            failed: int) -> None:
    policy = "Never" if not spec else "OnFailure"
    c = Cluster(job("PyTorchJob", {"Master": 1, "Worker": 1}, spec=spec, replica_extra={
        "Worker": {"restartPolicy": policy}}))
    c.step()
    if spec:
        c.set("job-worker-0", phase="Running", restarts=1)
    else:
        c.set("job-worker-0", phase="Failed", exit_code=1)
    c.step()
    assert c.condition("Failed") is not None
    assert _counted(c).get("failed", 0) == failed


@pytest.mark.parametrize(("kind", "told"), [("PyTorchJob", True), ("MPIJob", False)])
def test_an_ended_pods_exit_code_is_told(kind: str, told: bool) -> None:
    # pkg/controller.v1/common/pod.go:343-346 (reason exitedWithCodeReason, Normal); MPI
    # reconciles its pods itself and tells none (mpijob_controller.go:330-413)
    from trainop.engine import Observed, reconcile
    from trainop.engine.addressing import ClusterAddressing
    from trainop.frameworks import framework_for

    c = Cluster(job(kind, TYPICAL[kind]))
    c.step()
    observed = Observed(pods=c.observed.pods, exited=(("job-worker-0", 3),))
    plan = reconcile(c.job, observed, c.now, framework_for(kind), ClusterAddressing())
    events = [(e.type, e.reason, e.message) for e in plan.events]
    assert (("Normal", "ExitedWithCode", "Pod: default.job-worker-0 exited with code 3")
            in events) is told
