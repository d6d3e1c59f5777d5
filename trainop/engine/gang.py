"""Gang scheduling: the job's PodGroup (Volcano or scheduler-plugins) and pod markings."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from trainop.api import Job
from trainop.api.resolved import resolve
from trainop.api.resources import PLUGINS_PODGROUPS, VOLCANO_PODGROUPS, Resource
from trainop.api.templates import containers
from trainop.engine import quantity
from trainop.engine.config import EngineConfig
from trainop.engine.labels import job_labels, object_meta
from trainop.engine.observed import Observed

VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
VOLCANO_TASK_ANNOTATION = "volcano.sh/task-spec"
PLUGINS_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"

ADMITTED_PHASES = frozenset({"Inqueue", "Running", "Completed", "Unknown"})
"""Volcano PodGroup phases in which the job's pods may be created."""


def podgroups(config: EngineConfig) -> Resource:
    """The PodGroup resource of the configured gang scheduler."""
    return VOLCANO_PODGROUPS if config.volcano else PLUGINS_PODGROUPS


def min_member(job: Job) -> int:
    sp = job.spec.run_policy.scheduling_policy
    if sp is not None and sp.min_available is not None:
        return sp.min_available
    return resolve(job).total


def min_resources(job: Job) -> dict[str, str]:
    """Given minResources, else what the first minMember pods ask for, replica type by
    replica type in the spec's order, each container's requests (its limits when it has
    no requests at all), as upstream (pkg/controller.v1/common/util.go:108-140). Upstream
    orders the types by PriorityClass value first, from a lister whose informer is never
    started (and its ClusterRole cannot read PriorityClasses): every type is priority 0
    there, in Go's map order; the spec's order is one of those orders, and a stable one."""
    sp = job.spec.run_policy.scheduling_policy
    if sp is not None and sp.min_resources:
        return {k: str(v) for k, v in sp.min_resources.items()}
    total: dict[str, Fraction] = {}
    left = min_member(job)
    replicas = resolve(job).replicas
    for rtype, rspec in job.spec.replica_specs.items():
        per_pod: dict[str, Fraction] = {}
        for c in containers(rspec.template):
            res = c.get("resources") or {}
            requests = res.get("requests")
            amounts: dict[str, Any] = requests if isinstance(requests, dict) else (
                res.get("limits") or {})
            for name, value in amounts.items():
                try:
                    per_pod[name] = per_pod.get(name, Fraction(0)) + quantity.parse(value)
                except ValueError:
                    continue  # the API server rejects the pod itself; say it there
        pods = min(replicas[rtype], max(left, 0))
        left -= pods
        for name, amount in per_pod.items():
            total[name] = total.get(name, Fraction(0)) + amount * pods
    return {k: quantity.fmt(v) for k, v in sorted(total.items())}


def held(observed: Observed, job: Job, config: EngineConfig) -> bool:
    """Volcano admits a gang before its pods may exist: until its PodGroup is admitted,
    upstream makes nothing else and writes no status but lastReconcileTime
    (pkg/controller.v1/common/job.go:318-330)."""
    if not config.volcano:
        return False
    pg = observed.object("PodGroup", job.name)
    return pg is None or pg.phase not in ADMITTED_PHASES


def desired_pod_group(job: Job, config: EngineConfig) -> dict[str, Any]:
    sp = job.spec.run_policy.scheduling_policy
    spec: dict[str, Any] = {"minMember": min_member(job)}
    resources = min_resources(job)
    # Volcano's minResources is a pointer upstream: written even when empty
    if resources or config.volcano:
        spec["minResources"] = resources
    if config.volcano:
        # upstream: pkg/controller.v1/common/job.go:252-267 (queue "default" unless given)
        spec["queue"] = sp.queue if sp is not None and sp.queue else "default"
        if sp is not None and sp.priority_class:
            spec["priorityClassName"] = sp.priority_class
    elif sp is not None and sp.schedule_timeout_seconds is not None:
        spec["scheduleTimeoutSeconds"] = sp.schedule_timeout_seconds
    meta = object_meta(job, job.name, job_labels(job))
    if job.metadata.annotations:  # as upstream: pkg/controller.v1/common/scheduling.go:54
        meta["annotations"] = dict(job.metadata.annotations)
    return podgroups(config).new(meta, spec=spec)


def decorate_pod(job: Job, rtype: str, pod: dict[str, Any], config: EngineConfig) -> None:
    meta = pod["metadata"]
    spec = pod["spec"]
    # a template's own schedulerName is kept (pkg/controller.v1/control/podgroup_control.go:66)
    if config.volcano:
        spec.setdefault("schedulerName", "volcano")
        annotations = meta.setdefault("annotations", {})
        annotations[VOLCANO_GROUP_ANNOTATION] = job.name
        annotations[VOLCANO_TASK_ANNOTATION] = rtype.lower()
    else:
        spec.setdefault("schedulerName", config.gang_scheduler)
        meta["labels"][PLUGINS_GROUP_LABEL] = job.name
