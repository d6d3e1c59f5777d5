"""Defaulting of a parsed job, as the upstream operator's defaulting webhook does it."""

from __future__ import annotations

from typing import Any

from trainop.api.kinds import KindInfo
from trainop.api.persona import TRAINING_OPERATOR, persona_of
from trainop.api.templates import containers
from trainop.api.types import Defaulted, Job, ReplicaSpec, RunPolicy

OUR_MANAGER = TRAINING_OPERATOR.manager
"""The runPolicy.managedBy value of jobs trainop (as the training operator) runs."""


def our_manager(job: Job) -> str:
    """The runPolicy.managedBy value by which `job` is trainop's to run: its persona's
    (mpi-operator's own name for a v2beta1 MPIJob, its KubeflowJobController,
    v2beta1/types.go); every other value is left to its controller."""
    return persona_of(job).manager


def manager_of(job: Job) -> str | None:
    """The controller `job` names to run it: `spec.managedBy` (trainop's, for Kueue's
    MultiKueue generic adapter), else `runPolicy.managedBy`, else None."""
    return job.spec.managed_by or job.spec.run_policy.managed_by


def default_job(job: Job) -> Defaulted:
    """Return a defaulted copy of `job`; the input is left untouched. Idempotent."""
    job = job.model_copy(deep=True)
    info = job.info
    spec = job.spec
    spec.replica_specs = _normalised_replica_types(info, spec.replica_specs)
    restart = persona_of(job).restart_policies

    for rtype, rspec in spec.replica_specs.items():
        if rspec.replicas is None:
            rspec.replicas = 0 if rtype in info.unset_replicas_zero else 1
        if rspec.restart_policy is None:
            rspec.restart_policy = restart.get(  # type: ignore[assignment]
                rtype, info.default_restart_policy)
        if info.default_ports and rspec.template is not None:
            _add_default_port(info, rspec.template)

    rp = spec.run_policy or RunPolicy()
    spec.run_policy = rp
    spec.default_kind_fields()  # the kind's own fields (they may read the replicas)
    if rp.clean_pod_policy is None:
        rp.clean_pod_policy = "None"
    if rp.suspend is None:
        rp.suspend = False
    return Defaulted(job)


def _normalised_replica_types(
    info: KindInfo, specs: dict[str, ReplicaSpec]
) -> dict[str, ReplicaSpec]:
    """`worker` -> `Worker`; keys that name no replica type are kept for validation."""
    out: dict[str, ReplicaSpec] = {}
    for key, rspec in specs.items():
        canonical = info.canonical_replica_type(key) or key
        if canonical in out:
            canonical = key  # two spellings of one type: keep both, validation says so
        out[canonical] = rspec
    return out


def _add_default_port(info: KindInfo, template: dict[str, Any]) -> None:
    for container in containers(template):
        if container.get("name") != info.default_container:
            continue
        ports = container.get("ports")
        if not isinstance(ports, list):
            ports = []
        if not any(isinstance(p, dict) and p.get("name") == info.default_port_name for p in ports):
            ports.append({"name": info.default_port_name, "containerPort": info.default_port})
        container["ports"] = ports
