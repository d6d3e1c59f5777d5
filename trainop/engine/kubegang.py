"""Kubernetes' own gang (--gang-scheduler-name=workload-api): a job's Workload and PodGroup
of scheduling.k8s.io/v1beta1 (Kubernetes 1.37+, gate GenericWorkload), its pods naming the
PodGroup; kube-scheduler binds none of them until minCount fit.

Written as the in-tree Job controller writes them (pkg/controller/job/
job_scheduling_manager.go, KEP-5547) where the cases are the same: the job the controller
of both, the Workload's controllerRef naming it, one pod group template, the PodGroup a
copy of it with its workloadRef, the pods' spec.schedulingGroup. What differs: the names
are the job's (as the other two gangs name their PodGroup; the Job controller hashes its
UID into them), and the PodGroup and pods carry no extra ownerReference to the Workload
and PodGroup (the job owns all three, so the garbage collector removes them with it)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trainop.api import Job
from trainop.api.kinds import GROUP
from trainop.api.resources import GANG_PODGROUPS, GANG_WORKLOADS
from trainop.api.types import Defaulted
from trainop.engine import conditions as cond
from trainop.engine.config import EngineConfig
from trainop.engine.labels import job_labels, object_meta

if TYPE_CHECKING:
    from trainop.engine.round import Round

TEMPLATE = "replicas"
"""The Workload's one pod group template: every replica of the job is one gang."""

UNAVAILABLE = "GangSchedulingUnavailable"
"""The condition (True while held) and Warning event of a job the cluster cannot gang."""
AVAILABLE = "GangSchedulingAvailable"
"""The condition's reason once the cluster can (a manager started again on a cluster that
serves the API)."""
API_MISSING = (
    "the cluster does not serve scheduling.k8s.io/v1beta1 workloads and podgroups "
    "(Kubernetes 1.37+, with the GenericWorkload feature gate on and "
    "--runtime-config=scheduling.k8s.io/v1beta1=true on kube-apiserver)")
TOPOLOGY_DROPPED = (
    "the API server drops a PodGroup's topology constraint (the "
    "TopologyAwareWorkloadScheduling feature gate is off)")


def topology_key(job: Job) -> str | None:
    sp = job.spec.run_policy.scheduling_policy
    return sp.topology_key if sp is not None else None


def why_held(job: Job, config: EngineConfig) -> str | None:
    """Why the cluster cannot gang `job` as it asks (None where it can, or where the
    manager uses another gang)."""
    if not config.workload_api:
        return None
    if config.gang_unavailable is not None:
        return config.gang_unavailable
    key = topology_key(job)
    if key is not None and config.gang_topology_unavailable is not None:
        return f"schedulingPolicy.topologyKey {key}: {config.gang_topology_unavailable}"
    return None


def held(job: Job, config: EngineConfig, has_pods: bool) -> bool:
    """Whether `job` waits for a cluster that can gang it: only one of which nothing is
    made yet (one whose pods a gang bound before runs on, and is watched to its end)."""
    return not has_pods and why_held(job, config) is not None


def hold(r: Round) -> bool:
    """Hold a job the cluster cannot gang: nothing of it made (no pod would be held back
    by a gang), the condition set and a Warning event told as it is first held (and so
    on a job that runs on). True where it is held."""
    why = why_held(r.job, r.config)
    if why is None:
        if cond.is_true(r.status, UNAVAILABLE):
            r.report.condition(UNAVAILABLE, "False", AVAILABLE,
                               "The cluster gangs the job's pods: Workload and PodGroup "
                               "scheduling.k8s.io/v1beta1.")
        return False
    has_pods = bool(r.observed.pods)
    r.report.condition(UNAVAILABLE, "True", UNAVAILABLE,
                       f"The job's pods are not made: {why}." if not has_pods else
                       f"The job's pods made again join no gang: {why}.", warning=True)
    return held(r.job, r.config, has_pods)


def objects(job: Defaulted, min_count: int) -> list[dict[str, Any]]:
    """The job's Workload and PodGroup, `min_count` pods the gang's quorum."""
    template: dict[str, Any] = {"name": TEMPLATE, **_group_spec(job, min_count)}
    workload = GANG_WORKLOADS.new(_meta(job), spec={
        "controllerRef": {"apiGroup": GROUP, "kind": job.kind, "name": job.name},
        "podGroupTemplates": [template]})
    group = GANG_PODGROUPS.new(_meta(job), spec={
        "workloadRef": {"workloadName": job.name, "templateName": TEMPLATE},
        **_group_spec(job, min_count)})
    return [workload, group]


def _meta(job: Defaulted) -> dict[str, Any]:
    return object_meta(job, job.name, job_labels(job))


def _group_spec(job: Defaulted, min_count: int) -> dict[str, Any]:
    """What the template and the PodGroup both say: the gang, its topology constraint,
    its priority class (the schedulingPolicy's, as the other gangs take it)."""
    # the API's minimum is 1: a job whose minAvailable is 0 still binds as one pod fits
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": max(1, min_count)}}}
    key = topology_key(job)
    if key is not None:
        spec["schedulingConstraints"] = {"topology": [{"key": key}]}
    sp = job.spec.run_policy.scheduling_policy
    if sp is not None and sp.priority_class:
        spec["priorityClassName"] = sp.priority_class
    return spec


NEEDS = ("the cluster must serve them: Kubernetes 1.37+ with the GenericWorkload feature gate "
         "on kube-apiserver and kube-scheduler and --runtime-config="
         "scheduling.k8s.io/v1beta1=true on kube-apiserver")
TOPOLOGY_NEEDS = "and TopologyAwareWorkloadScheduling on both"


def said(job: Job, min_count: int) -> str:
    """How the job is ganged, and what the cluster needs for it (trainop validate)."""
    key = topology_key(job)
    where = f", every pod in one domain of node label {key}" if key else ""
    return (f"Kubernetes' own: Workload and PodGroup {job.name} (scheduling.k8s.io/v1beta1),"
            f" minCount {max(1, min_count)}{where}; {NEEDS}"
            f"{', ' + TOPOLOGY_NEEDS if key else ''}")


def decorate_pod(job: Job, pod: dict[str, Any]) -> None:
    """The pod names the job's PodGroup; its scheduler stays the template's (the gang is
    kube-scheduler's own)."""
    pod["spec"]["schedulingGroup"] = {"podGroupName": job.name}


def min_count_of(obj: dict[str, Any]) -> Any:
    """What of a Workload or PodGroup the engine keeps current: the gang's minCount
    (mutable, so that an elastic job's quorum follows its replicas); the rest is
    immutable."""
    spec = obj.get("spec") or {}
    if obj.get("kind") == GANG_WORKLOADS.kind:
        templates = spec.get("podGroupTemplates") or [{}]
        spec = templates[0] if isinstance(templates, list) and templates and \
            isinstance(templates[0], dict) else {}
    policy = spec.get("schedulingPolicy") or {}
    gang = policy.get("gang") if isinstance(policy, dict) else None
    return gang.get("minCount") if isinstance(gang, dict) else None


def patch_of(obj: dict[str, Any]) -> dict[str, Any]:
    """The merge patch that brings a Workload or PodGroup up to `obj`'s minCount (a
    Workload's templates are a list, sent whole: only minCount differs, the rest is
    immutable and the same)."""
    if obj["kind"] == GANG_WORKLOADS.kind:
        return {"spec": {"podGroupTemplates": obj["spec"]["podGroupTemplates"]}}
    return {"spec": {"schedulingPolicy": obj["spec"]["schedulingPolicy"]}}
