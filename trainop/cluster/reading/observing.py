"""What the caches hold of a job, as the engine observes it: its own pods and objects,
the names other jobs' going objects hold, the nodes of its pods that are lost, and its
launcher Job's state with what that Job's pods say."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from trainop.api.resolved import resolve
from trainop.api.resources import JOBS
from trainop.api.types import Defaulted
from trainop.cluster.reading.caches import Caches
from trainop.cluster.reading.informer import Informer
from trainop.cluster.reading.records import ObjectRecord, PodRecord, owner_key
from trainop.cluster.reading.reports import HeardReports
from trainop.engine import BatchJob, Held, Observed, OwnedObject, PodState, supervised
from trainop.engine.labels import replica_name
from trainop.engine.observed import NodeState, RankState


class Observer:
    """One kind's reading of the shared caches. `named_held`: the going holders of a job's
    names that only the API server showed (the applier's), by job key."""

    def __init__(self, kind: str, caches: Caches, pod_services: bool,
                 named_held: Callable[[str], tuple[Held, ...]],
                 ranks: Callable[[str], Mapping[str, RankState]] | None = None,
                 heard: HeardReports | None = None):
        self.kind = kind
        self.caches = caches
        self.pod_services = pod_services
        self.named_held = named_held
        self.ranks = ranks
        """What the job's heard rank supervisors say, by pod UID (RankChannels.states)."""
        self.heard = heard
        """The reports the progress server took, and its CA (--progress-server)."""

    def pods_of(self, job: Defaulted) -> list[PodRecord]:
        """The job's own pods in the cache: those whose controller reference names this
        kind, this UID, in the job's namespace."""
        assert self.caches.pods is not None
        return self.caches.pods.owned_by(
            owner_key(job.namespace, self.kind, job.metadata.uid or ""))

    def observed(self, job: Defaulted, exited: tuple[tuple[str, int], ...] = ()) -> Observed:
        """What the caches hold of the job's own pods and objects: those whose controller
        reference names this kind, this UID, in the job's namespace, each pod as its heard
        rank supervisor says it is (supervised.overlay), with the progress its lead rank
        reported; and the pods seen to end since its last plan (`exited`)."""
        owner = owner_key(job.namespace, self.kind, job.metadata.uid or "")
        ranks = self.ranks(job.key) if self.ranks is not None else {}
        pods = tuple(supervised.overlay(p.state(job), rank, job.main_container)
                     if (rank := ranks.get(p.meta.uid)) is not None else p.state(job)
                     for p in self.pods_of(job))
        objects = tuple(OwnedObject(o.kind, o.meta.name, o.phase, o.content,
                                    self.batch_job(o) if o.job else None)
                        for o in self.caches.owned_objects(owner))
        cached = self.held(job, pods, objects)
        seen = {(h.kind, h.name) for h in cached}
        # and those only the API server showed (anyone's), until they are gone
        named = tuple(h for h in self.named_held(job.key) if (h.kind, h.name) not in seen)
        reports = tuple(rank.report for rank in ranks.values() if rank.report is not None)
        if self.heard is not None:
            reports += self.heard.of(self.kind, job.key)
        return Observed(pods=pods, objects=objects, exited=exited, held=cached + named,
                        lost_nodes=self.lost_nodes(pods), reports=reports,
                        progress_ca=self.heard.ca() if self.heard is not None else None)

    def lost_nodes(self, pods: tuple[PodState, ...]) -> tuple[NodeState, ...]:
        """The nodes of `pods` that are not Ready, or gone (--lost-node-grace)."""
        return tuple(lost for name in sorted({p.node for p in pods if p.node})
                     if (lost := self.lost(name)) is not None)

    def batch_job(self, rec: ObjectRecord) -> BatchJob:
        """A Job's status with what its pods say: how many run, and how its newest failed
        pod failed (mpi-operator reads them from the Job's pods)."""
        assert self.caches.pods is not None and rec.job is not None
        pods = self.caches.pods.owned_by(owner_key(rec.meta.namespace, JOBS.kind, rec.meta.uid))
        failed = [p.failure for p in pods if p.failure is not None]
        last = max(failed, key=lambda f: f.created, default=None)
        return dataclasses.replace(
            rec.job, running=sum(1 for p in pods if p.phase == "Running" and not p.terminating),
            last_failed=(last.pod_reason, last.pod_message) if last else None)

    def held(self, job: Defaulted, pods: tuple[PodState, ...], objects: tuple[OwnedObject, ...]
             ) -> tuple[Held, ...]:
        """The replica names of `job` that pods or services of other kubeflow.org/v1 jobs
        hold in the caches (a job deleted and applied again: the old one's, still going)."""
        assert self.caches.pods is not None
        services = [o.name for o in objects if o.kind == "Service"]
        resolved = resolve(job)
        total = resolved.total
        if len(pods) >= total and (len(services) >= total or not self.pod_services):
            return ()  # every replica has its objects (the common case: no lookup at all)
        mine = {p.name for p in pods} | set(services)
        caches: list[tuple[str, Informer[Any]]] = [("Pod", self.caches.pods)]
        if "Service" in self.caches.objects:
            caches.append(("Service", self.caches.objects["Service"]))
        out = []
        for rtype, index in resolved.slots():
            name = replica_name(job, rtype, index)
            if name in mine:
                continue
            for kind, cache in caches:
                rec = cache.get(f"{job.namespace}/{name}")
                if rec is not None and rec.meta.owner_uid != job.metadata.uid:
                    # (a service has no grace period: one being deleted is gone)
                    deleting = isinstance(rec, PodRecord) and rec.terminating
                    out.append(Held(kind, name, deleting, rec.meta.owner_kind,
                                    rec.meta.owner_name))
        return tuple(out)

    def lost(self, node: str) -> NodeState | None:
        """`node` as the engine is told it, where it is not Ready or gone; None where it is
        Ready or nodes are not watched."""
        if self.caches.nodes is None:
            return None
        rec = self.caches.nodes.get(node)
        return NodeState(node, "") if rec is None else rec.lost()
