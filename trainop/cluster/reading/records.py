"""Slim records: what the caches keep of each object (no managedFields, no pod specs)."""

from __future__ import annotations

import ipaddress
import sys
from dataclasses import dataclass
from typing import Any

import orjson

from trainop.api import Job
from trainop.api.conversion import WRITTEN_IN
from trainop.api.kinds import GROUP, OTHER_VERSIONS, VERSION
from trainop.api.numbers import whole_number
from trainop.api.resources import JOBS
from trainop.engine import clock, inplace, lostnode, supervised
from trainop.engine.batchjob import COMPLETE, FAILED
from trainop.engine.labels import replica_of, replica_type_of
from trainop.engine.objects import content_of
from trainop.engine.observed import BatchJob, Ended, InPlace, NodeState, PodState, Waiting
from trainop.engine.queueing import prebuilt_in


@dataclass(slots=True)
class Meta:
    namespace: str
    name: str
    uid: str
    resource_version: str
    owner_uid: str | None
    owner_kind: str | None
    owner_name: str | None
    owner_api_version: str | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def owner_key(self) -> str | None:
        """The controller owner as `namespace/kind/uid`: what the owned-object indexes key by.
        An owner reference names an object of the same namespace, so a pod of namespace B
        that names the UID of a job of namespace A is owned by nothing of ours."""
        if not self.owner_uid or not (self.replica_owner or self.job_owner):
            return None
        return owner_key(self.namespace, str(self.owner_kind), self.owner_uid)

    @property
    def job_owner(self) -> bool:
        """Whether the controller reference names a job, at any version its kind is served
        at (a v2beta1 MPIJob's objects name it at v2beta1, mpi-operator's and trainop's alike)."""
        group, _, version = (self.owner_api_version or "").partition("/")
        return group == GROUP and (version == VERSION or version in OTHER_VERSIONS.get(
            str(self.owner_kind), {}))

    @property
    def replica_owner(self) -> bool:
        """Whether the controller is what makes a job's replica (a launcher Job): its pods
        are kept under it, which the job owns (engine/batchjob.py)."""
        return (self.owner_api_version, self.owner_kind) == (JOBS.api_version, JOBS.kind)


def owner_key(namespace: str, kind: str, uid: str) -> str:
    return f"{namespace}/{kind}/{uid}"


def meta_of(obj: dict[str, Any]) -> Meta:
    m = obj.get("metadata") or {}
    owner = next((o for o in m.get("ownerReferences") or [] if o.get("controller")), None)
    return Meta(m.get("namespace", ""), m.get("name", ""), m.get("uid", ""),
                m.get("resourceVersion", ""),
                owner.get("uid") if owner else None, owner.get("kind") if owner else None,
                owner.get("name") if owner else None,
                owner.get("apiVersion") if owner else None)


@dataclass(slots=True, frozen=True)
class FailureFacts:
    exit_codes: tuple[tuple[str, int], ...]
    """Terminated containers' exit codes, containers then init containers (as
    runPolicy.podFailurePolicy reads them)."""
    conditions: tuple[tuple[str, str], ...]
    """The pod's conditions as (type, status)."""
    ended: tuple[Ended, ...]
    """The containers that ended with a code other than 0, as they ended."""
    pod_reason: str = ""
    pod_message: str = ""
    """The pod's own status.reason and status.message (an eviction's, say)."""
    created: str = ""
    """Its creationTimestamp: which of a Job's failed pods is the newest."""


