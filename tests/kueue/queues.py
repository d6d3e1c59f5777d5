"""A test's Kueue objects: its ResourceFlavor, ClusterQueue and LocalQueue, and the
Workloads Kueue makes for its jobs."""

from __future__ import annotations

import json
from typing import Any

import yaml

from tests.integration.kube import Kube, condition_of, wait_for

API = "kueue.x-k8s.io/v1beta2"
QUEUE = "queue"
"""The LocalQueue of every test's namespace."""


class Queues:
    """Kueue's objects for one test's namespace (the cluster-scoped ones named after it)."""

    def __init__(self, kube: Kube):
        self.kube = kube
        self.name = kube.ns

    def apply(self, *docs: dict[str, Any]) -> None:
        self.kube.api.kubectl("apply", "--server-side", "-f", "-",
                              input="---\n".join(yaml.safe_dump(d) for d in docs))

    def create(self, cpu: str = "4", *, flavor: dict[str, Any] | None = None,
               preemption: dict[str, Any] | None = None,
               admission_checks: list[str] | None = None, cohort: str | None = None,
               lender: str | None = None) -> str:
        """A flavor (`flavor`: its spec), a ClusterQueue of `cpu` CPUs (and ample memory)
        of it (`admission_checks`: the AdmissionChecks it asks for; `cohort`: the cohort
        it is in), and the namespace's LocalQueue QUEUE pointing at it; returns QUEUE once
        Kueue says the ClusterQueue is active. `lender`: the CPUs of another ClusterQueue
        of the flavor in the cohort (NAME-lender), which no LocalQueue points at."""
        spec: dict[str, Any] = {
            "namespaceSelector": {},
            "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [{
                "name": self.name, "resources": [
                    {"name": "cpu", "nominalQuota": cpu},
                    {"name": "memory", "nominalQuota": "64Gi"}]}]}]}
        if preemption:
            spec["preemption"] = preemption
        if admission_checks:
            spec["admissionChecksStrategy"] = {"admissionChecks": [
                {"name": name} for name in admission_checks]}
        if cohort:
            spec["cohortName"] = cohort
        self.apply(
            {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": self.name},
             "spec": flavor or {}},
            {"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": self.name},
             "spec": spec},
            {"apiVersion": API, "kind": "LocalQueue",
             "metadata": {"name": QUEUE, "namespace": self.kube.ns},
             "spec": {"clusterQueue": self.name}})
        if lender:
            other = json.loads(json.dumps(spec))
            other["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = lender
            self.apply({"apiVersion": API, "kind": "ClusterQueue",
                        "metadata": {"name": f"{self.name}-lender"}, "spec": other})
        wait_for(f"ClusterQueue {self.name} active", lambda: self.active(
            "clusterqueues", self.name), timeout=30)
        wait_for(f"LocalQueue {QUEUE} active", lambda: self.active(
            "localqueues", QUEUE, namespaced=True), timeout=30)
        return QUEUE

    def active(self, resource: str, name: str, namespaced: bool = False) -> bool:
        args = ("-n", self.kube.ns) if namespaced else ()
        out = self.kube.api.kubectl("get", f"{resource}.kueue.x-k8s.io", name, *args,
                                    "-o", "jsonpath={.status.conditions[?(@.type=="
                                    "\"Active\")].status}", check=False)
        return out.stdout.strip() == "True"

    def workload(self, kind: str, job: str) -> dict[str, Any] | None:
        """The Workload Kueue made for job `kind`/`job` (it owns it)."""
        for wl in self.kube.items("workloads.kueue.x-k8s.io"):
            for ref in wl["metadata"].get("ownerReferences") or []:
                if ref["kind"] == kind and ref["name"] == job:
                    return dict(wl)
        return None

    def wait_workload(self, kind: str, job: str, timeout: float = 30) -> dict[str, Any]:
        return wait_for(f"the Workload of {kind}/{job}", lambda: self.workload(kind, job),
                        timeout)

    def condition(self, kind: str, job: str, ctype: str) -> dict[str, Any] | None:
        """The Workload's condition `ctype` where it is True."""
        return condition_of(self.workload(kind, job), ctype)

    def wait_condition(self, kind: str, job: str, ctype: str, timeout: float = 30
                       ) -> dict[str, Any]:
        return wait_for(f"Workload of {kind}/{job} {ctype}",
                        lambda: self.condition(kind, job, ctype), timeout)
