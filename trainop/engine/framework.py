"""What a framework plugin gives the engine, and how it learns replica addresses.

A plugin adds only what is its own: the replica roles, the environment of each replica,
the success rule and any extra objects. Everything else is the engine's.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from trainop.api import Job, KindInfo
from trainop.api.resolved import resolve
from trainop.api.resources import Resource
from trainop.api.types import Defaulted, JobSpec
from trainop.engine.config import EngineConfig
from trainop.engine.observed import Observed
from trainop.engine.wording import Wording

POD_IP = "status.podIP"


@dataclass(frozen=True)
class FieldRef:
    """A variable whose value the kubelet takes from the pod's own fields (`valueFrom`),
    e.g. FieldRef(POD_IP); the local runtime fills in its own."""

    path: str


Env = Mapping[str, "str | FieldRef"]
"""A replica's variables, in the order they are written."""


class Addressing(Protocol):
    """Where replica `index` of type `rtype` of `job` can be reached."""

    def host(self, job: Defaulted, rtype: str, index: int, *, qualified: bool = True) -> str:
        """The replica's host name (qualified: with namespace and `.svc` in a cluster)."""
        ...

    def port(self, job: Defaulted, rtype: str, index: int, name: str | None = None) -> int:
        """The replica's port of that name (default: the kind's default port)."""
        ...

    def pod_host(self, pod: str) -> str:
        """The host a launcher names to start processes in pod `pod` by the pod's name
        (kubectl exec): the name itself in a cluster, 127.0.0.1 on one machine."""
        ...


class PlanAddressing:
    """A runtime's Addressing for the length of one plan, with that plan's memo: what every
    replica's environment repeats (TF_CONFIG's cluster) is built once per plan, and goes
    with it (frameworks.common.per_job). No state outlives the reconcile."""

    def __init__(self, inner: Addressing):
        self.inner = inner
        self.memo: dict[str, Any] = {}

    def host(self, job: Defaulted, rtype: str, index: int, *, qualified: bool = True) -> str:
        return self.inner.host(job, rtype, index, qualified=qualified)

    def port(self, job: Defaulted, rtype: str, index: int, name: str | None = None) -> int:
        return self.inner.port(job, rtype, index, name)

    def pod_host(self, pod: str) -> str:
        return self.inner.pod_host(pod)


@dataclass(frozen=True)
class Counts:
    """The pods of one replica type, by state."""

    replicas: int
    active: int = 0
    succeeded: int = 0
    failed: int = 0
    succeeded_indexes: frozenset[int] = frozenset()


S = TypeVar("S", bound=JobSpec)


def spec_of(job: Defaulted, spec_type: type[S]) -> S:
    """The job's spec as `spec_type` (the kind's own spec class)."""
    spec = job.spec
    if not isinstance(spec, spec_type):
        raise TypeError(f"a {job.kind} was handed to the {spec_type.__name__} plugin")
    return spec


class Launcher(ABC):
    """What a kind whose launcher starts the work in the other replicas needs besides pods
    (MPI: mpirun reaches the workers by kubectl exec or ssh): the objects that takes, and
    when the launcher may start. A kind without one has `Framework.launcher` None."""

    started: tuple[str, ...] = ()
    """Replica types whose work the launcher starts itself (MPI workers sleep, or run sshd,
    until mpirun starts the ranks in them): the local runtime runs no process for them."""
    grants: tuple[Resource, ...] = ()
    """The objects that give the launcher rights by pod name (MPI's Role and RoleBinding),
    of kinds the plugin owns: deleted once the job has finished, so that no name the job
    no longer holds stays granted."""

    @abstractmethod
    def objects(self, job: Defaulted, observed: Observed, addr: Addressing) -> list[dict[str, Any]]:
        """The objects the launcher needs (ConfigMaps, Secrets, RBAC), desired now."""

    def may_create(self, job: Defaulted, rtype: str, observed: Observed) -> bool:
        """Whether pods of `rtype` may be created yet (a launcher may wait for workers)."""
        return True

    def wants_ssh_key(self, job: Defaulted, observed: Observed) -> bool:
        """Whether the runtime should offer a fresh key pair in `Observed.ssh_key`."""
        return False

    def batch_job(self, job: Defaulted) -> str | None:
        """The replica type whose one replica a batch/v1 Job makes for `job`, under the
        job's backoffLimit, deadline and TTL (engine/batchjob.py), or None: every replica
        is a pod of the engine's own."""
        return None

    def stops_on_finish(self, job: Defaulted) -> tuple[str, ...]:
        """Replica types whose running pods are deleted when the job ends, whatever the
        cleanPodPolicy (workers that would otherwise run sshd forever)."""
        return ()


