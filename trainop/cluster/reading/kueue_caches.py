"""What of Kueue the manager reads for the kinds it keeps Workloads for (--kueue-workloads):
the Workloads (typed, engine/workload_record.py), the ResourceFlavors their admissions name,
the priority classes a new Workload takes its priority from, and the namespaces whose jobs
are queued."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainop.api.resources import (
    NAMESPACES,
    PRIORITY_CLASSES,
    RESOURCE_FLAVORS,
    WORKLOAD_PRIORITY_CLASSES,
    WORKLOADS,
)
from trainop.cluster.reading.client import Client
from trainop.cluster.reading.informer import Informer
from trainop.cluster.reading.records import Meta, meta_of, owner_key
from trainop.engine import workload as wl
from trainop.engine.workload import PriorityClasses
from trainop.engine.workload_record import Workload


@dataclass(slots=True)
class WorkloadRecord:
    """A Workload in the cache: its metadata for the indexes and handlers, and the
    Workload the engine reads."""

    meta: Meta
    workload: Workload


def workload_record(obj: dict[str, Any]) -> WorkloadRecord:
    return WorkloadRecord(meta_of(obj), wl.read(obj))


@dataclass(slots=True)
class FlavorRecord:
    meta: Meta
    spec: dict[str, Any]


def flavor_record(obj: dict[str, Any]) -> FlavorRecord:
    spec = obj.get("spec")
    return FlavorRecord(meta_of(obj), dict(spec) if isinstance(spec, dict) else {})


@dataclass(slots=True, frozen=True)
class PriorityRecord:
    """A PriorityClass or WorkloadPriorityClass: its value (int32 by both schemas; read as
    0 where it is not an int) and whether it is the cluster's global default."""

    name: str
    value: int
    global_default: bool


def priority_record(obj: dict[str, Any]) -> PriorityRecord:
    value = obj.get("value")
    return PriorityRecord(meta_of(obj).name, value if type(value) is int else 0,
                          obj.get("globalDefault") is True)


class KueueCaches:
    """The informers of what Kueue's part reads."""

    def __init__(self, client: Client, namespace: str | None,
                 namespace_selector: str | None = None):
        self.workloads: Informer[WorkloadRecord] = Informer(
            client, WORKLOADS, workload_record, lambda r: r.meta.key,
            lambda r: r.meta.owner_key, namespace)
        """Indexed by their owner job."""
        self.flavors: Informer[FlavorRecord] = Informer(
            client, RESOURCE_FLAVORS, flavor_record, lambda r: r.meta.name, lambda r: None)
        self.priority_classes: Informer[PriorityRecord] = Informer(
            client, PRIORITY_CLASSES, priority_record, lambda r: r.name, lambda r: None)
        self.workload_priority_classes: Informer[PriorityRecord] = Informer(
            client, WORKLOAD_PRIORITY_CLASSES, priority_record, lambda r: r.name,
            lambda r: None)
        self.namespaces: Informer[Meta] | None = None if namespace_selector is None else \
            Informer(client, NAMESPACES, meta_of, lambda r: r.name, lambda r: None,
                     label_selector=namespace_selector)
        """The namespaces whose jobs are queued (the API server selects them); None: every
        namespace's."""

    def all(self) -> list[Informer[Any]]:
        return [self.workloads, self.flavors, self.priority_classes,
                self.workload_priority_classes, *([self.namespaces] if self.namespaces else [])]

    def of_job(self, namespace: str, kind: str, uid: str, prebuilt: str | None
               ) -> list[Workload]:
        """A job's Workloads: those it owns, and the prebuilt one it names."""
        found = [r.workload for r in self.workloads.owned_by(owner_key(namespace, kind, uid))]
        if prebuilt is not None:
            rec = self.workloads.get(f"{namespace}/{prebuilt}")
            if rec is not None and all(w.key != rec.workload.key for w in found):
                found.append(rec.workload)
        return found

    def priorities(self) -> PriorityClasses:
        pod = self.priority_classes.items.values()
        return PriorityClasses(
            workload={r.name: r.value for r in self.workload_priority_classes.items.values()},
            pod={r.name: r.value for r in pod},
            global_default={r.name: r.value for r in pod if r.global_default})

    def flavor_specs(self) -> dict[str, dict[str, Any]]:
        return {r.meta.name: r.spec for r in self.flavors.items.values()}
