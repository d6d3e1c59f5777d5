"""mpi-operator's kubeflow.org/v2beta1 MPIJob, served beside v1 from one CRD.

Its schema is mpi-operator v0.8.2's (pkg/apis/kubeflow/v2beta1/types.go, with the defaults
and enums of its kubebuilder markers) plus trainop's own status fields. The model is read
by CRD generation and conversion only: the engine reads every MPIJob as v1, where a job
written in v2beta1 says so (api/conversion.py).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from trainop.api.kinds import GROUP, declare_version
from trainop.api.model import Int64, Model, PodTemplate, Quantity, SchemaHint, Time
from trainop.api.types import (
    CleanPodPolicy,
    ConditionStatus,
    FailureInfo,
    ObjectMeta,
    ReplicaStatus,
    RestartPolicy,
    WaitingReplica,
)

VERSION = "v2beta1"
API_VERSION = f"{GROUP}/{VERSION}"


class ReplicaSpec(Model):
    replicas: int | None = None
    template: PodTemplate | None = None
    restart_policy: RestartPolicy | None = None


class SchedulingPolicy(Model):
    min_available: int | None = None
    queue: str | None = None
    min_resources: dict[str, Quantity] | None = None
    priority_class: str | None = None
    schedule_timeout_seconds: int | None = None


class RunPolicy(Model):
    clean_pod_policy: CleanPodPolicy | None = None
    ttl_seconds_after_finished: int | None = None
    active_deadline_seconds: Int64 | None = None
    backoff_limit: int | None = None
    scheduling_policy: SchedulingPolicy | None = None
    suspend: Annotated[bool | None, SchemaHint(default=False)] = None
    managed_by: str | None = None


class MPIJobSpec(Model):
    slots_per_worker: Annotated[int | None, SchemaHint(default=1)] = None
    run_launcher_as_worker: Annotated[bool | None, SchemaHint(default=False)] = None
    run_policy: RunPolicy | None = None
    replica_specs: dict[str, ReplicaSpec] = Field(alias="mpiReplicaSpecs")
    ssh_auth_mount_path: Annotated[str | None, SchemaHint(default="/root/.ssh")] = None
    # no enum: mpi-operator's marker for it is malformed (`Enum:AtStartup;...`), so its
    # CRD takes any string
    launcher_creation_policy: Annotated[
        Literal["AtStartup", "WaitForWorkersReady"] | None,
        SchemaHint(default="AtStartup")] = None
    mpi_implementation: Annotated[
        Literal["OpenMPI", "Intel", "MPICH"] | None,
        SchemaHint(default="OpenMPI", enum=True)] = None


class JobCondition(Model):
    type: str
    status: Annotated[ConditionStatus, SchemaHint(enum=True)]
    reason: str | None = None
    message: str | None = None
    last_update_time: Time | None = None
    last_transition_time: Time | None = None


class JobStatus(Model):
    conditions: Annotated[list[JobCondition] | None, SchemaHint(list_map_keys=("type",))] = None
    replica_statuses: dict[str, ReplicaStatus] | None = None
    start_time: Time | None = None
    completion_time: Time | None = None
    last_reconcile_time: Time | None = None
    last_failure: FailureInfo | None = None
    waiting_replicas: list[WaitingReplica] | None = Field(
        None, description="trainop: the replicas whose pods have not started, and why.")


@declare_version("MPIJob", VERSION)
class MPIJob(Model):
    """An MPIJob as mpi-operator's v2beta1 API has it."""

    api_version: str = API_VERSION
    kind: Literal["MPIJob"] = "MPIJob"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: MPIJobSpec
    status: JobStatus | None = None
