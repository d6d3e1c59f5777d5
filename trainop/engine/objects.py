"""The objects a running job should have, against what is observed: what to create, to
bring up to date, and to remove after a scale-down. Pure; the lifecycle puts the answers
into its plan."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from trainop.api.resolved import resolve
from trainop.api.resources import GANG_PODGROUPS, JOBS
from trainop.api.templates import containers
from trainop.api.types import Defaulted
from trainop.engine import (
    batchjob,
    elastic,
    gang,
    inplace,
    kubegang,
    progress,
    progress_server,
    supervised,
)
from trainop.engine.config import EngineConfig
from trainop.engine.framework import Addressing, Framework, batch_type
from trainop.engine.labels import replica_name
from trainop.engine.observed import LIVE_PHASES, Observed, PodState
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
"""Bytes of template and environment one plan's pods hold at most: TF_CONFIG names every
replica, so 10,000 workers give each pod a 311 KiB variable (3 GiB for all at once), and a
template may hold a megabyte of arguments or volumes, copied into each pod."""
OBJECT_BYTES = 2**10
"""What a pod or service costs besides its template and environment, as the budget
counts."""


def _env_bytes(pod: dict[str, Any]) -> int:
    return sum(len(str(e.get("value") or "")) for c in containers(pod)
               for e in c.get("env") or [] if isinstance(e, dict))


def _job_objects(job: Defaulted, observed: Observed, fw: Framework[Any], addr: Addressing,
                 config: EngineConfig, out: Missing) -> None:
    """The job's own objects (its launcher's, its HPA, its PodGroup) compared with those
    observed; whether the gang holds its pods back."""
    desired = fw.launcher.objects(job, observed, addr) if fw.launcher else []
    hpa = elastic.desired_hpa(job)
    if hpa is not None:
        desired.append(hpa)
    desired.extend(supervised.objects(job, observed, fw, config))
    desired.extend(progress_server.objects(job, observed, config))
    if config.gang_scheduler:
        desired.extend(gang.gang_of(job, config).objects(job, config))
        out.held = gang.gang_of(job, config).held(observed, job, config)
    _compare(desired, observed, out)


def missing(job: Defaulted, observed: Observed, fw: Framework[Any], addr: Addressing,
            config: EngineConfig) -> Missing:
    out = Missing()
    _job_objects(job, observed, fw, addr, config, out)
    batch = batch_type(fw, job, config)
    services = {o.name for o in observed.objects if o.kind == "Service"}
    slots = {(p.replica_type, p.index) for p in observed.pods}
    jobs = []
    # a name an object that is going still holds: neither the pod nor its service is made
    # until it is free (the reconcile says why). One that stays is tried all the same: the
    # API server refuses it, and the applier reads the holder afresh before failing the job
    taken = {h.name for h in observed.held if h.going(job.kind, job.name)}
    spent = 0
    live = [p for p in observed.pods if not p.terminating]
    # pods that restart in place are made for the job's attempt (engine/inplace.py)
    attempt = inplace.attempts(live) if inplace.applies(job, live, fw, config) else None
    reclaimed = dict(observed.reclaimed)
    lead = progress.lead_name(job)
    """The pod whose rank reports the job's progress (engine/progress.py)."""
    template_bytes: dict[str, int] = {}
    """Each replica type's template as JSON, measured once a pod of it is planned (a round
    that makes nothing measures nothing)."""
    for rtype, n in resolve(job).replicas.items():
        may = not out.held and (fw.launcher is None
                                or fw.launcher.may_create(job, rtype, observed))
        room = _room(rtype, n, reclaimed, observed.pods)
        for i in range(n):
            name = replica_name(job, rtype, i)
            if name in taken:
                continue
            if rtype == batch:
                jobs.extend(_batch_job(job, rtype, i, observed, fw, addr, config, out, may))
                continue
            wants_service = fw.pod_services and name not in services and not out.held
            wants_pod = may and (rtype, i) not in slots and (room is None or room > 0)
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
                room = None if room is None else room - 1
                pod = desired_pod(job, rtype, i, fw, addr, config)
                supervisor_reports = False
                if attempt is not None:
                    inplace.decorate(pod, config, attempt)
                    supervisor_reports = supervised.decorate(pod, job, attempt, config,
                                                             name == lead)
                if name == lead and not supervisor_reports:
                    progress_server.decorate(pod, job, observed, config)
                out.replicas.append(pod)
                out.pods.append((rtype, name))
                if rtype not in template_bytes:
                    template = job.spec.replica_specs[rtype].template
                    template_bytes[rtype] = len(orjson.dumps(template or {}))
                spent += OBJECT_BYTES + template_bytes[rtype] + _env_bytes(pod)
    out.replicas.extend(jobs)  # after the pods, as mpi-operator makes its launcher Job
    return out


