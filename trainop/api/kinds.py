"""What trainop knows of a job kind before any job exists (KindInfo), and the registry of
declared kinds.

Each kind's facts are declared with its model (api/types.py: `info` of each Job class), in
the API layer because defaulting, validation and CRD generation need them; the framework
plugins read them from there rather than repeating them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from trainop.api.model import Model
    from trainop.api.types import Job

GROUP = "kubeflow.org"
VERSION = "v1"
API_VERSION = f"{GROUP}/{VERSION}"


@dataclass(frozen=True)
class KindInfo:
    """What trainop knows of one job kind before any job exists."""

    kind: str
    plural: str
    replica_specs_field: str
    replica_types: tuple[str, ...]
    default_container: str
    default_port_name: str
    default_port: int
    default_restart_policy: str
    framework: str
    """The `framework` label of the Prometheus metrics and the plugin's name."""
    master_role: tuple[str, ...] = ()
    """Replica types whose replicas are labelled training.kubeflow.org/job-role=master and
    lead the job (the first present one: its pods make the job Running)."""
    worker0_is_master: bool = False
    """Without a replica of the master role, worker 0 is the master (PyTorch, TF, JAX)."""
    scale_replica_type: str | None = None
    """The replica type behind the scale subresource, where the kind has one."""
    default_ports: bool = True
    """Whether defaulting appends the named port to the default container."""
    unset_replicas_zero: tuple[str, ...] = ()
    """Replica types whose `replicas` default to 0 instead of 1 (MPI's workers)."""
    free_container_names: bool = False
    """Containers may have any names (MPI: upstream's examples name them freely); for other
    kinds the operator finds its container by the default name."""
    age_column_first: bool = False
    """`kubectl get` shows Age before State (upstream's MPIJob CRD lists them so)."""
    unindexed_types: tuple[str, ...] = ()
    """Replica types of one pod named and labelled without an index (MPI's launcher:
    `{job}-launcher`, pkg/controller.v1/mpi/mpijob_controller.go:1006)."""
    pods_under_one_service: bool = False
    """Where pods are reached by DNS name, they are named through one headless service of
    the job's name (hostname and subdomain: `{pod}.{job}.{ns}.svc`) instead of a service
    each (MPIJob: its SSH transport; the default one names pods to kubectl exec)."""
    validating_webhook: bool = True
    """The install registers a validating webhook for the kind (upstream v1.9 has one for
    each kind but MPIJob, and none for MXJob, which it no longer serves)."""

    def canonical_replica_type(self, name: str) -> str | None:
        """The replica type `name` stands for, case-insensitively, or None."""
        for rtype in self.replica_types:
            if rtype.lower() == name.lower():
                return rtype
        return None


KINDS: dict[str, KindInfo] = {}
"""Every declared kind's facts, in the order declared (filled by declare_kind only)."""
JOB_MODELS: dict[str, type[Job]] = {}
"""Every declared kind's model (filled by declare_kind only)."""

OTHER_VERSIONS: dict[str, dict[str, type[Model]]] = {}
"""Kinds served at more versions than v1 (stored): kind -> version -> that version's model
(filled by declare_version only). MPIJob: mpi-operator's v2beta1."""

M = TypeVar("M", bound="type[Job]")
V = TypeVar("V", bound="type[Model]")


def declare_kind(model: M) -> M:
    """Declare a job kind by its model, which carries the kind's facts (`model.info`): the
    one call that makes the kind known to parsing, defaulting, validation and CRDs. A class
    decorator; declaring the same model again changes nothing."""
    kind = model.info.kind
    if JOB_MODELS.get(kind, model) is not model:
        raise ValueError(f"the kind {kind} is declared already, by another model")
    KINDS[kind] = model.info
    JOB_MODELS[kind] = model
    return model


def withdraw_kind(kind: str) -> None:
    """Forget a declared kind (a kind declared for a while, as a test's)."""
    KINDS.pop(kind, None)
    JOB_MODELS.pop(kind, None)


def declare_version(kind: str, version: str) -> Callable[[V], V]:
    """Declare that a kind is served at `version` too, by that version's model (a class
    decorator): its CRD serves the version beside v1, and conversion translates it."""
    def declare(model: V) -> V:
        OTHER_VERSIONS.setdefault(kind, {})[version] = model
        return model
    return declare
