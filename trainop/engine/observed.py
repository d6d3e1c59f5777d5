"""What a runtime observed of a job: slim records of its pods and other owned objects."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, NamedTuple


class Phase(enum.StrEnum):
    """A pod's phase, as the kubelet reports it (equal to the API's strings)."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


LIVE_PHASES = frozenset({Phase.PENDING, Phase.RUNNING, Phase.UNKNOWN})
"""Phases of a pod that may still run (what cleanPodPolicy Running removes)."""


class Waiting(NamedTuple):
    """Why a pod that has not started waits, where that is a problem: an image that cannot
    be pulled, a missing ConfigMap, no node that fits, an init container crash-looping."""

    reason: str
    message: str
    """As `status.waitingReplicas` shows it: the scheduler's words, or `container NAME: ...`
    (`init container NAME: ...`)."""
    event_message: str
    """The Warning's words on the job, upstream's (pkg/core/job.go:35-78): `Error pod P
    condition message: M`, or `Error pod P container C waiting message: M`."""


@dataclass(frozen=True)
class PodState:
    """One pod of a job, as much as the engine needs to decide."""

    name: str
    replica_type: str
    """The replica type as spelled in the job (the label holds it in lower case)."""
    index: int
    phase: str = Phase.PENDING
    """A Phase (runtimes may pass the API's string: the two compare equal)."""
    terminating: bool = False
    """Deletion requested but the pod still exists: its slot is not free yet."""
    exit_code: int | None = None
    """The main container's exit code once it terminated."""
    reason: str | None = None
    """Why it ended: the container's reason (OOMKilled, Error) or the pod's (Evicted)."""
    restarts: int = 0
    """Container restarts in place (the kubelet's restartCount, summed)."""
    last_run: tuple[int, str | None] | None = None
    """The main container's last run when it restarted in place: exit code and reason."""
    ready: bool = False
    """Its Ready condition is True (readiness gates and probes passed)."""
    waiting: Waiting | None = None
    """Why a pod that has not started waits; None while it starts as it should."""
    created: str | None = None
    """When the pod was made (RFC 3339), for runPolicy.startupDeadlineSeconds."""
    exit_codes: tuple[tuple[str, int], ...] = ()
    """A failed pod's terminated containers' exit codes, containers then init containers,
    by name (for runPolicy.podFailurePolicy's onExitCodes)."""
    conditions: tuple[tuple[str, str], ...] = ()
    """A failed pod's conditions as (type, status) (for onPodConditions: DisruptionTarget)."""
    node: str | None = None
    ended: Ended | None = None
    """A failed pod's container that failed (the main one where it did), as it ended."""
    in_place: InPlace | None = None
    """What a pod made to restart in place says of its attempts (engine/inplace.py); its
    phase is then its main container's end, where that ended and the pod lives on."""


@dataclass(frozen=True)
class InPlace:
    """A pod made to restart in place: what it was told (its annotations) and what its
    barrier and agent say (engine/inplace.py)."""

    attempt: int
    released: int
    finish: bool = False
    alive: bool = True
    """The pod can still restart in place: it has not ended, and neither has its agent."""
    held: bool = False
    """Its barrier runs, and none of its other containers does."""
    kept_rules: bool = True
    """The API server kept the agent's restartPolicyRules (it drops them where its feature
    gate is off: then nothing restarts in place)."""
    agent_runs: bool = False
    """Its agent runs (it has not acted on a newer attempt, or on `finish`, yet)."""
    told_at: str | None = None
    """When the manager last told it something (its annotation; None: never since made)."""
    told_again: int = 0
    """How many times it was told again what it was last told."""
    heard: bool = False
    """Its rank supervisor is heard by the manager (engine/supervised.py's overlay): what
    it was told, it was told on the channel, and its annotations may lag (`written`)."""
    written: Told | None = None
    """What its annotations say, where a heard supervisor's word is laid over them."""


@dataclass(frozen=True)
class Told:
    """The job's attempts as a pod is told them (engine/inplace.py's annotations; the
    rank supervisor's channel, engine/supervised.py)."""

    attempt: int
    released: int
    finish: bool = False


@dataclass(frozen=True)
class RankEnd:
    """How a rank's process ended, as its supervisor says: its exit code (128+N for
    signal N), when, and why where it knows."""

    code: int
    signal: int | None
    at: str
    reason: str | None = None
    """OOMKilled where the kernel's OOM killer ended it (as a container runtime says of a
    container); None otherwise."""


@dataclass(frozen=True)
class RankState:
    """Where a pod's rank is, as its supervisor says (supervisor/channel.go): `phase`
    (running, stopping, exited, held) of `attempt`, what it was told, and how its last
    process ended; `seq` grows with every change."""

    pod: str
    seq: int
    phase: str
    attempt: int
    told: Told
    last: RankEnd | None
    report: Reported | None = None
    """Its rank's latest progress report, where it is the job's lead (engine/progress.py)."""


@dataclass(frozen=True)
class Ended:
    """How a container ended: for status.lastFailure."""

    container: str
    finished_at: str | None = None
    message: str | None = None