def _room(rtype: str, n: int, reclaimed: dict[str, int], pods: tuple[PodState, ...]
          ) -> int | None:
    """How many more pods of `rtype` may run, where its Workload gave some back as done
    (None: no bound). A succeeded replica deleted (by its author, or with its node) would
    be made again and run on quota Kueue has lent to others: the quota's pods that run
    stay within `n` less those given back, whichever indexes they are (one being deleted
    runs until it is gone)."""
    done = reclaimed.get(rtype.lower(), 0)
    if not done:
        return None
    running = sum(1 for p in pods if p.replica_type == rtype and p.phase in LIVE_PHASES)
    return n - done - running


def _compare(desired: list[dict[str, Any]], observed: Observed, out: Missing) -> None:
    """Into `out`: what of `desired` is missing, and what is not up to date."""
    for obj in desired:
        seen = observed.object(str(obj["kind"]), obj["metadata"]["name"])
        if seen is None:
            out.prerequisites.append(obj)
        elif seen.content is not None and content_of(obj["kind"], obj) != seen.content:
            out.update.append(obj)


def kept_while_suspended(job: Defaulted, observed: Observed, fw: Framework[Any],
                         addr: Addressing, config: EngineConfig) -> Missing:
    """What a suspended job whose replica a Job makes still has made and kept current:
    the launcher's objects, and that Job, suspended (mpi-operator's syncHandler)."""
    out = Missing()
    batch = batch_type(fw, job, config)
    if fw.launcher is None or batch is None:
        return out
    _compare(fw.launcher.objects(job, observed, addr), observed, out)
    name = replica_name(job, batch, 0)
    if observed.object(JOBS.kind, name) is None:
        out.replicas.append(batchjob.desired(
            job, desired_pod(job, batch, 0, fw, addr, config), suspended=True))
    return out


def _batch_job(job: Defaulted, rtype: str, index: int, observed: Observed, fw: Framework[Any],
               addr: Addressing, config: EngineConfig, out: Missing, may: bool
               ) -> list[dict[str, Any]]:
    """The Job that makes replica (rtype, index) where it is missing and may be made;
    resumed where it is suspended."""
    name = replica_name(job, rtype, index)
    seen = observed.object(JOBS.kind, name)
    if seen is not None and (seen.job is None or not seen.job.suspended):
        return []
    if seen is None and not may:
        return []
    wanted = batchjob.desired(job, desired_pod(job, rtype, index, fw, addr, config), False)
    if seen is None:
        return [wanted]
    assert seen.job is not None
    out.update.append(batchjob.update(job, name, False, None if seen.job.started
                                      else wanted["spec"]["template"]))
    return []


