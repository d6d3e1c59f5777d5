"""Cluster addressing: replicas reached through their headless services' DNS names."""

from __future__ import annotations

from trainop.api import Job
from trainop.api.templates import container
from trainop.engine.labels import replica_name


class ClusterAddressing:
    """`{job}-{rt}-{i}.{ns}.svc` (or `{pod}.{job}.{ns}.svc` where the kind's pods are named
    under one service of the job's; `.{cluster_domain}` after `svc` where the manager was
    given one, as upstream's CUSTOM_CLUSTER_DOMAIN) and the container's named port."""

    def __init__(self, cluster_domain: str | None = None):
        self.suffix = f".{cluster_domain}" if cluster_domain else ""

    def host(self, job: Job, rtype: str, index: int, *, qualified: bool = True) -> str:
        name = replica_name(job, rtype, index)
        if job.info.pods_under_one_service:
            name = f"{name}.{job.name}"
        return f"{name}.{job.namespace}.svc{self.suffix}" if qualified else name

    def pod_host(self, pod: str) -> str:
        return pod

    def port(self, job: Job, rtype: str, index: int, name: str | None = None) -> int:
        wanted = name or job.info.default_port_name
        rspec = job.spec.replica_specs.get(rtype)
        main = container(rspec.template if rspec else None, job.main_container)
        for port in (main or {}).get("ports") or []:
            if isinstance(port, dict) and port.get("name") == wanted:
                return int(port.get("containerPort", job.info.default_port))
        return job.info.default_port
