"""Gang scheduling: the job's PodGroup (Volcano, scheduler-plugins, or with a Workload
Kubernetes' own: engine/kubegang.py) and pod markings."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

from trainop.api import Job
from trainop.api.persona import MPI_OPERATOR, TRAINING_OPERATOR, Persona, persona_of
from trainop.api.resolved import resolve
from trainop.api.resources import (
    GANG_PODGROUPS,
    GANG_WORKLOADS,
    PLUGINS_PODGROUPS,
    VOLCANO_PODGROUPS,
    Resource,
)
from trainop.api.templates import containers
from trainop.api.types import Defaulted
from trainop.engine import kubegang, quantity
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
    return VOLCANO_PODGROUPS if config.volcano else \
        GANG_PODGROUPS if config.workload_api else PLUGINS_PODGROUPS


def resources(config: EngineConfig) -> list[Resource]:
    """What the configured gang makes per job: its PodGroup, and Kubernetes' own a
    Workload too."""
    return [GANG_WORKLOADS, GANG_PODGROUPS] if config.workload_api else [podgroups(config)]


def min_member(job: Defaulted) -> int:
    sp = job.spec.run_policy.scheduling_policy
    if sp is not None and sp.min_available is not None:
        return sp.min_available
    return resolve(job).total


def min_resources(job: Defaulted) -> dict[str, str]:
    """Given minResources, else what the first minMember pods ask for, replica type by
    replica type in the spec's order, each container's requests (its limits when it has
    no requests at all), as upstream (pkg/controller.v1/common/util.go:108-140). Upstream
    orders the types by PriorityClass value first, from a lister whose informer is never
    started (and its ClusterRole cannot read PriorityClasses): every type is priority 0
    there, in Go's map order; the spec's order is one of those orders, and a stable one."""
    sp = job.spec.run_policy.scheduling_policy
    if sp is not None and sp.min_resources:
        return {k: str(v) for k, v in sp.min_resources.items()}
    left = min_member(job)
    counted: dict[str, int] = {}
    for rtype, n in resolve(job).replicas.items():
        counted[rtype] = min(n, max(left, 0))
        left -= counted[rtype]
    return _summed(job, counted, _upstream_amounts)


def _upstream_amounts(resources: dict[str, Any]) -> dict[str, Any]:
    """A container's requests, or its limits where it has no requests at all."""
    requests, limits = resources.get("requests"), resources.get("limits")
    return requests if isinstance(requests, dict) else \
        limits if isinstance(limits, dict) else {}


def _mpi_operator_amounts(resources: dict[str, Any]) -> dict[str, Any]:
    """A container's limits overridden, name by name, by its requests."""
    limits, requests = resources.get("limits"), resources.get("requests")
    return {**(limits if isinstance(limits, dict) else {}),
            **(requests if isinstance(requests, dict) else {})}


def _summed(job: Defaulted, pods: Mapping[str, int],
            amounts_of: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, str]:
    """What `pods` of each replica type ask for in all, each container's amounts as
    `amounts_of` reads them; an amount that is no quantity is left out (the API server
    refuses the pod itself: it is said there)."""
    total: dict[str, Fraction] = {}
    for rtype, n in pods.items():
        for c in containers(job.spec.replica_specs[rtype].template):
            resources = c.get("resources")
            for name, value in amounts_of(resources if isinstance(resources, dict)
                                          else {}).items():
                try:
                    total[name] = total.get(name, Fraction(0)) + quantity.parse(value) * n
                except ValueError:
                    continue
    return {k: quantity.fmt(v) for k, v in sorted(total.items())}


