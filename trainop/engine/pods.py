"""The desired pod and headless service of one replica."""

from __future__ import annotations

import copy
from typing import Any

from trainop.api import Job
from trainop.api.resolved import resolve
from trainop.api.templates import container, containers
from trainop.api.types import Defaulted
from trainop.engine import gang
from trainop.engine.config import EngineConfig
from trainop.engine.framework import Addressing, Env, FieldRef, Framework
from trainop.engine.labels import JOB_ROLE, object_meta, replica_labels, replica_name


def init_container(name: str, image: str, command: list[str]) -> dict[str, Any]:
    """An init container in the shape of upstream's init-pytorch (initcontainer.go:35-46):
    small fixed resources, the image pulled only if missing."""
    return {"name": name, "image": image, "imagePullPolicy": "IfNotPresent",
            "resources": {"limits": {"cpu": "100m", "memory": "20Mi"},
                          "requests": {"cpu": "50m", "memory": "10Mi"}},
            "command": command}


def wait_for_dns_container(names: list[str], config: EngineConfig) -> dict[str, Any]:
    """`wait-for-dns`: ends once every name resolves, as init-pytorch waits for its master
    (the same image, tries and 2 s between them)."""
    loop = (f"for name in {' '.join(names)}; do err=1; "
            f"for i in $(seq {config.pytorch_init_max_tries}); do "
            'if nslookup "$name"; then err=0 && break; fi; echo "waiting for $name"; '
            'sleep 2; done; if [ $err != 0 ]; then exit $err; fi; done')
    return init_container("wait-for-dns", config.pytorch_init_image, ["sh", "-c", loop])


def desired_pod(job: Defaulted, rtype: str, index: int, framework: Framework[Any], addr: Addressing,
                config: EngineConfig) -> dict[str, Any]:
    template = copy.deepcopy(job.spec.replica_specs[rtype].template or {})
    tmeta = template.get("metadata") or {}
    labels = {**(tmeta.get("labels") or {}), **replica_labels(job, rtype, index)}
    resolved = resolve(job)
    if resolved.is_master(rtype, index):
        labels.setdefault(JOB_ROLE, "master")  # mpi-operator's launcher says `launcher`
    meta = object_meta(job, replica_name(job, rtype, index), labels)
    if tmeta.get("annotations"):
        meta["annotations"] = dict(tmeta["annotations"])
    spec = template.get("spec") or {}
    spec["restartPolicy"] = resolved.pod_restart_policy(rtype)

    env = framework.env(job, rtype, index, addr)
    only = framework.env_containers(job)
    for c in containers(template):
        if only is None or c.get("name") == only:
            _add_env(c, env)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    framework.decorate_pod(job, rtype, index, pod, addr, config)
    if config.wait_for_dns and (names := framework.names_looked_up_once(job, rtype, index,
                                                                       addr)):
        spec.setdefault("initContainers", []).append(wait_for_dns_container(names, config))
    if config.gang_scheduler:
        gang.gang_of(job, config).decorate_pod(job, rtype, pod, config)
    if config.fallback_to_logs_on_error:
        for c in [*containers(template), *(spec.get("initContainers") or [])]:
            if isinstance(c, dict):
                c.setdefault("terminationMessagePolicy", "FallbackToLogsOnError")
    return pod


def _add_env(target: dict[str, Any], env: Env) -> None:
    """Append the framework's variables; a variable the user set keeps the user's value."""
    current = target.get("env")
    if not isinstance(current, list):
        current = []
    taken = {e.get("name") for e in current if isinstance(e, dict)}
    current.extend(
        {"name": k, "valueFrom": {"fieldRef": {"fieldPath": v.path}}}
        if isinstance(v, FieldRef) else {"name": k, "value": v}
        for k, v in env.items() if k not in taken)
    if current:
        target["env"] = current


def service_ports(job: Job, rtype: str) -> list[dict[str, Any]]:
    """The main container's named ports, as service ports."""
    main = container(job.spec.replica_specs[rtype].template, job.main_container) or {}
    return [
        {"name": p["name"], "port": p["containerPort"], "targetPort": p["containerPort"]}
        for p in main.get("ports") or []
        if isinstance(p, dict) and p.get("name") and p.get("containerPort")
    ]


def desired_service(job: Job, rtype: str, index: int) -> dict[str, Any] | None:
    """A headless service named like the pod, selecting it; None when there is no port."""
    ports = service_ports(job, rtype)
    if not ports:
        return None
    labels = replica_labels(job, rtype, index)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": object_meta(job, replica_name(job, rtype, index), labels),
        # as upstream: ready endpoints only (a dead pod's address must not answer the name)
        "spec": {"clusterIP": "None", "selector": labels, "ports": ports},
    }
