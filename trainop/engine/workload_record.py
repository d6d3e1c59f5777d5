"""A Kueue Workload as the caches keep it and the engine reads it: typed, its pod sets
slim (engine/workload.py: read), so that what queueing.py decides on is a field, never a
path into a dict any Workload's writer chose the shape of."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class WorkloadCondition:
    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: str = ""
    observed_generation: int = 0

    def written(self) -> dict[str, Any]:
        """The condition as the API server takes it."""
        return {"type": self.type, "status": self.status, "reason": self.reason,
                "message": self.message, "lastTransitionTime": self.last_transition_time,
                "observedGeneration": self.observed_generation}


@dataclass(frozen=True, slots=True)
class OwnerRef:
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool = False

    def written(self) -> dict[str, Any]:
        ref: dict[str, Any] = {"apiVersion": self.api_version, "kind": self.kind,
                               "name": self.name, "uid": self.uid}
        if self.controller:
            ref["controller"] = True
        return ref


@dataclass(frozen=True, slots=True)
class WorkloadStatus:
    conditions: tuple[WorkloadCondition, ...] = ()
    admission: Mapping[str, Any] | None = None
    """status.admission (None: no quota reserved)."""
    reclaimable_pods: tuple[tuple[str, int], ...] = ()
    """status.reclaimablePods as (pod set, count)."""
    admission_checks: tuple[Mapping[str, Any], ...] = ()
    """status.admissionChecks (their pod set updates)."""

    def condition_of(self, ctype: str) -> WorkloadCondition | None:
        """Its condition `ctype`, whatever its status."""
        return next((c for c in self.conditions if c.type == ctype), None)

    def condition(self, ctype: str) -> WorkloadCondition | None:
        """Its condition `ctype` where it is True, else None."""
        c = self.condition_of(ctype)
        return c if c is not None and c.status == "True" else None

    @property
    def admitted(self) -> bool:
        return self.condition("Admitted") is not None

    @property
    def has_quota(self) -> bool:
        return self.condition("QuotaReserved") is not None


@dataclass(frozen=True, slots=True)
class Workload:
    """What trainop reads of a Workload (kueue.x-k8s.io/v1beta2)."""

    namespace: str
    name: str
    uid: str = ""
    resource_version: str = ""
    generation: int = 0
    labels: Mapping[str, str] = field(default_factory=dict)
    finalizers: tuple[str, ...] = ()
    owners: tuple[OwnerRef, ...] = ()
    """Its ownerReferences, as written (an adopted Workload keeps every one)."""
    deleting: bool = False
    """It has a deletionTimestamp."""
    queue_name: str = ""
    max_execution_seconds: int | None = None
    pod_sets: tuple[Mapping[str, Any], ...] = ()
    """spec.podSets, slim: each template stands as digests of what is compared of it."""
    status: WorkloadStatus = field(default_factory=WorkloadStatus)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def controller(self) -> OwnerRef | None:
        """Its controlling owner reference, or None."""
        return next((o for o in self.owners if o.controller), None)
