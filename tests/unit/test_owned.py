"""What a kind owns is stated once (Framework.owned): every object its plans make is of a
resource stated there (or a pod, a service, the gang scheduler's PodGroup), the manager's
caches watch exactly those, and the shipped RBAC lets the manager write them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.jobs import TYPICAL, job
from tests.sim import Cluster
from trainop.api import KINDS
from trainop.api.resources import (
    GANG_PODGROUPS,
    GANG_WORKLOADS,
    OWNED,
    PLUGINS_PODGROUPS,
    PODS,
    SERVICES,
    VOLCANO_PODGROUPS,
)
from trainop.engine import EngineConfig, gang
from trainop.engine.objects import KEPT_CURRENT
from trainop.frameworks import framework_for

REPO = Path(__file__).resolve().parents[2]
METRICS = [{"type": "Resource", "resource": {"name": "cpu", "target": {
    "type": "Utilization", "averageUtilization": 80}}}]
JOBS: list[tuple[str, dict[str, Any]]] = [
    *((kind, {}) for kind in TYPICAL),
    ("MPIJob", {"transport": "SSH"}),
    ("PyTorchJob", {"elasticPolicy": {"minReplicas": 1, "maxReplicas": 3, "metrics": METRICS}}),
    ("PaddleJob", {"elasticPolicy": {"minReplicas": 1, "maxReplicas": 3, "metrics": METRICS}}),
]


def made(kind: str, spec: dict[str, Any], config: EngineConfig) -> set[tuple[str, str]]:
    """(apiVersion, kind) of every object the job's plans make as it starts and runs."""
    c = Cluster(job(kind, spec=spec), config)
    c.step()
    c.all("Running")
    c.step()
    return {(o["apiVersion"], o["kind"]) for o in c.created.values()}


@pytest.mark.parametrize(("kind", "spec"), JOBS, ids=[f"{k}-{sorted(s)}" for k, s in JOBS])
@pytest.mark.parametrize("scheduler", [None, "volcano"])
def test_every_object_a_plan_makes_is_of_a_resource_its_kind_owns(
        kind: str, spec: dict[str, Any], scheduler: str | None) -> None:
    config = EngineConfig(gang_scheduler=scheduler)
    owned = {PODS, SERVICES, *framework_for(kind).owned}
    if scheduler:
        owned.add(gang.podgroups(config))
    stated = {(r.api_version, r.kind) for r in owned}
    objects = made(kind, spec, config)
    assert objects <= stated, objects - stated
    assert all(o in OWNED for o in objects)


def test_the_cluster_role_lets_the_manager_keep_every_owned_resource() -> None:
    """Watched and made (the caches list and watch what a kind owns), kept current where the
    engine patches (objects.KEPT_CURRENT), deleted where it deletes (a launcher's grants)."""
    role = yaml.safe_load((REPO / "config/rbac/cluster/role.yaml").read_text())
    granted = {(group, resource, verb) for rule in role["rules"]
               for group in rule["apiGroups"] for resource in rule["resources"]
               for verb in rule["verbs"]}
    plugins = [framework_for(kind) for kind in KINDS]
    wanted = {(r, verb) for r in (PODS, SERVICES, VOLCANO_PODGROUPS, PLUGINS_PODGROUPS,
                                  *(r for fw in plugins for r in fw.owned))
              for verb in ("list", "watch", "create")}
    wanted |= {(r, "patch") for fw in plugins for r in fw.owned if r.kind in KEPT_CURRENT}
    wanted |= {(r, "delete") for fw in plugins if fw.launcher for r in fw.launcher.grants}
    wanted.add((PODS, "patch"))  # told their attempts, where they restart in place
    # Kubernetes' own gang: made, its minCount kept current, deleted with a finished job
    wanted |= {(r, verb) for r in (GANG_WORKLOADS, GANG_PODGROUPS)
               for verb in ("list", "watch", "create", "patch", "delete")}
    missing = sorted(f"{verb} {r.plural}" for r, verb in wanted
                     if (r.group, r.plural, verb) not in granted)
    assert not missing
