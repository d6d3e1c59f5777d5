"""mpi-operator v0.8.2 beside trainop with Volcano's gang scheduling (`--gang-scheduling
volcano`; trainop's `--gang-scheduler-name volcano`): the same v2beta1 manifest in two
namespaces of one API server. No Volcano runs: what each operator makes for the scheduler,
and when, is compared (mpi-operator makes the pods and the launcher Job with the PodGroup,
before any admission), and how each keeps the PodGroup current."""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.differential.test_mpi_operator import (
    differing,
    launcher_job,
    launcher_pod,
    running,
    side_by_side,
    submit,
    told,
    v2beta1_job,
    wait_condition,
)
from tests.integration.kube import Kube, wait_for

pytestmark = pytest.mark.differential
PODGROUPS = "podgroups.scheduling.volcano.sh"
POLICY = {"minAvailable": 2, "queue": "research", "priorityClass": "high"}


@pytest.fixture(scope="module")
def beside(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kube, Kube]]:
    """(mpi-operator's namespace, trainop's), each operator with Volcano's gang."""
    yield from side_by_side(tmp_path_factory.mktemp("mpi-operator-gang"),
                            ["--gang-scheduling", "volcano"],
                            ["--gang-scheduler-name", "volcano"])


def pod_group(kube: Kube, name: str) -> dict[str, Any]:
    """The side's PodGroup as a client compares it: its spec, its owner, its metadata's
    annotations."""
    made = wait_for(f"{kube.ns}'s PodGroup", lambda: kube.get(PODGROUPS, name), 60)
    owner = made["metadata"]["ownerReferences"][0]
    return {"spec": made["spec"], "annotations": made["metadata"].get("annotations"),
            "owner": {k: owner[k] for k in ("apiVersion", "kind", "name", "controller")}}


def scheduling(kube: Kube, pod: str) -> dict[str, Any]:
    """What of a pod the gang scheduler reads: its scheduler, its annotations."""
    made = kube.get("pod", pod)
    return {"schedulerName": made["spec"].get("schedulerName"),
            "annotations": made["metadata"].get("annotations")}


def test_a_gang_job_is_made_at_once_each(beside: tuple[Kube, Kube]) -> None:
    # mpi-operator leaves the gang to the scheduler: no PodGroup phase is waited for
    doc = v2beta1_job("gang")
    doc["metadata"]["annotations"] = {"team": "a"}  # not copied to the PodGroup
    doc["spec"]["runPolicy"] = {"schedulingPolicy": POLICY}
    for side in beside:
        submit(side, doc)
    for side in beside:
        wait_for(f"{side.ns}'s workers, with no admission", lambda s=side: {
            "gang-worker-0", "gang-worker-1"} <= set(s.names("pods")) or None, 60)
    groups = [pod_group(side, "gang") for side in beside]
    assert groups[0] == groups[1], differing(groups[0], groups[1])
    assert groups[1]["spec"] == {"minMember": 2, "queue": "research",
                                 "priorityClassName": "high", "minResources": {}}
    assert groups[1]["annotations"] is None
    for name in ("gang-worker-0", "gang-worker-1"):
        pods = [scheduling(side, name) for side in beside]
        assert pods[0] == pods[1] == {"schedulerName": "volcano", "annotations": {
            "scheduling.k8s.io/group-name": "gang"}}, name
    launchers = [launcher_job(side, "gang") for side in beside]
    assert launchers[0] == launchers[1], differing(launchers[0], launchers[1])


def test_a_changed_scheduling_policy_updates_the_pod_group_each(beside: tuple[Kube, Kube]
                                                                  ) -> None:
    doc = v2beta1_job("policy")
    doc["spec"]["runPolicy"] = {"schedulingPolicy": POLICY}
    for side in beside:
        submit(side, doc)
        pod_group(side, "policy")
    changed = copy.deepcopy(doc)
    changed["spec"]["runPolicy"]["schedulingPolicy"] = {
        **POLICY, "minAvailable": 3, "priorityClass": "low", "minResources": {"cpu": "2"}}
    assert resubmitted(beside, changed) == {"minMember": 3, "queue": "research",
                                            "priorityClassName": "low",
                                            "minResources": {"cpu": "2"}}
    # and a minResources taken away is gone (computed again: none asked for here)
    assert resubmitted(beside, doc) == {"minMember": 2, "queue": "research",
                                        "priorityClassName": "high", "minResources": {}}


def resubmitted(beside: tuple[Kube, Kube], doc: dict[str, Any]) -> dict[str, Any]:
    """`doc` applied again on each side; its PodGroup's spec once both sides updated it
    to the new minMember, the same on each."""
    for side in beside:
        submit(side, doc)
    members = doc["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"]
    name = doc["metadata"]["name"]
    groups = [wait_for(f"{side.ns}'s PodGroup updated", lambda s=side: (
        lambda pg: pg if pg["spec"]["minMember"] == members else None)(pod_group(s, name)),
        30) for side in beside]
    assert groups[0] == groups[1], differing(groups[0], groups[1])
    spec: dict[str, Any] = groups[1]["spec"]
    return spec


def test_a_finished_gang_jobs_pod_group_each(beside: tuple[Kube, Kube]) -> None:
    # kept with the default cleanPodPolicy (None), deleted with one that deletes pods,
    # telling nothing (upstream v1 tells JobTerminated and SuccessfulDeletePodGroup)
    theirs, ours = beside
    for name, policy in (("kept", None), ("cleaned", "Running")):
        doc = v2beta1_job(name)
        doc["spec"]["runPolicy"] = {"schedulingPolicy": POLICY}
        if policy:
            doc["spec"]["runPolicy"]["cleanPodPolicy"] = policy
        for side in beside:
            submit(side, doc)
        for side in beside:
            running(side, name)
            side.set_pod(launcher_pod(side, name) or "", "Succeeded", exit_code=0)
        for side in beside:
            wait_condition(side, name, "Succeeded")
        if policy:
            for side in beside:
                wait_for(f"{side.ns}'s PodGroup deleted", lambda s=side, n=name: s.get(
                    PODGROUPS, n) is None, 30)
        else:
            time.sleep(3)  # a few reconciles after the end
            assert [side.get(PODGROUPS, name) is not None for side in beside] == [True, True]
        assert told(theirs, name) == told(ours, name)
        assert not [e for e in told(ours, name) if "PodGroup" in e[2]]
