"""What a round does to the job's objects: make what is missing, delete pods, services and
other objects, each told in the kind's words where it tells them (--aggregate-events: one
event for many)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from trainop.api.resources import Resource
from trainop.api.types import Defaulted
from trainop.engine import objects
from trainop.engine.config import EngineConfig
from trainop.engine.framework import Framework, PlanAddressing
from trainop.engine.observed import Observed, PodState
from trainop.engine.plan import Event, ObjectRef, Plan, shown


class ObjectActs:
    """The round's creations and deletions, into its `plan`."""

    def __init__(self, plan: Plan, now: str, job: Defaulted, observed: Observed,
                 framework: Framework[Any], addr: PlanAddressing, config: EngineConfig):
        self.plan = plan
        self.now = now
        self.job = job
        self.observed = observed
        self.fw = framework
        self.addr = addr
        self.config = config
        self.tells_objects = framework.wording.tells_objects(job)
        """Whether its pods and services being made and deleted are told."""

    def removed(self, reason: str, message: str) -> None:
        """A Normal event of a deletion this plan makes (Plan.on_removed)."""
        self.plan.on_removed.append(Event("Normal", reason, message))

    def delete_pods(self, pods: list[PodState], reason: str, force: bool = False) -> None:
        """Delete `pods` (`force`: with grace 0, those being deleted too)."""
        pods = [p for p in sorted(pods, key=lambda p: (p.replica_type, -p.index))
                if (force or not p.terminating) and self.plan.remove(
                    ObjectRef("Pod", p.name, grace=0 if force else None))]
        if not pods or not self.tells_objects:
            return
        if self.config.aggregate_events:
            self.removed("SuccessfulDeletePod",
                         f"Deleted {len(pods)} pod(s) ({reason}): {shown(p.name for p in pods)}")
        else:  # pkg/controller.v1/control/pod_control.go:190
            for p in pods:
                self.removed("SuccessfulDeletePod", f"Deleted pod: {p.name}")

    def delete_services(self, names: Iterable[str], reason: str) -> None:
        gone = [n for n in names if self.plan.remove(ObjectRef("Service", n))]
        if not self.tells_objects:
            return
        if gone and self.config.aggregate_events:
            self.removed("SuccessfulDeleteService",
                         f"Deleted {len(gone)} service(s) ({reason}): {shown(gone)}")
        else:  # pkg/controller.v1/control/service_control.go:133
            for name in gone:
                self.removed("SuccessfulDeleteService", f"Deleted service: {name}")

    def services(self, of: list[PodState] | None = None) -> list[str]:
        """The names of the job's services (those of the pods `of` where given)."""
        names = None if of is None else {p.name for p in of}
        return [o.name for o in self.observed.objects
                if o.kind == "Service" and (names is None or o.name in names)]

    def delete_kind(self, resource: Resource) -> None:
        for obj in self.observed.objects:
            if obj.kind == resource.kind:
                self.plan.remove(ObjectRef(resource.kind, obj.name, resource.api_version))

    def create_missing(self) -> None:
        todo = objects.missing(self.job, self.observed, self.fw, self.addr, self.config)
        if todo.held:
            # pods wait for the PodGroup's admission: upstream marks the round
            # (pkg/controller.v1/common/job.go:328-331)
            self.plan.status.last_reconcile_time = self.now
        self.plan.prerequisites.extend(todo.prerequisites)
        self.plan.update.extend(todo.update)
        self.plan.create.extend(todo.replicas)
        if todo.more:
            self.plan.requeue(0)  # the next batch, once the cache shows this one
        if not self.tells_objects:
            return
        on_created = self.plan.on_created
        if self.config.aggregate_events:
            for reason, what, names in (("SuccessfulCreatePod", "pod", [n for _, n in todo.pods]),
                                        ("SuccessfulCreateService", "service", todo.services)):
                if names:
                    on_created.append(Event("Normal", reason,
                                            f"Created {len(names)} {what}(s): {shown(names)}"))
            return
        # one per object, as upstream (pkg/controller.v1/control/pod_control.go:162,
        # service_control.go:106)
        on_created.extend(Event("Normal", "SuccessfulCreatePod",
                                self.fw.wording.created_pod(rtype, name))
                          for rtype, name in todo.pods)
        on_created.extend(Event("Normal", "SuccessfulCreateService", f"Created service: {name}")
                          for name in todo.services)