@dataclass(frozen=True)
class BatchJob:
    """What a batch/v1 Job that makes one of the job's replicas says (mpi-operator's
    launcher Job): its status, and its pods' that the engine reads."""

    suspended: bool = False
    started: bool = False
    """status.startTime is set: it ran since it was made or last resumed."""
    finished: str | None = None
    """"Complete" or "Failed", once that condition is True."""
    reason: str | None = None
    message: str | None = None
    """The Failed condition's."""
    completion_time: str | None = None
    failed: int = 0
    """status.failed: its pods that failed."""
    running: int = 0
    """Its pods that run (phase Running, not being deleted)."""
    last_failed: tuple[str, str] | None = None
    """Its newest failed pod's status.reason and status.message (either may be empty)."""


@dataclass(frozen=True)
class OwnedObject:
    """Any other object the job owns: Service, ConfigMap, Secret, PodGroup, HPA, Job."""

    kind: str
    name: str
    phase: str | None = None
    """A PodGroup's status.phase."""
    content: str | None = None
    """A digest of what the engine compares to decide on an update (objects.content_of: a
    ConfigMap's data, a Role's rules, whether a Job is suspended); None: never updated."""
    job: BatchJob | None = None
    """A Job's status (kind Job only)."""


@dataclass(frozen=True)
class Held:
    """An object under a name one of the job's replicas needs, not the job's own: one
    another kubeflow.org/v1 job controls (the runtime finds it by name in its caches), or
    one the API server named when a create was refused (anyone's, e.g. a bare pod kept by
    its finalizer)."""

    kind: str
    name: str
    deleting: bool
    owner_kind: str | None
    owner_name: str | None
    look_again: float = 1.0
    """Seconds until the runtime looks at it again: a second for what its caches hold (a
    look costs no request); longer, doubling to a cap, for what only a request can see."""

    def described(self) -> str:
        """`Pod x-worker-0 of TFJob x`, or `Pod x-worker-0` where no controller owns it."""
        if self.owner_kind is None:
            return f"{self.kind} {self.name}"
        return f"{self.kind} {self.name} of {self.owner_kind} {self.owner_name}"

    def going(self, job_kind: str, job_name: str) -> bool:
        """Whether it will go by itself: it is being deleted, or it was a job of this kind
        and name that is gone (the garbage collector deletes what the old one owned: the
        job was deleted and applied again)."""
        return self.deleting or (self.owner_kind == job_kind and self.owner_name == job_name)


@dataclass(frozen=True)
class NodeState:
    """A node one of the job's pods is on that does not report Ready (engine/lostnode.py),
    or that is gone."""

    name: str
    ready: str
    """Its Ready condition's status, "False" or "Unknown"; "" where the Node is gone."""
    since: str | None = None
    """When that condition last changed (RFC 3339)."""
    out_of_service: bool = False
    """It carries the taint node.kubernetes.io/out-of-service: someone who knows said it is
    down (Kubernetes' non-graceful node shutdown)."""


@dataclass(frozen=True)
class SSHKeyPair:
    """Key material for MPI jobs, made by the runtime (the engine makes nothing random)."""

    private_key: str
    public_key: str


@dataclass(frozen=True)
class Reported:
    """What a runtime heard of a pod's progress report (engine/progress.py): the JSON it
    read, or why it read none."""

    pod: str
    doc: Any = None
    problem: str | None = None
    """Why no report could be read (too large, not JSON): the runtime's words."""


@dataclass(frozen=True)
class Observed:
    pods: tuple[PodState, ...] = ()
    objects: tuple[OwnedObject, ...] = ()
    ssh_key: SSHKeyPair | None = None
    """Offered by the runtime when an MPI job's Secret does not exist yet."""
    supervisor_key: str | None = None
    """Offered by the runtime when the key Secret of a job whose ranks run under the
    supervisor does not exist yet (engine/supervised.py)."""
    exited: tuple[tuple[str, int], ...] = ()
    """(pod, exit code) of the kind's default container, for pods seen to end since the
    job's last reconcile (the runtime keeps them until a plan was applied)."""
    held: tuple[Held, ...] = ()
    """Names of the job's pods and services that objects of other jobs hold."""
    lost_nodes: tuple[NodeState, ...] = ()
    """The nodes of the job's pods that do not report Ready, or are gone (watched with
    --lost-node-grace)."""
    reclaimed: tuple[tuple[str, int], ...] = ()
    """(pod set, count) of the replicas the job's Workload gave back to Kueue as done
    (reclaimablePods; a pod set is a replica type in lower case): that many of the type
    never run again (engine/objects.py)."""
    reports: tuple[Reported, ...] = ()
    """The latest progress report heard of each pod that reports (engine/progress.py)."""
    progress_ca: str | None = None
    """The CA bundle of the manager's progress server (--progress-server), offered by the
    runtime for the job's ConfigMap of it (engine/progress_server.py)."""

    def live_pods(self) -> list[PodState]:
        """Its pods not being deleted."""
        return [p for p in self.pods if not p.terminating]

    def object(self, kind: str, name: str) -> OwnedObject | None:
        for obj in self.objects:
            if obj.kind == kind and obj.name == name:
                return obj
        return None