class Gang:
    """How the operator of a job's persona gangs it: training-operator's (upstream's
    pkg/controller.v1/common: job.go, scheduling.go, control/podgroup_control.go)."""

    def held(self, observed: Observed, job: Job, config: EngineConfig) -> bool:
        """Volcano admits a gang before its pods may exist: until its PodGroup is
        admitted, upstream makes nothing else and writes no status but lastReconcileTime
        (pkg/controller.v1/common/job.go:318-330)."""
        if not config.volcano:
            return False
        pg = observed.object("PodGroup", job.name)
        return pg is None or pg.phase not in ADMITTED_PHASES

    def told_at_end(self, job: Job, clean_pod_policy: str) -> list[tuple[str, str]] | None:
        """The events (reason, message) the deletion of a finished job's PodGroup tells,
        as it goes; None: the PodGroup is kept. Upstream deletes it, in its words
        (pkg/controller.v1/common/job.go:238-243)."""
        return [("JobTerminated", "Job has been terminated. Deleting PodGroup"),
                ("SuccessfulDeletePodGroup", f"Deleted PodGroup: {job.name}")]

    def objects(self, job: Defaulted, config: EngineConfig) -> list[dict[str, Any]]:
        """What the gang makes for the job."""
        return [self.pod_group(job, config)]

    def pod_group(self, job: Defaulted, config: EngineConfig) -> dict[str, Any]:
        sp = job.spec.run_policy.scheduling_policy
        spec: dict[str, Any] = {"minMember": min_member(job)}
        resources = min_resources(job)
        # Volcano's minResources is a pointer upstream: written even when empty
        if resources or config.volcano:
            spec["minResources"] = resources
        if config.volcano:
            # upstream: pkg/controller.v1/common/job.go:252-267 (queue "default" unless
            # given)
            spec["queue"] = sp.queue if sp is not None and sp.queue else "default"
            if sp is not None and sp.priority_class:
                spec["priorityClassName"] = sp.priority_class
        elif sp is not None and sp.schedule_timeout_seconds is not None:
            spec["scheduleTimeoutSeconds"] = sp.schedule_timeout_seconds
        meta = object_meta(job, job.name, job_labels(job))
        if job.metadata.annotations:  # as upstream: pkg/controller.v1/common/scheduling.go:54
            meta["annotations"] = dict(job.metadata.annotations)
        return podgroups(config).new(meta, spec=spec)

    def decorate_pod(self, job: Job, rtype: str, pod: dict[str, Any], config: EngineConfig
                     ) -> None:
        # a template's own schedulerName is kept (pkg/controller.v1/control/
        # podgroup_control.go:66)
        pod["spec"].setdefault("schedulerName", _scheduler(config))
        if config.volcano:
            annotations = pod["metadata"].setdefault("annotations", {})
            annotations[VOLCANO_GROUP_ANNOTATION] = job.name
            annotations[VOLCANO_TASK_ANNOTATION] = rtype.lower()
        else:
            pod["metadata"]["labels"][PLUGINS_GROUP_LABEL] = job.name


def _scheduler(config: EngineConfig) -> str:
    return "volcano" if config.volcano else str(config.gang_scheduler)


class MPIOperatorGang(Gang):
    """mpi-operator's (mpi_job_controller.go: syncHandler, cleanUpWorkerPods; podgroup.go):
    the pods and the launcher Job are made at once, the gang left to the scheduler."""

    def held(self, observed: Observed, job: Job, config: EngineConfig) -> bool:
        return False

    def told_at_end(self, job: Job, clean_pod_policy: str) -> list[tuple[str, str]] | None:
        """Deleted with the workers only, telling nothing."""
        return [] if clean_pod_policy in ("All", "Running") else None

    def pod_group(self, job: Defaulted, config: EngineConfig) -> dict[str, Any]:
        return _mpi_operator_pod_group(job, config)

    def decorate_pod(self, job: Job, rtype: str, pod: dict[str, Any], config: EngineConfig
                     ) -> None:
        """The scheduler's name always, and no task annotation (decoratePodTemplateSpec)."""
        pod["spec"]["schedulerName"] = _scheduler(config)
        if config.volcano:
            pod["metadata"].setdefault("annotations", {})[VOLCANO_GROUP_ANNOTATION] = job.name
        else:
            pod["metadata"]["labels"][PLUGINS_GROUP_LABEL] = job.name