@dataclass(slots=True)
class PodRecord:
    meta: Meta
    replica_type: str  # lower case, as in the label
    index: int
    phase: str
    terminating: bool
    restarts: int
    ready: bool
    reason: str | None
    exit_codes: dict[str, int] | None
    """Terminated containers' exit codes by container name (None when none ended)."""
    last_runs: dict[str, tuple[int, str | None]] | None = None
    """Containers restarted in place (OnFailure): the exit code and reason of their last
    run, by name (None when none restarted)."""
    waiting: Waiting | None = None
    """Why a pending pod is not starting, where that is a problem (waiting_cause)."""
    created: str | None = None
    failure: FailureFacts | None = None
    """What a failed pod tells of its end (of its last run, for one that failed in place);
    None for any other pod."""
    node: str | None = None
    in_place: InPlace | None = None
    """A pod made to restart in place: its attempts and its agent (in_place_of)."""
    channel: str | None = None
    """Where its rank supervisor serves the manager's channel (host:port), for a pod that
    restarts in place under one and has its IP (channel_of)."""

    def exit_code(self, main: str) -> int | None:
        if not self.exit_codes:
            return None
        if main in self.exit_codes:
            return self.exit_codes[main]
        return next(iter(self.exit_codes.values()))

    def replica_phase(self, main: str) -> str:
        """The replica's phase: the pod's, or, for a pod that restarts in place and lives
        on, its main container's end (Succeeded, Failed) where that ended, and Pending while
        one of its containers waits for a reason other than being on its way."""
        if self.in_place is None or not self.in_place.alive:
            return self.phase
        if self.exit_codes and (code := self.exit_codes.get(main)) is not None:
            return "Succeeded" if code == 0 else "Failed"
        return "Pending" if self.waiting is not None else self.phase

    def last_run(self, main: str) -> tuple[int, str | None] | None:
        if not self.last_runs:
            return None
        return self.last_runs.get(main) or next(iter(self.last_runs.values()))

    def state(self, job: Job) -> PodState:
        """The pod as the engine observes it, for `job` (its replica type by the job's
        spelling, what its main container did)."""
        main = job.main_container
        f = self.failure
        return PodState(
            self.meta.name, replica_type_of(job, self.replica_type) or self.replica_type,
            self.index, phase=self.replica_phase(main), terminating=self.terminating,
            exit_code=self.exit_code(main), reason=self.reason, restarts=self.restarts,
            ready=self.ready, last_run=self.last_run(main), waiting=self.waiting,
            created=self.created, node=self.node,
            exit_codes=f.exit_codes if f else (), conditions=f.conditions if f else (),
            ended=_main_first(f.ended, main) if f else None, in_place=self.in_place)


def _main_first(ended: tuple[Ended, ...], main: str | None) -> Ended | None:
    """The main container's end where it failed, else the first container's that did."""
    return next((e for e in ended if e.container == main), ended[0] if ended else None)


def pod_record(obj: dict[str, Any]) -> PodRecord | None:
    """None for a pod without trainop's replica labels (not one of ours to count)."""
    meta = meta_of(obj)
    replica = replica_of((obj.get("metadata") or {}).get("labels") or {}, meta.name)
    if replica is None:
        return None
    rtype, index = replica
    status = obj.get("status") or {}
    restarts, reason = 0, status.get("reason")
    codes: dict[str, int] = {}
    last: dict[str, tuple[int, str | None]] = {}
    statuses = status.get("containerStatuses") or []
    for cs in statuses:
        if cs.get("name") == inplace.AGENT:
            continue  # trainop's own (engine/inplace.py): its end is not the job's
        restarts += int(cs.get("restartCount") or 0)
        state = cs.get("state") or {}
        term = state.get("terminated")
        before = (cs.get("lastState") or {}).get("terminated")
        if term is None and status.get("phase") == "Failed":
            # A failed pod whose container was waiting to restart: its last exit counts.
            term = before
        if term and term.get("exitCode") is not None:
            codes[cs.get("name", "")] = int(term["exitCode"])
            reason = reason or term.get("reason")
        # the latest run that ended: the current one where it has just ended (a kubelet
        # restarting in place reports that a moment before the restart), else the last
        latest = term if term and term.get("exitCode") is not None else before
        if latest and latest.get("exitCode") is not None:
            last[cs.get("name", "")] = (int(latest["exitCode"]), latest.get("reason"))
    phase = status.get("phase") or "Pending"
    in_place = in_place_of(obj)
    # a pod that restarts in place lives on when its main container failed (its agent
    # keeps it): what a failed pod tells of its end is read then too
    failed = phase == "Failed" or (in_place is not None and in_place.alive and any(
        codes.values()))
    return PodRecord(
        meta=meta, replica_type=rtype, index=index,
        phase=phase,
        terminating=bool((obj.get("metadata") or {}).get("deletionTimestamp")),
        restarts=restarts, reason=reason,
        # the pod's Ready condition, as Kubernetes (and mpi-operator's isPodReady) reads
        # readiness: its readiness gates and probes, not its containers' statuses alone
        ready=any(c.get("type") == "Ready" and c.get("status") == "True"
                  for c in status.get("conditions") or [] if isinstance(c, dict)),
        exit_codes=codes or None, last_runs=last or None,
        # (a pod that restarts in place runs on while its own containers wait to start
        # again: an image that cannot be pulled any more is told as for a new pod)
        waiting=waiting_cause(meta.name, status)
        if phase == "Pending" or (in_place is not None and in_place.alive) else None,
        # (for runPolicy.startupDeadlineSeconds; a pod that started never needs it again)
        # (pending again, held for an attempt in place, it is no longer starting)
        created=(obj.get("metadata") or {}).get("creationTimestamp")
        if phase == "Pending" and not (in_place and restarts) else None,
        failure=_failure(obj, codes) if failed else None,
        node=sys.intern(node) if (node := (obj.get("spec") or {}).get("nodeName")) else None,
        in_place=in_place,
        channel=channel_of(obj) if in_place is not None else None,
    )


