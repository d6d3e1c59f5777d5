"""The objects a running job should have, against what is observed: what to create, to
bring up to date, and to remove after a scale-down. Pure; the lifecycle puts the answers
into its plan."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from trainop.api import Job
from trainop.api.resolved import resolve
from trainop.api.templates import containers
from trainop.engine import elastic, gang
from trainop.engine.config import EngineConfig
from trainop.engine.framework import Addressing, Framework
from trainop.engine.labels import replica_name
from trainop.engine.observed import Observed, PodState
from trainop.engine.pods import desired_pod, desired_service


@dataclass
class Missing:
    prerequisites: list[dict[str, Any]] = field(default_factory=list)
    """What pods need first (the framework's extra objects, the HPA, the PodGroup)."""
    update: list[dict[str, Any]] = field(default_factory=list)
    """Existing objects whose content the engine keeps current (an MPI hostfile)."""
    replicas: list[dict[str, Any]] = field(default_factory=list)
    """Missing pods and their services."""
    pods: list[tuple[str, str]] = field(default_factory=list)
    """The replica type and name of each pod among `replicas`."""
    services: list[str] = field(default_factory=list)
    """Names of the services among `replicas`."""
    held: bool = False
    """Pods wait for the gang scheduler to admit the PodGroup."""
    more: bool = False
    """Replicas are still missing past what one plan holds (PLAN_OBJECTS, PLAN_BYTES)."""


PLAN_OBJECTS = 500
"""Pods and services one plan makes at most; the next plan, once the cache shows these,
makes the next ones. A job of 10,000 replicas costs the manager one batch at a time."""
PLAN_BYTES = 32 * 2**20
"""Bytes of environment one plan's pods hold at most: TF_CONFIG names every replica, so
10,000 workers give each pod a 311 KiB variable (3 GiB for all at once)."""
OBJECT_BYTES = 2**10
"""What a pod or service costs besides its environment, as the budget counts."""


def _env_bytes(pod: dict[str, Any]) -> int:
    return sum(len(str(e.get("value") or "")) for c in containers(pod)
               for e in c.get("env") or [] if isinstance(e, dict))


def missing(job: Job, observed: Observed, fw: Framework[Any], addr: Addressing,
            config: EngineConfig) -> Missing:
    out = Missing()
    desired = fw.launcher.objects(job, observed, addr) if fw.launcher else []
    hpa = elastic.desired_hpa(job)
    if hpa is not None:
        desired.append(hpa)
    if config.gang_scheduler:
        desired.append(gang.desired_pod_group(job, config))
        out.held = gang.held(observed, job, config)
    for obj in desired:
        seen = observed.object(str(obj["kind"]), obj["metadata"]["name"])
        if seen is None:
            out.prerequisites.append(obj)
        elif seen.content is not None and content_of(obj["kind"], obj) != seen.content:
            out.update.append(obj)

    services = {o.name for o in observed.objects if o.kind == "Service"}
    slots = {(p.replica_type, p.index) for p in observed.pods}
    # a name an object that is going still holds: neither the pod nor its service is made
    # until it is free (the reconcile says why). One that stays is tried all the same: the
    # API server refuses it, and the applier reads the holder afresh before failing the job
    taken = {h.name for h in observed.held if h.going(job.kind, job.name)}
    spent = 0
    for rtype, n in resolve(job).replicas.items():
        may = not out.held and (fw.launcher is None
                                or fw.launcher.may_create(job, rtype, observed))
        for i in range(n):
            name = replica_name(job, rtype, i)
            if name in taken:
                continue
            wants_service = fw.pod_services and name not in services and not out.held
            wants_pod = may and (rtype, i) not in slots
            if not (wants_service or wants_pod):
                continue
            if len(out.replicas) >= PLAN_OBJECTS or spent >= PLAN_BYTES:
                out.more = True
                return out
            if wants_service:
                svc = desired_service(job, rtype, i)
                if svc is not None:
                    out.replicas.append(svc)
                    out.services.append(name)
                    spent += OBJECT_BYTES
            if wants_pod:
                pod = desired_pod(job, rtype, i, fw, addr, config)
                out.replicas.append(pod)
                out.pods.append((rtype, name))
                spent += OBJECT_BYTES + _env_bytes(pod)
    return out


def surplus(job: Job, observed: Observed, fw: Framework[Any]
            ) -> tuple[list[PodState], list[str]]:
    """Live pods, and names of services, past the replica counts or of a type no longer in
    the spec (a scale-down)."""
    resolved = resolve(job)
    pods = [p for p in observed.pods
            if not p.terminating and not resolved.in_spec(p.replica_type, p.index)]
    if not fw.pod_services:
        return pods, []
    wanted = {replica_name(job, rt, i) for rt, i in resolved.slots()}
    services = [o.name for o in observed.objects if o.kind == "Service" and o.name not in wanted]
    return pods, services


KEPT_CURRENT = {"ConfigMap": "data", "Role": "rules"}
"""Kind -> the field the engine keeps current in an object a job owns (MPI's hostfile and
discover_hosts.sh, its launcher Role's worker names); other objects are made once."""


def content_of(kind: str, obj: Mapping[str, Any]) -> str | None:
    """A digest of what of `obj` the engine compares and updates (OwnedObject.content);
    None for a kind it never updates (a Secret's keys are never kept). A digest, not the
    data: a ConfigMap a user's own job controls may hold a megabyte, and the cache keeps
    32 bytes of it."""
    field = KEPT_CURRENT.get(kind)
    if not field:
        return None
    return hashlib.sha256(orjson.dumps(obj.get(field), option=orjson.OPT_SORT_KEYS)).hexdigest()
