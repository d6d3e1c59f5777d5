"""mpi-operator's kubeflow.org/v2beta1 MPIJob, served beside v1 from one CRD.

Its schema is mpi-operator v0.8.2's (pkg/apis/kubeflow/v2beta1/types.go, with the defaults
and enums of its kubebuilder markers) plus trainop's own status fields. The model is read
by CRD generation and conversion only: the engine reads every MPIJob as v1, where a job
written in v2beta1 says so (api/conversion.py).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from trainop.api import types
from trainop.api.kinds import GROUP, declare_version
from trainop.api.model import Model, PodTemplate, SchemaHint
from trainop.api.types import ConditionStatus, ObjectMeta, RestartPolicy, SharedRunPolicy

VERSION = "v2beta1"
API_VERSION = f"{GROUP}/{VERSION}"


class ReplicaSpec(Model):
    replicas: int | None = None
    template: PodTemplate | None = None
    restart_policy: RestartPolicy | None = None


class MPIJobSpec(Model):
    slots_per_worker: Annotated[int | None, SchemaHint(default=1)] = None
    run_launcher_as_worker: Annotated[bool | None, SchemaHint(default=False)] = None
    run_policy: SharedRunPolicy | None = None
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


class JobCondition(types.JobCondition):
    status: Annotated[ConditionStatus, SchemaHint(enum=True)]


class JobStatus(types.JobStatus):
    """v1's status, with mpi-operator's conditions: a list keyed by type."""

    # the same conditions, schema'd as mpi-operator's (list is invariant, hence the ignore)
    conditions: Annotated[
        list[JobCondition] | None,
        SchemaHint(list_map_keys=("type",))] = None  # type: ignore[assignment]


@declare_version("MPIJob", VERSION)
class MPIJob(Model):
    """An MPIJob as mpi-operator's v2beta1 API has it."""

    api_version: str = API_VERSION
    kind: Literal["MPIJob"] = "MPIJob"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: MPIJobSpec
    status: JobStatus | None = None