def channel_of(obj: dict[str, Any]) -> str | None:
    """Where the pod's rank supervisor serves its channel: the pod's IP, read strictly
    (the manager dials it), and the supervisor's port; None for a pod with no supervisor
    or no IP yet."""
    containers = (obj.get("spec") or {}).get("containers") or []
    if not any(isinstance(c, dict) and (c.get("command") or [None])[0] == supervised.BINARY
               for c in containers):
        return None
    ip = (obj.get("status") or {}).get("podIP")
    try:
        address = ipaddress.ip_address(ip) if type(ip) is str else None
    except ValueError:
        return None
    if address is None:
        return None
    host = f"[{address}]" if address.version == 6 else str(address)
    return f"{host}:{supervised.PORT}"


def in_place_of(obj: dict[str, Any]) -> InPlace | None:
    """What a pod made to restart in place (engine/inplace.py) says: the attempts its
    annotations tell, and its barrier's and agent's state (None for any other pod)."""
    notes = (obj.get("metadata") or {}).get("annotations") or {}
    told = inplace.told_in(notes)
    if told is None:
        return None
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    agent_spec = next((c for c in spec.get("containers") or []
                       if isinstance(c, dict) and c.get("name") == inplace.AGENT), {})
    statuses = status.get("containerStatuses") or []
    agent: dict[str, Any] = next((cs for cs in statuses if cs.get("name") == inplace.AGENT),
                                 {})
    barrier: dict[str, Any] = next((cs for cs in status.get("initContainerStatuses") or []
                                    if cs.get("name") == inplace.BARRIER), {})
    # an agent that stopped its pod for a newer attempt is shown ended (code 88) until the
    # kubelet, restarting every container, starts it again: the pod lives on
    ended = (agent.get("state") or {}).get("terminated")
    return InPlace(
        told.attempt, told.released, finish=told.finish,
        alive=status.get("phase") in ("Pending", "Running", None) and
        (ended is None or ended.get("exitCode") == inplace.STOP_EXIT),
        held="running" in (barrier.get("state") or {}) and
        not any("running" in (cs.get("state") or {}) for cs in statuses),
        kept_rules=bool(agent_spec.get("restartPolicyRules")),
        agent_runs="running" in (agent.get("state") or {}),
        told_at=told_at if clock.parsed(told_at := notes.get(inplace.TOLD_AT)) else None,
        told_again=whole_number(notes.get(inplace.TOLD_AGAIN), inplace.MOST_ATTEMPTS) or 0)


TRAINOPS = frozenset({inplace.BARRIER, inplace.AGENT, supervised.INSTALL})
"""The containers trainop adds to a pod that restarts in place (engine/inplace.py,
engine/supervised.py)."""


def _failure(obj: dict[str, Any], codes: dict[str, int]) -> FailureFacts:
    status = obj.get("status") or {}
    ended = []
    init = []
    for key in ("containerStatuses", "initContainerStatuses"):
        for cs in status.get(key) or []:
            if cs.get("name") in TRAINOPS:
                continue  # trainop's own: their ends are not the job's
            term = (cs.get("state") or {}).get("terminated")
            if not term or term.get("exitCode") is None:
                continue
            name = cs.get("name", "")
            if key == "initContainerStatuses":
                init.append((name, int(term["exitCode"])))
            if term["exitCode"] != 0:
                ended.append(Ended(name, term.get("finishedAt"), term.get("message")))
    conditions = tuple((str(c.get("type")), str(c.get("status")))
                       for c in status.get("conditions") or [] if c.get("type"))
    return FailureFacts((*codes.items(), *init), conditions, tuple(ended),
                        str(status.get("reason") or ""), str(status.get("message") or ""),
                        str((obj.get("metadata") or {}).get("creationTimestamp") or ""))


STARTING = frozenset({"ContainerCreating", "PodInitializing"})
"""Waiting reasons of a container that is on its way: every other one is a problem."""


def waiting_cause(pod: str, status: dict[str, Any]) -> Waiting | None:
    """Why pending pod `pod` does not start: no node fits it (the scheduler's
    Unschedulable), or a container, init containers first, waits for a reason other than
    being on its way (ErrImagePull, CreateContainerConfigError, an init container's
    CrashLoopBackOff)."""
    for c in status.get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason"):
            message = str(c.get("message") or c["reason"])
            return Waiting(str(c["reason"]), message,
                           f"Error pod {pod} condition message: {message}")
    for key, what in (("initContainerStatuses", "init container"),
                      ("containerStatuses", "container")):
        for cs in status.get(key) or []:
            w = (cs.get("state") or {}).get("waiting") or {}
            reason = w.get("reason")
            if reason and reason not in STARTING:
                name, message = cs.get("name", ""), str(w.get("message") or reason)
                return Waiting(str(reason), f"{what} {name}: {message}",
                               f"Error pod {pod} container {name} waiting message: {message}")
    return None


