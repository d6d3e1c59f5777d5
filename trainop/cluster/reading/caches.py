"""The manager's shared caches: one informer per resource type, for every controller."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from trainop.api.resources import NODES, PODS, SERVICES, Resource, job_resource
from trainop.cluster.reading.client import Client
from trainop.cluster.reading.informer import Informer
from trainop.cluster.reading.records import (
    JobRecord,
    NodeRecord,
    ObjectRecord,
    PodRecord,
    job_record,
    node_record,
    object_record,
    pod_record,
)
from trainop.engine.labels import JOB_NAME
from trainop.frameworks import framework_for

R = TypeVar("R", PodRecord, ObjectRecord)
OWNED_SELECTOR = JOB_NAME
"""Only objects carrying trainop's job-name label are listed and watched (server side)."""
JOB_FIRST_PAGE = 5


def _no_owner(rec: JobRecord) -> str | None:
    return None


@dataclass
class Caches:
    jobs: dict[str, Informer[JobRecord]] = field(default_factory=dict)
    pods: Informer[PodRecord] | None = None
    objects: dict[str, Informer[ObjectRecord]] = field(default_factory=dict)
    """Kind -> informer, for Service, PodGroup and what frameworks own (Framework.owned)."""
    nodes: Informer[NodeRecord] | None = None
    """Every node, slim (--lost-node-grace; else None)."""

    def all(self) -> list[Informer[Any]]:
        return [*self.jobs.values(), *self.shared()]

    def shared(self) -> list[Informer[Any]]:
        """The informers of what jobs own, which every kind's controller reads."""
        return [*([self.pods] if self.pods else []), *self.objects.values(),
                *([self.nodes] if self.nodes else [])]

    def owned_objects(self, owner: str) -> list[ObjectRecord]:
        """Objects whose controller is `owner` (records.owner_key)."""
        out: list[ObjectRecord] = []
        for informer in self.objects.values():
            out.extend(informer.owned_by(owner))
        return out


def owned(kinds: list[str]) -> dict[str, Resource]:
    """Kind -> resource of the objects that jobs of `kinds` own besides pods, services and
    PodGroups (Framework.owned)."""
    return {r.kind: r for kind in kinds for r in framework_for(kind).owned}


PREBUILT_INDEX = "prebuilt"
"""The jobs informer's index of jobs by the Workload made beforehand that they name."""


def job_informer(client: Client, kind: str, namespace: str | None) -> Informer[JobRecord]:
    # jobs may be 1.5 MiB each: the first page is small, the next ones sized by it
    return Informer(client, job_resource(kind), job_record, lambda r: r.key, _no_owner, namespace,
                    version=lambda r: r.meta.resource_version, first_page=JOB_FIRST_PAGE,
                    indexes={PREBUILT_INDEX: _prebuilt})


def _prebuilt(rec: JobRecord) -> str | None:
    return f"{rec.meta.namespace}/{rec.prebuilt}" if rec.prebuilt else None


NODE_INDEX = "node"
"""The pods informer's index of pods by the node they are on (where nodes are watched)."""


def build(client: Client, kinds: list[str], namespace: str | None,
          extra: dict[str, Resource], nodes: bool = False) -> Caches:
    """Informers for the enabled kinds and what they own: pods and services always, the
    kinds of `extra` (the gang scheduler's PodGroups), and what the enabled frameworks own
    besides (ConfigMaps, Secrets, MPI's RBAC objects and HPAs are watched only where a
    framework makes them); `nodes`: every Node too."""
    caches = Caches()
    if nodes:
        caches.nodes = Informer(client, NODES, node_record, lambda r: r.name, lambda r: None)
    for kind in kinds:
        caches.jobs[kind] = job_informer(client, kind, namespace)
    caches.pods = Informer(client, PODS, _controlled(pod_record), lambda r: r.meta.key,
                           lambda r: r.meta.owner_key, namespace, OWNED_SELECTOR,
                           # a Node's change looks at the pods there (--lost-node-grace)
                           indexes={NODE_INDEX: lambda r: r.node} if nodes else None)
    for kind, resource in {SERVICES.kind: SERVICES, **extra, **owned(kinds)}.items():
        caches.objects[kind] = Informer(
            client, resource, _controlled(lambda obj, k=kind: object_record(k, obj)),  # type: ignore[misc]
            lambda r: r.meta.key, lambda r: r.meta.owner_key, namespace, OWNED_SELECTOR)
    return caches


def _controlled(decode: Callable[[dict[str, Any]], R | None]
                ) -> Callable[[dict[str, Any]], R | None]:
    """Only objects a kubeflow.org job controls (or a launcher Job of one: Meta.owner_key)
    are cached: labels alone are anyone's to set, so pods someone else made with trainop's
    labels cost no memory."""
    def keep(obj: dict[str, Any]) -> R | None:
        rec = decode(obj)
        return rec if rec is not None and rec.meta.owner_key is not None else None
    return keep
