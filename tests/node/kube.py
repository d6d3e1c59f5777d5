"""Helpers for tests on the real node: a namespace per test, objects applied with kubectl,
waits on what the kubelet reports, logs read back with `kubectl logs`."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self, TypeVar

import yaml

from testbed import images
from testbed.node import TestCluster
from trainop.api.kinds import KINDS

T = TypeVar("T")


def wait_for(what: str, check: Callable[[], T | None], timeout: float = 120,
             interval: float = 0.5) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def with_host_python(pod_spec: dict[str, Any], image: str = images.PYTHON) -> dict[str, Any]:
    """The pod spec with every container on `image` and the host's Python mounted: the
    only change the real-node tests make to an example."""
    volumes, mounts = images.python_volumes()
    pod_spec.setdefault("volumes", []).extend(volumes)
    for c in pod_spec.get("initContainers", []) + pod_spec["containers"]:
        c["image"] = image
        c.setdefault("volumeMounts", []).extend(mounts)
    return pod_spec


def pod(name: str, command: list[str], labels: dict[str, str] | None = None,
        restart: str = "Always") -> dict[str, Any]:
    spec = with_host_python({
        "restartPolicy": restart, "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "main", "image": images.PYTHON, "command": command}]})
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels or {}}, "spec": spec}


class Namespace:
    """A fresh namespace; deleted (pods at once) when the block ends."""

    def __init__(self, cluster: TestCluster, prefix: str) -> None:
        self.cluster = cluster
        self.name = f"{prefix}-{uuid.uuid4().hex[:6]}"

    def __enter__(self) -> Self:
        self.cluster.kubectl("create", "namespace", self.name)
        wait_for("the namespace's default ServiceAccount",
                 lambda: self.get("serviceaccount", "default"), 60)
        return self

    def __exit__(self, *exc: object) -> None:
        self.kubectl("delete", "pods", "--all", "--grace-period=0", "--force", "--wait=false",
                     check=False)
        self.cluster.kubectl("delete", "namespace", self.name, "--wait=false", check=False)

    def kubectl(self, *args: str, input: str | None = None, check: bool = True,
                timeout: float = 120) -> str:
        return self.cluster.kubectl("-n", self.name, *args, input=input, check=check,
                                    timeout=timeout).stdout

    def apply(self, *objects: dict[str, Any]) -> None:
        self.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(objects))

    def get(self, kind: str, name: str) -> dict[str, Any] | None:
        out = self.cluster.kubectl("-n", self.name, "get", kind, name, "-o", "json",
                                   check=False)
        return dict(json.loads(out.stdout)) if out.returncode == 0 else None

    def items(self, kind: str, selector: str = "") -> list[dict[str, Any]]:
        args = ["get", kind, "-o", "json", *(("-l", selector) if selector else ())]
        return list(json.loads(self.kubectl(*args))["items"])

    def wait_phase(self, pod_name: str, *phases: str, timeout: float = 120) -> str:
        """Wait until the pod is in one of `phases` (or has ended); returns its phase."""
        wanted = set(phases) | {"Succeeded", "Failed"}

        def phase() -> str | None:
            p = self.get("pod", pod_name)
            got = p and p.get("status", {}).get("phase")
            return got if got in wanted else None
        return wait_for(f"pod {pod_name} to be {'/'.join(phases)}", phase, timeout)

    def logs(self, pod_name: str, container: str = "", previous: bool = False) -> str:
        args = ["logs", pod_name, *(("-c", container) if container else ()),
                *(("--previous",) if previous else ())]
        return self.kubectl(*args, check=False)

    def wait_running(self, count: int, timeout: float = 120) -> None:
        """Until `count` pods of the namespace run."""
        wait_for(f"{count} running pods", lambda: len([
            p for p in self.items("pods") if p["status"].get("phase") == "Running"]) == count,
            timeout)

    def succeeds(self, kind: str, name: str, timeout: float = 300) -> dict[str, Any]:
        """Wait until the job ends; assert that it succeeded; returns the job."""
        job = self.condition(kind, name, "Succeeded", "Failed", timeout=timeout)
        conditions = {c["type"]: c for c in job["status"]["conditions"]}
        assert conditions.get("Succeeded", {}).get("status") == "True", job["status"]
        return job

    def condition(self, kind: str, name: str, *types: str, timeout: float = 300
                  ) -> dict[str, Any]:
        """Wait until the job has one of the condition `types` True; returns the job."""
        def ended() -> dict[str, Any] | None:
            job = self.get(kind, name)
            conds = (job or {}).get("status", {}).get("conditions", [])
            hit = any(c["type"] in types and c["status"] == "True" for c in conds)
            return job if hit else None
        return wait_for(f"{kind} {name} to be {'/'.join(types)}", ended, timeout, 1)


def state_folder(cluster: TestCluster, ns: Namespace) -> Path:
    """A host folder every rank of a job in `ns` may write (mounted from its hostPath)."""
    state = cluster.workdir / "state" / ns.name
    state.mkdir(parents=True)
    state.chmod(0o777)
    return state


def python_job(kind: str, name: str, replicas: dict[str, int], script: str,
               restart: str = "Never", spec: dict[str, Any] | None = None,
               ) -> dict[str, Any]:
    """A job of `kind` whose every replica runs `script` in the python image (1 s grace)."""
    info = KINDS[kind]
    specs = {}
    for rtype, count in replicas.items():
        pod_spec = with_host_python({
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": info.default_container, "image": images.PYTHON,
                            "command": ["python3", "-c", script]}]})
        specs[rtype] = {"replicas": count, "restartPolicy": restart,
                        "template": {"spec": pod_spec}}
    return {"apiVersion": "kubeflow.org/v1", "kind": kind, "metadata": {"name": name},
            "spec": {info.replica_specs_field: specs, **(spec or {})}}