def batch_type(fw: Framework[Any], job: Defaulted, config: EngineConfig) -> str | None:
    """The replica type of `job` a batch/v1 Job makes here (Launcher.batch_job), or None:
    none, or a runtime without Job controllers (EngineConfig.batch_jobs)."""
    if fw.launcher is None or not config.batch_jobs:
        return None
    return fw.launcher.batch_job(job)


def started_by_launcher(fw: Framework[Any], rtype: str) -> bool:
    """Whether the work of `rtype`'s replicas is started by the kind's launcher."""
    return fw.launcher is not None and rtype in fw.launcher.started


class Framework(ABC, Generic[S]):
    """Base plugin. Required: `model` (the kind's job model, which carries its facts),
    `spec_type` and the success rule (`succeeded`); the rest has the defaults most kinds
    share: the replicas' environment, how their pods are shaped, upstream's wording
    (`wording`) and, for a kind with a launcher, the `launcher` capability. `S` is the
    kind's spec class: `self.spec(job)` gives the job's spec as that type."""

    model: type[Job]
    spec_type: type[S]
    pod_services: bool = True
    """One headless service per pod, exposing the main container's named ports."""
    tells_exit_codes: bool = True
    """Whether each ended pod's exit code is told as an ExitedWithCode event (upstream's
    common pod reconciler, pkg/controller.v1/common/pod.go:343-346; MPI has its own)."""
    owned: tuple[Resource, ...] = ()
    """The resources of the objects, besides pods, services and PodGroups, that jobs of
    this kind make (ConfigMap, Secret, HorizontalPodAutoscaler): the one statement of it,
    which the cluster runtime's caches and the shipped RBAC follow (a test checks every
    object a plan makes against it)."""
    wording: Wording = Wording()
    """Upstream's texts for the kind's conditions and events."""
    launcher: Launcher | None = None
    """The optional capability of a kind whose launcher starts the work of the others."""

    @property
    def info(self) -> KindInfo:
        """The kind's facts (its model's)."""
        return self.model.info

    def spec(self, job: Defaulted) -> S:
        return spec_of(job, self.spec_type)

    def env(self, job: Defaulted, rtype: str, index: int, addr: Addressing) -> Env:
        """Environment of the main container of one replica (`env_containers`: or all)."""
        return {}

    def env_containers(self, job: Defaulted) -> str | None:
        """Which containers get the environment: None for all, else the main one's name."""
        return job.main_container

    def decorate_pod(self, job: Defaulted, rtype: str, index: int, pod: dict[str, Any],
                     addr: Addressing, config: EngineConfig) -> None:
        """Change a desired pod in place beyond its environment (volumes, hostname, init
        containers whose images the runtime's flags name)."""
        return None

    def names_looked_up_once(self, job: Defaulted, rtype: str, index: int, addr: Addressing
                             ) -> list[str]:
        """Peer names the replica looks up once as it starts, failing if cluster DNS does
        not have them yet; with --wait-for-dns the pod waits for them first."""
        return []

    @abstractmethod
    def succeeded(self, job: Defaulted, counts: dict[str, Counts]) -> bool:
        """The kind's success rule over the counts of each replica type."""

    def tolerates_failure(self, job: Defaulted, rtype: str) -> bool:
        """Whether a pod of `rtype` may fail for good without failing the job."""
        return False

    def running(self, job: Defaulted, counts: dict[str, Counts]) -> bool:
        """Whether the job is Running: a pod of the lead type runs."""
        lead = counts.get(resolve(job).leader)
        return lead is not None and lead.active > 0
