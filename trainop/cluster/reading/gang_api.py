"""What the manager learns as it starts of Kubernetes' own gang
(--gang-scheduler-name=workload-api, engine/kubegang.py): whether the API server serves
its Workloads and PodGroups, and whether it keeps a PodGroup's topology constraint."""

from __future__ import annotations

import dataclasses
import logging

from trainop.api.resources import GANG_PODGROUPS, GANG_WORKLOADS
from trainop.cluster.reading.client import APIError, Client
from trainop.engine import EngineConfig, kubegang

log = logging.getLogger("trainop.manager")

PROBE = "trainop-topology-probe"
"""The Workload created with dryRun to see whether the API server keeps a topology."""


async def served(client: Client) -> bool:
    """Whether scheduling.k8s.io/v1beta1 serves both Workloads and PodGroups (the group
    version is off by default, and its two resources need the GenericWorkload gate);
    APIError where the API server cannot say."""
    try:
        found = await client.get(f"/apis/{GANG_WORKLOADS.group}/{GANG_WORKLOADS.version}")
    except APIError as err:
        if err.not_found:
            return False
        raise
    names = {r.get("name") for r in found.get("resources") or [] if isinstance(r, dict)}
    return {GANG_WORKLOADS.plural, GANG_PODGROUPS.plural} <= names


async def _topology_dropped(client: Client, namespace: str) -> bool:
    """Whether the API server drops a topology constraint (the TopologyAwareWorkload-
    Scheduling gate off): its answer to a Workload with one, created with dryRun."""
    template = {"name": kubegang.TEMPLATE, "schedulingPolicy": {"gang": {"minCount": 1}},
                "schedulingConstraints": {"topology": [{"key": "kubernetes.io/hostname"}]}}
    probe = GANG_WORKLOADS.new({"name": PROBE, "namespace": namespace},
                               spec={"podGroupTemplates": [template]})
    try:
        made = await client.request("POST", GANG_WORKLOADS.path(namespace), probe,
                                    {"dryRun": "All"})
    except APIError as err:
        log.warning("cannot tell whether the cluster keeps a PodGroup's topology (a "
                    "Workload created with dryRun in %s: %s): taking it that it does",
                    namespace, err)
        return False
    kept = ((made.get("spec") or {}).get("podGroupTemplates") or [{}])[0]
    return not (kept.get("schedulingConstraints") or {}).get("topology")


async def configure(client: Client, engine: EngineConfig, discovered: bool,
                    namespace: str | None) -> EngineConfig:
    """The engine's options with what the cluster cannot do of Kubernetes' own gang,
    each said once as a warning (the jobs that ask are held and told)."""
    if not engine.workload_api:
        return engine
    if not discovered:
        log.warning("--gang-scheduler-name=%s: %s; jobs are held until it does",
                    engine.gang_scheduler, kubegang.API_MISSING)
        return dataclasses.replace(engine, gang_unavailable=kubegang.API_MISSING)
    if await _topology_dropped(client, namespace or "default"):
        log.warning("%s: jobs that name a schedulingPolicy.topologyKey are held",
                    kubegang.TOPOLOGY_DROPPED)
        return dataclasses.replace(engine, gang_topology_unavailable=kubegang.TOPOLOGY_DROPPED)
    return engine
