"""What the engine decides: objects to create, update and delete, the new status, events."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from trainop.api import JobStatus
from trainop.engine import conditions as cond
from trainop.engine.observed import Told

MAX_REQUEUE = 86400.0
"""A deadline or TTL further away than this is looked at again after it (a day), so that no
timer carries a number of seconds that only the job's own field could hold."""


@dataclass(frozen=True)
class ObjectRef:
    kind: str
    name: str
    api_version: str = "v1"
    grace: int | None = None
    """The deletion's grace period in seconds (0: at once, without the kubelet); None: the
    object's own."""


@dataclass(frozen=True)
class Event:
    type: str  # Normal or Warning
    reason: str
    message: str


@dataclass
class Plan:
    status: JobStatus
    prerequisites: list[dict[str, Any]] = field(default_factory=list)
    """Objects to create before any of `create`: what pods mount or join (ConfigMaps,
    Secrets, a PodGroup, MPI's service) and the job's HPA."""
    create: list[dict[str, Any]] = field(default_factory=list)
    """The replicas: pods and their own services, in any order."""
    update: list[dict[str, Any]] = field(default_factory=list)
    delete: list[ObjectRef] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    """Events to tell once the plan is carried out."""
    on_created: list[Event] = field(default_factory=list)
    """Events that are true only once every object of `create` was made
    (SuccessfulCreatePod): not told when the API server refused one."""
    on_removed: list[Event] = field(default_factory=list)
    """Events that tell of `delete` (SuccessfulDeletePod): told once the deletions are
    done, whether or not the status write after them goes through (a retry finds the pods
    terminating and does not delete, nor tell, again)."""
    told: dict[str, Told] = field(default_factory=dict)
    """What each pod that restarts in place is told of the job's attempts, by name
    (engine/inplace.py's tell): a runtime tells its rank supervisor at once, before any
    patch of `update` is written."""
    status_changed: bool = False
    requeue_after: float | None = None
    """Seconds until the engine must look again although nothing changed (deadline, TTL)."""
    delete_job: bool = False
    """The TTL after finishing ran out: delete the job itself."""
    on_deleted: list[Event] = field(default_factory=list)
    """Events true only once the job itself is deleted by this plan (not told by a retry
    that finds it gone already)."""
    transitions: list[str] = field(default_factory=list)
    """Condition types that became True in this plan (Created, Restarting, Succeeded, ...)."""
    metrics: dict[str, int] = field(default_factory=dict)
    """What this plan adds to the training_operator_jobs_{created,successful,failed,
    restarted}_total counters, by upstream's rules (a job failed by its replicas, not by a
    limit, is `failed`; each pod restarted after a failure is `restarted`)."""

    @property
    def to_create(self) -> list[dict[str, Any]]:
        """Every object to create, in the order they must be made."""
        return self.prerequisites + self.create

    @property
    def writes(self) -> int:
        """How many API writes applying this plan takes (events not counted)."""
        return (len(self.prerequisites) + len(self.create) + len(self.update)
                + len(self.delete) + int(self.status_changed) + int(self.delete_job))

    def remove(self, ref: ObjectRef) -> bool:
        """Plan a deletion once; False when it is already planned."""
        if ref in self.delete:
            return False
        self.delete.append(ref)
        return True

    def set_condition(self, ctype: str, value: str, reason: str, message: str, now: str,
               event: Event | None = None) -> bool:
        """Set a condition on the plan's status, the one way any is recorded: True when it
        became True just now, and then the transition is noted and `event` told."""
        if not cond.set_condition(self.status, ctype, value, reason, message, now):
            return False
        self.status_changed = True
        if value != "True":
            return False
        self.transitions.append(ctype)
        if event is not None:
            self.events.append(event)
        return True

    def add_metric(self, counter: str, n: int = 1) -> None:
        """Add `n` to the job counter `counter` (created, successful, failed, restarted)."""
        self.metrics[counter] = self.metrics.get(counter, 0) + n

    def requeue(self, seconds: float) -> None:
        seconds = min(max(seconds, 0.0), MAX_REQUEUE)
        if self.requeue_after is None or seconds < self.requeue_after:
            self.requeue_after = seconds


def shown(names: Iterable[str]) -> str:
    """The first names of an event about many objects (--aggregate-events, restarts),
    `...` after five."""
    names = list(names)
    return ", ".join(names[:5]) + (" ..." if len(names) > 5 else "")
