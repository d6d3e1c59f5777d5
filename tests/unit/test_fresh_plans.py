"""The whole first plan of a fresh job of each kind, as a reader would want to see it: every
object with its labels, environment and ports, the events and the status. The expected
plans are files in tests/unit/plans/ (one per kind); a change of behaviour shows there as a
diff. After a deliberate change, rewrite them with TRAINOP_WRITE_PLANS=1 and read the diff."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.jobs import TYPICAL, job
from tests.sim import T0
from trainop.api import KINDS
from trainop.engine import ClusterAddressing, Observed, Plan, SSHKeyPair, reconcile
from trainop.frameworks import framework_for

PLANS = Path(__file__).parent / "plans"


class _Plain(yaml.SafeDumper):
    """Every object written out in full, no `&id001` anchors: a plan is read by people."""

    def ignore_aliases(self, data: Any) -> bool:
        return True

KEY = SSHKeyPair("-----BEGIN OPENSSH PRIVATE KEY-----\ntest\n", "ssh-ed25519 AAAA test")


def as_data(plan: Plan) -> dict[str, Any]:
    return {
        "prerequisites": plan.prerequisites,
        "create": plan.create,
        "update": plan.update,
        "delete": [dataclasses.asdict(r) for r in plan.delete],
        "events": [dataclasses.asdict(e) for e in plan.events],
        "on_created": [dataclasses.asdict(e) for e in plan.on_created],
        "status": plan.status.to_dict(),
        "transitions": plan.transitions,
        "requeue_after": plan.requeue_after,
    }


@pytest.mark.parametrize("kind", sorted(KINDS), ids=sorted(KINDS))
def test_the_first_plan_of_a_fresh_job(kind: str) -> None:
    plan = reconcile(job(kind, TYPICAL[kind]), Observed(ssh_key=KEY), T0, framework_for(kind),
                     ClusterAddressing())
    text = yaml.dump(as_data(plan), Dumper=_Plain, sort_keys=False, width=100)
    path = PLANS / f"{kind}.yaml"
    if os.environ.get("TRAINOP_WRITE_PLANS"):
        path.write_text(text)
    assert path.read_text() == text, f"the plan of a fresh {kind} changed: see {path}"