class WorkloadAPIGang(Gang):
    """Kubernetes' own, the same for every persona (neither upstream has it): a Workload
    and PodGroup made with the job's other objects, deleted when it finishes or is
    suspended, telling nothing; a job the cluster cannot gang is held (kubegang.hold)."""

    def held(self, observed: Observed, job: Job, config: EngineConfig) -> bool:
        return kubegang.held(job, config, bool(observed.pods))

    def told_at_end(self, job: Job, clean_pod_policy: str) -> list[tuple[str, str]] | None:
        return []

    def objects(self, job: Defaulted, config: EngineConfig) -> list[dict[str, Any]]:
        """Its Workload and PodGroup, where the cluster can make them as the job asks."""
        if kubegang.why_held(job, config) is not None:
            return []
        return kubegang.objects(job, min_member(job))

    def decorate_pod(self, job: Job, rtype: str, pod: dict[str, Any], config: EngineConfig
                     ) -> None:
        kubegang.decorate_pod(job, pod)


GANGS: dict[Persona, Gang] = {TRAINING_OPERATOR: Gang(), MPI_OPERATOR: MPIOperatorGang()}
"""Each persona's gang."""
WORKLOAD_API_GANG = WorkloadAPIGang()


def gang_of(job: Job, config: EngineConfig) -> Gang:
    return WORKLOAD_API_GANG if config.workload_api else GANGS[persona_of(job)]


def said(job: Defaulted, config: EngineConfig) -> str:
    """How the manager's gang gangs the job, in a line (trainop validate)."""
    if config.workload_api:
        return kubegang.said(job, min_member(job))
    who = "Volcano" if config.volcano else f"scheduler-plugins (scheduler {config.gang_scheduler})"
    return f"{who}: PodGroup {job.name} ({podgroups(config).api_version}), " \
        f"minMember {min_member(job)}"


VOLCANO_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
"""A job's Volcano queue where its schedulingPolicy names none (mpi-operator's newPodGroup)."""


def _mpi_operator_pod_group(job: Defaulted, config: EngineConfig) -> dict[str, Any]:
    """mpi-operator's PodGroup (podgroup.go: newPodGroup): minMember as upstream's, the
    queue from the policy or the job's Volcano queue annotation (none by default), the
    priority class from the policy or the launcher's or the workers' template, the
    scheduler-plugins timeout always written (0 by default), no annotation of the job's.
    Its labels are the two trainop's caches watch by (mpi-operator writes none)."""
    sp = job.spec.run_policy.scheduling_policy
    members = min_member(job)
    spec: dict[str, Any] = {"minMember": members}
    resources = _mpi_operator_min_resources(job, members)
    if config.volcano:
        queue = (sp.queue if sp is not None and sp.queue else
                 (job.metadata.annotations or {}).get(VOLCANO_QUEUE_ANNOTATION))
        if queue:
            spec["queue"] = queue
        priority = _mpi_operator_priority_class(job)
        if priority:
            spec["priorityClassName"] = priority
        if resources is not None:  # a pointer there: written even when empty
            spec["minResources"] = resources
    else:
        spec["scheduleTimeoutSeconds"] = (
            sp.schedule_timeout_seconds if sp is not None
            and sp.schedule_timeout_seconds is not None else 0)
        if resources:
            spec["minResources"] = resources
    return podgroups(config).new(object_meta(job, job.name, job_labels(job)), spec=spec)


def _mpi_operator_priority_class(job: Job) -> str | None:
    sp = job.spec.run_policy.scheduling_policy
    if sp is not None and sp.priority_class:
        return sp.priority_class
    for rtype in ("Launcher", "Worker"):
        rspec = job.spec.replica_specs.get(rtype)
        name = ((rspec.template or {}).get("spec") or {}).get("priorityClassName") \
            if rspec is not None else None
        if isinstance(name, str) and name:
            return name
    return None


def _mpi_operator_min_resources(job: Defaulted, members: int) -> dict[str, str] | None:
    """mpi-operator's calPGMinResource: the launcher and, where they are more than
    `members`, `members - 1` workers; each container's requests, and its limits for what
    it requests nothing of. mpi-operator orders the two by their PriorityClasses' values
    first; here they are taken as equal (the workers last), as they are when the
    templates name none."""
    sp = job.spec.run_policy.scheduling_policy
    if sp is not None and sp.min_resources is not None:
        return {k: str(v) for k, v in sp.min_resources.items()}
    if members == 0:
        return None
    replicas = dict(resolve(job).replicas)
    if sum(replicas.values()) > members and "Worker" in replicas:
        replicas["Worker"] = members - 1
    return _summed(job, replicas, _mpi_operator_amounts)
