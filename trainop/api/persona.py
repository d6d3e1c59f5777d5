"""Personas: trainop serves each API version as the operator that defined it, and a job is
run as that operator runs it. `kubeflow.org/v1` is training-operator's; a v2beta1 MPIJob is
mpi-operator's. What a client can tell the two apart by is a field of the job's `Persona`,
resolved once from the version the job was written in (`persona_of`); the rest of the tree
reads those fields, or keys its own tables by persona, and never compares a version or an
operator's name itself."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from trainop.api.conversion import written_in
from trainop.api.kinds import VERSION
from trainop.api.types import Job


@dataclass(frozen=True, eq=False)  # one of each: known by identity, a key of tables
class Persona:
    name: str
    """The operator, as the project speaks of it."""
    version: str
    """The API version its jobs are written in, which what they own names as its owner
    (as each operator's controller reference does)."""
    manager: str
    """The runPolicy.managedBy value that names trainop (the operator's own); every other
    value is another controller's."""
    operator_label: str | None = None
    """`training.kubeflow.org/operator-name` on what the job owns; None: its kind's
    controller's name (`pytorchjob-controller`)."""
    event_source: str | None = None
    """The source component of the job's events; None: its kind's controller's name."""
    restart_policies: Mapping[str, str] = field(default_factory=dict)
    """Replica type -> the restartPolicy it defaults to, where that is not the kind's."""
    role_labels: bool = False
    """Pods are labelled by `job-role` (no `replica-type`), a worker's index read from
    its name."""
    launcher_job: bool = False
    """A launcher is made by a batch/v1 Job under the job's limits."""
    kueue_integration: bool = False
    """Kueue ships an integration of its own for the operator (`kubeflow.org/mpijob`, on
    as Kueue ships), which keeps the Workloads of its kind at every version it is served."""


TRAINING_OPERATOR = Persona("training-operator", VERSION,
                            manager="kubeflow.org/training-operator")
MPI_OPERATOR = Persona(
    "mpi-operator", "v2beta1", manager="kubeflow.org/mpi-operator", operator_label="mpi-operator",
    event_source="mpi-job-controller",  # controllerAgentName, mpi_job_controller.go
    restart_policies={"Launcher": "OnFailure"},  # v2beta1/default.go
    role_labels=True, launcher_job=True, kueue_integration=True)

PERSONAS: dict[str, Persona] = {p.version: p for p in (TRAINING_OPERATOR, MPI_OPERATOR)}
"""API version -> the persona of the jobs written in it."""


def persona_at(api_version: str, annotations: dict[str, str] | None = None) -> Persona:
    """The persona of a job read at `api_version` with these annotations (the version it
    was written in, conversion.written_in); training-operator's for a version unknown."""
    return PERSONAS.get(written_in(annotations, api_version), TRAINING_OPERATOR)


def persona_of(job: Job) -> Persona:
    return persona_at(job.api_version, job.metadata.annotations)
