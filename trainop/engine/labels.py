"""Names, labels and owner references of the objects a job owns (upstream's conventions)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainop.api import Job
from trainop.api.kinds import GROUP
from trainop.api.numbers import whole_number
from trainop.api.persona import PERSONAS, persona_of

PREFIX = "training.kubeflow.org"
JOB_NAME = f"{PREFIX}/job-name"
OPERATOR_NAME = f"{PREFIX}/operator-name"
REPLICA_TYPE = f"{PREFIX}/replica-type"
REPLICA_INDEX = f"{PREFIX}/replica-index"
MOST_REPLICAS = 2**31 - 1
"""The largest replica index a label is read as (`replicas` is an int32)."""
JOB_ROLE = f"{PREFIX}/job-role"
ROLES = ("launcher", "worker")
"""The job-role label's values that name a replica type: mpi-operator's (its pods carry no
replica-type label)."""


def controller_name(kind: str) -> str:
    """A kind's controller, by upstream's name (`pytorchjob-controller`,
    pkg/controller.v1/*/..._controller.go: controllerName): the operator-name label's value,
    who tells the job's events, and its work queue's name in the metrics."""
    return f"{kind.lower()}-controller"


def replica_name(job: Job, rtype: str, index: int) -> str:
    """`{job}-{replicatype lowercase}-{index}`: the name of a replica's pod and service
    (`{job}-{replicatype lowercase}` for a type of one pod without an index)."""
    if rtype in job.info.unindexed_types:
        return f"{job.name}-{rtype.lower()}"
    return f"{job.name}-{rtype.lower()}-{index}"


def replica_type_of(job: Job, label: str) -> str | None:
    """The replica type (the job's spec key, e.g. `PS`) a replica-type label (`ps`) stands
    for; None when the job has no such type."""
    return next((rt for rt in job.spec.replica_specs if rt.lower() == label.lower()), None)


ROLE_LABELLED = frozenset(p.operator_label for p in PERSONAS.values() if p.role_labels)
"""The operator-name values of pods labelled by job-role (Persona.role_labels)."""


def replica_of(labels: Mapping[str, Any], name: str) -> tuple[str, int] | None:
    """The replica type (as the label writes it, lower case) and index of pod `name`, by its
    labels; a type's only pod carries no index (MPI's launcher) and is index 0. A pod of
    mpi-operator's labels has its type in job-role, and a worker's index in its name (its
    replica-index label is shifted by one where the launcher is rank 0). None for a pod
    without trainop's replica labels."""
    rtype, index = labels.get(REPLICA_TYPE), str(labels.get(REPLICA_INDEX, "0"))
    if not rtype and labels.get(OPERATOR_NAME) in ROLE_LABELLED and (
            role := labels.get(JOB_ROLE)) in ROLES:
        rtype, index = role, "0" if role == "launcher" else name.rpartition("-")[2]
    number = whole_number(index, MOST_REPLICAS)
    if not rtype or number is None:
        return None
    return str(rtype), number


def job_labels(job: Job) -> dict[str, str]:
    """What every object of `job` carries: its name, and its operator's (the controller's
    name; a job written in mpi-operator's API says `mpi-operator`, which Kueue's MPIJob
    integration and kueuectl select on)."""
    return {JOB_NAME: job.name,
            OPERATOR_NAME: persona_of(job).operator_label or controller_name(job.kind)}


def app_labels(job: Job) -> dict[str, str]:
    """The labels of an MPI job's objects besides its pods (its ConfigMap, Secret, Service,
    launcher Job), which both MPI operators label `app: <job>`: that, and the labels
    trainop's caches select on."""
    return {"app": job.name, **job_labels(job)}


def replica_labels(job: Job, rtype: str, index: int | None = None) -> dict[str, str]:
    """A replica's pod's labels: the replica type and index (mpi-operator's: the type as
    job-role, and no replica-type)."""
    if persona_of(job).role_labels:
        labels = {**job_labels(job), JOB_ROLE: rtype.lower()}
    else:
        labels = {**job_labels(job), REPLICA_TYPE: rtype.lower()}
    if index is not None and rtype not in job.info.unindexed_types:
        labels[REPLICA_INDEX] = str(index)
    return labels


def selector_string(labels: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def owner_reference(job: Job) -> dict[str, Any]:
    """The job as the controller of what it owns, at the version it was written in (a
    v2beta1 MPIJob's objects name their owner at v2beta1, as mpi-operator's do: Kueue
    tells the launcher Job of a job it manages by that)."""
    return {
        "apiVersion": f"{GROUP}/{persona_of(job).version}",
        "kind": job.kind,
        "name": job.name,
        "uid": job.metadata.uid or "",
        "controller": True,
        "blockOwnerDeletion": True,
    }


def object_meta(job: Job, name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": job.namespace,
        "labels": labels,
        "ownerReferences": [owner_reference(job)],
    }
