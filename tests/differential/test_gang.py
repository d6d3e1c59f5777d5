"""Gang scheduling side by side: upstream and trainop, each run with
--gang-scheduler-name (Volcano's PodGroup, or scheduler-plugins' for any other name),
given the same jobs; the gang scheduler itself is played by the test (it sets the
PodGroup's phase as Volcano would)."""

from __future__ import annotations

import copy
from collections.abc import Iterator

import pytest

from testbed.apiserver import TestAPIServer
from testbed.upstream import UpstreamOperator
from tests.differential.conftest import flags, new_sides, start_trainop, start_upstream
from tests.differential.peers import VARIANTS, Sides
from tests.differential.test_side_by_side import check, job, never, submit
from tests.integration.kube import Manager

pytestmark = pytest.mark.differential

Gang = tuple[str, tuple[TestAPIServer, UpstreamOperator],
             dict[str, tuple[TestAPIServer, Manager]]]
"""The gang scheduler's name, upstream and each trainop run, each with its API server."""
POLICY = {"minAvailable": 3, "queue": "research", "priorityClass": "high"}


@pytest.fixture(scope="module", params=["volcano", "scheduler-plugins-scheduler"])
def gang(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[Gang]:
    name = request.param
    logs = tmp_path_factory.mktemp(f"gang-{name}")
    up = start_upstream(logs, "--gang-scheduler-name", name)
    ours = {v: start_trainop(logs / v, "--gang-scheduler-name", name, *flags(v))
            for v in VARIANTS}
    upstream = next(up)
    trainops = {v: next(it) for v, it in ours.items()}
    try:
        yield name, upstream, trainops
    finally:
        for started in (*ours.values(), up):
            started.close()


@pytest.fixture
def sides(request: pytest.FixtureRequest, gang: Gang) -> Sides:
    """The module's sides, in a namespace of this test's own."""
    _, upstream, trainops = gang
    return new_sides(request.node, upstream, trainops)


def admit(sides: Sides) -> None:
    """Volcano admits the gang (scheduler-plugins' PodGroup has no phase to wait for)."""
    for side in sides.sides:
        side.kube.api.kubectl("patch", "podgroups.scheduling.volcano.sh", "job", "-n",
                              side.kube.ns, "--subresource=status", "--type=merge", "-p",
                              '{"status": {"phase": "Inqueue"}}', check=False)


def admitted_and_running(sides: Sides, doc: dict[str, object]) -> list[str]:
    submit(sides, doc)
    found = sides.compare("PyTorchJob", "created")
    admit(sides)
    found += sides.compare("PyTorchJob", "admitted")
    sides.set_all("Running")
    return found + sides.compare("PyTorchJob", "running")


def test_a_gang_job_gets_its_pod_group_and_runs(sides: Sides) -> None:
    found = admitted_and_running(sides, job("PyTorchJob", spec={"runPolicy": {
        "schedulingPolicy": POLICY}}))
    sides.set_all("Succeeded", exit_code=0)
    found += sides.compare("PyTorchJob", "succeeded")
    check(sides, found)


def test_a_gang_job_that_fails(sides: Sides) -> None:
    found = admitted_and_running(sides, job("PyTorchJob", replica_extra=never("PyTorchJob"),
                                            spec={"runPolicy": {"schedulingPolicy": POLICY}}))
    sides.set_pod("job-worker-1", "Failed", exit_code=3)
    found += sides.compare("PyTorchJob", "failed")
    check(sides, found)


def test_a_gang_job_suspended_and_resumed(sides: Sides) -> None:
    doc = job("PyTorchJob", spec={"runPolicy": {"schedulingPolicy": POLICY}})
    found = admitted_and_running(sides, doc)
    paused = copy.deepcopy(doc)
    paused["spec"]["runPolicy"]["suspend"] = True
    submit(sides, paused)
    found += sides.compare("PyTorchJob", "suspended")
    submit(sides, doc)
    found += sides.compare("PyTorchJob", "resumed")
    check(sides, found)


def test_a_gang_job_with_min_resources(sides: Sides) -> None:
    policy = {**POLICY, "minResources": {"cpu": "3", "memory": "1Gi"}}
    submit(sides, job("PyTorchJob", spec={"runPolicy": {"schedulingPolicy": policy}}))
    check(sides, sides.compare("PyTorchJob", "created"))


def test_a_gang_jobs_changed_policy_updates_its_pod_group(sides: Sides) -> None:
    # upstream writes the PodGroup's spec again on every reconcile (SyncPodGroup); a
    # changed minimum, priority and minResources reach it (the queue may not change: both
    # webhooks refuse it)
    doc = job("PyTorchJob", spec={"runPolicy": {"schedulingPolicy": POLICY}})
    found = admitted_and_running(sides, doc)
    changed = copy.deepcopy(doc)
    changed["spec"]["runPolicy"]["schedulingPolicy"] = {
        **POLICY, "minAvailable": 2, "priorityClass": "low", "scheduleTimeoutSeconds": 30,
        "minResources": {"cpu": "2"}}
    submit(sides, changed)
    found += sides.compare("PyTorchJob", "changed")
    check(sides, found)
