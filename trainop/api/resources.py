"""The API resources trainop reads and writes, and their URL paths."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from trainop.api.kinds import GROUP, KINDS, VERSION


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def new(self, metadata: dict[str, Any], **body: Any) -> dict[str, Any]:
        """An object of this resource: apiVersion, kind, `metadata`, then `body`."""
        return {"apiVersion": self.api_version, "kind": self.kind, "metadata": metadata, **body}

    def path(self, namespace: str | None = None, name: str | None = None,
             sub: str | None = None) -> str:
        """The API path of the resource, of a namespace's, or of one object; the names are
        one segment each, whatever a job's author wrote in them."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{_segment(namespace)}"
        base += f"/{self.plural}"
        if name:
            base += f"/{_segment(name)}"
        if sub:
            base += f"/{sub}"
        return base


def _segment(name: str) -> str:
    """`name` as one segment of a path, quoted (no `/`, `?` or `#` of it reaches the URL);
    ValueError for `.` and `..`, which would move up the path (no object has such a name:
    the API server's IsValidPathSegmentName)."""
    if name in (".", ".."):
        raise ValueError(f"{name!r} is no object's name")
    return quote(name, safe="")


PODS = Resource("", "v1", "pods", "Pod")
SERVICES = Resource("", "v1", "services", "Service")
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap")
SECRETS = Resource("", "v1", "secrets", "Secret")
SERVICEACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")
ROLES = Resource("rbac.authorization.k8s.io", "v1", "roles", "Role")
ROLEBINDINGS = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding")
EVENTS = Resource("", "v1", "events", "Event")
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
VOLCANO_PODGROUPS = Resource("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup")
PLUGINS_PODGROUPS = Resource("scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup")
# Kubernetes' own gang (--gang-scheduler-name=workload-api; 1.37+, gate GenericWorkload)
GANG_WORKLOADS = Resource("scheduling.k8s.io", "v1beta1", "workloads", "Workload")
GANG_PODGROUPS = Resource("scheduling.k8s.io", "v1beta1", "podgroups", "PodGroup")
# Kueue's (--kueue-workloads): the Workloads kept, what they are admitted with and ranked by
WORKLOADS = Resource("kueue.x-k8s.io", "v1beta2", "workloads", "Workload")
RESOURCE_FLAVORS = Resource("kueue.x-k8s.io", "v1beta2", "resourceflavors", "ResourceFlavor",
                            namespaced=False)
WORKLOAD_PRIORITY_CLASSES = Resource("kueue.x-k8s.io", "v1beta2", "workloadpriorityclasses",
                                     "WorkloadPriorityClass", namespaced=False)
PRIORITY_CLASSES = Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass",
                            namespaced=False)
LOCAL_QUEUES = Resource("kueue.x-k8s.io", "v1beta2", "localqueues", "LocalQueue")
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)


CRDS = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions",
               "CustomResourceDefinition", namespaced=False)


def job_resource(kind: str) -> Resource:
    """The API resource of a declared job kind."""
    return Resource(GROUP, VERSION, KINDS[kind].plural, kind)


JOBS = Resource("batch", "v1", "jobs", "Job")
"""A replica made by a Job (mpi-operator's launcher: engine/batchjob.py)."""
HPAS = Resource("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler")
"""As upstream v1.9.4; served from Kubernetes 1.23 (v2beta2, removed in 1.26, is not used)."""
OWNED = {(r.api_version, r.kind): r for r in (
    PODS, SERVICES, CONFIGMAPS, SECRETS, SERVICEACCOUNTS, ROLES, ROLEBINDINGS,
    VOLCANO_PODGROUPS, PLUGINS_PODGROUPS, GANG_WORKLOADS, GANG_PODGROUPS, HPAS, JOBS)}
"""(apiVersion, kind) -> resource, for every object a job owns: the one table the
runtime looks them up in."""


def resource_for(kind: str, api_version: str) -> Resource:
    """The API resource of an object a job owns."""
    try:
        return OWNED[(api_version, kind)]
    except KeyError:
        raise ValueError(f"trainop does not manage {api_version} {kind}") from None