@dataclass(slots=True, frozen=True)
class NodeRecord:
    """What the lost-node rules read of a Node (engine/lostnode.py)."""

    name: str
    ready: str | None
    """Its Ready condition's status ("True", "False", "Unknown"; None where it has none
    yet: a node registering, which nothing is scheduled to)."""
    since: str | None
    out_of_service: bool

    def lost(self) -> NodeState | None:
        """The node as the engine is told it, where it reports not Ready."""
        if self.ready in ("True", None):
            return None
        return NodeState(self.name, str(self.ready), self.since, self.out_of_service)


def node_record(obj: dict[str, Any]) -> NodeRecord:
    status = obj.get("status") or {}
    ready: dict[str, Any] = next(
        (c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})
    return NodeRecord(
        obj["metadata"]["name"], ready.get("status"),
        ready.get("lastTransitionTime"),
        any(t.get("key") == lostnode.OUT_OF_SERVICE
            for t in (obj.get("spec") or {}).get("taints") or []))


@dataclass(slots=True)
class ObjectRecord:
    meta: Meta
    kind: str
    phase: str | None = None
    content: str | None = None
    job: BatchJob | None = None
    """A Job's status (its pods' part is read from the pods' cache)."""


def object_record(kind: str, obj: dict[str, Any]) -> ObjectRecord:
    phase = (obj.get("status") or {}).get("phase") if kind == "PodGroup" else None
    job = batch_job(obj) if kind == "Job" else None
    return ObjectRecord(meta_of(obj), kind, phase, content_of(kind, obj), job)


def batch_job(obj: dict[str, Any]) -> BatchJob:
    """What the engine reads of a batch/v1 Job's spec and status."""
    status = obj.get("status") or {}
    ended = next((c for c in status.get("conditions") or []
                  if c.get("type") in (COMPLETE, FAILED) and c.get("status") == "True"), None)
    return BatchJob(
        suspended=bool((obj.get("spec") or {}).get("suspend")),
        started=bool(status.get("startTime")),
        finished=ended["type"] if ended else None,
        reason=ended.get("reason") if ended and ended["type"] == FAILED else None,
        message=ended.get("message") if ended and ended["type"] == FAILED else None,
        completion_time=status.get("completionTime"),
        failed=int(status.get("failed") or 0))


@dataclass(slots=True)
class JobRecord:
    """A job as the cache keeps it: its identity and status decoded, the rest as compact
    JSON. Decoded, a job takes about five times its JSON (a 1.3 MiB job with a long env
    list: 6.5 MiB of dicts); it is decoded only when a reconcile parses it."""

    meta: Meta
    api_version: str
    kind: str
    status: dict[str, Any]
    raw: bytes
    prebuilt: str | None = None
    """The Workload made for it beforehand that it names (MultiKueue's copy on a worker
    cluster), or None."""
    written_in: str | None = None
    """The version of its kind it was written in, where that is not v1 (its events are
    told as that version's operator tells them)."""

    @property
    def key(self) -> str:
        return self.meta.key

    def object(self) -> dict[str, Any]:
        """The whole job, as the API server sent it (less managedFields)."""
        return dict(orjson.loads(self.raw))

    def head(self) -> dict[str, Any]:
        """What writes of status and events need: identity, version and status."""
        m = self.meta
        meta: dict[str, Any] = {"name": m.name, "namespace": m.namespace, "uid": m.uid,
                                "resourceVersion": m.resource_version}
        if self.written_in is not None:
            meta["annotations"] = {WRITTEN_IN: self.written_in}
        return {"apiVersion": self.api_version, "kind": self.kind, "metadata": meta,
                "status": self.status}


def job_record(obj: dict[str, Any]) -> JobRecord:
    """The cache's record of a job, less the server's field bookkeeping."""
    meta = obj.get("metadata") or {}
    if "managedFields" in meta:
        obj = {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
    status = obj.get("status")
    prebuilt = prebuilt_in(meta.get("labels"), meta.get("annotations"))
    written = (meta.get("annotations") or {}).get(WRITTEN_IN)
    kind = str(obj.get("kind", ""))
    return JobRecord(meta_of(obj), str(obj.get("apiVersion", "")), kind,
                     status if isinstance(status, dict) else {}, orjson.dumps(obj), prebuilt,
                     written if written in OTHER_VERSIONS.get(kind, {}) else None)