def surplus(job: Defaulted, observed: Observed, fw: Framework[Any]
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


def _suspend(obj: Mapping[str, Any]) -> bool:
    # the API server stores a Job made without `suspend` as `suspend: false`
    return bool((obj.get("spec") or {}).get("suspend"))


GANG_FIELDS = ("minMember", "minResources", "priorityClassName", "scheduleTimeoutSeconds")
"""What of a PodGroup's spec follows the job's schedulingPolicy (upstream's SyncPodGroup
and mpi-operator's getOrCreatePodGroups write it again on every reconcile). The queue
stays the one it was made with, as upstream keeps it (job.go: pgSpecFill); what else the
gang scheduler writes there is its own."""


def _gang_spec(obj: Mapping[str, Any]) -> Any:
    if obj.get("apiVersion") == GANG_PODGROUPS.api_version:
        return kubegang.min_count_of(dict(obj))
    spec = obj.get("spec") or {}
    return {k: spec.get(k) for k in GANG_FIELDS}


KEPT_CURRENT: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "ConfigMap": lambda obj: obj.get("data"),
    "Role": lambda obj: obj.get("rules"),
    "Job": _suspend,
    "PodGroup": _gang_spec,
    "Workload": lambda obj: kubegang.min_count_of(dict(obj)),
}
"""Kind -> what of an object a job owns the engine keeps current (MPI's hostfile and
discover_hosts.sh, its launcher Role's worker names, whether its launcher Job is
suspended, a PodGroup's GANG_FIELDS, the minCount of Kubernetes' own gang); other objects
are made once."""

SCHEDULING = ("nodeSelector", "tolerations", "schedulingGates")
"""What of a suspended Job's pod template may change before it first runs (Kubernetes'
mutable scheduling directives), with the template's labels and annotations: a Job resumed
gets them from the job's template (mpi-operator's syncLauncherSchedulingDirectives: what
Kueue wrote there on admission)."""


def content_of(kind: str, obj: Mapping[str, Any]) -> str | None:
    """A digest of what of `obj` the engine compares and updates (OwnedObject.content);
    None for a kind it never updates (a Secret's keys are never kept). A digest, not the
    data: a ConfigMap a user's own job controls may hold a megabyte, and the cache keeps
    32 bytes of it."""
    kept = KEPT_CURRENT.get(kind)
    if kept is None:
        return None
    return hashlib.sha256(orjson.dumps(kept(obj), option=orjson.OPT_SORT_KEYS)).hexdigest()


def patch_of(obj: Mapping[str, Any]) -> dict[str, Any] | list[dict[str, Any]]:
    """The patch that brings an object up to date with desired `obj`: a merge patch of
    what KEPT_CURRENT names, a pod's annotations (the attempts engine/inplace.py tells
    it), and with a Job resumed, its template's labels, annotations and SCHEDULING where
    `obj` has a template (batchjob.update leaves it out for a Job that ran: Kubernetes
    refuses to change them then). A PodGroup's is a JSON patch (a list): its
    `minResources` is replaced whole, which a merge patch would merge key by key, and a
    field the job no longer sets is written null, which the API server prunes."""
    kind = obj["kind"]
    if kind == "Workload" or obj.get("apiVersion") == GANG_PODGROUPS.api_version:
        return kubegang.patch_of(dict(obj))
    if kind == "PodGroup":
        return [{"op": "add", "path": f"/spec/{k}", "value": v}
                for k, v in _gang_spec(obj).items()]
    if kind == "ConfigMap":
        return {"data": obj.get("data")}
    if kind == "Pod":  # what engine/inplace.py tells a pod: its annotations
        return {"metadata": {"annotations": obj["metadata"]["annotations"]}}
    if kind == "Role":
        return {"rules": obj.get("rules")}
    if kind != "Job":
        raise ValueError(f"the engine keeps nothing of a {kind} current")
    spec: dict[str, Any] = {"suspend": _suspend(obj)}
    template = obj["spec"].get("template")
    if template is not None and not spec["suspend"]:
        meta = {k: template["metadata"][k] for k in ("labels", "annotations")
                if template["metadata"].get(k)}
        pod = {k: template["spec"][k] for k in SCHEDULING if k in template["spec"]}
        spec["template"] = {"metadata": meta, "spec": pod}
    return {"spec": spec}
