"""Kubernetes' own gang on the real cluster (kube-scheduler's gang and topology plugins,
GenericWorkload on): a gang that does not fit binds no pod where a job without one binds
what fits and waits; two gangs for too few slots run one after the other where two jobs
without one each half-start and stall; the topology key keeps a gang in one rack; suspend,
resume and deletion leave what they should.

Slots are an extended resource the test gives the nodes (`example.com/slot`), so that what
fits does not hang on the host's CPUs; each rank takes one and ends once every rank of its
job runs (ranks that cannot all start wait, as collective training does)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testbed.apiserver import release, serves_workload_api
from testbed.node import NODE_NAME, SECOND_NODE, TestCluster
from tests.node.conftest import manager_as_shipped, manager_with
from tests.node.kube import Namespace, python_job, state_folder, wait_for

pytestmark = [pytest.mark.node, pytest.mark.skipif(
    not serves_workload_api(), reason=f"Kubernetes {release()} has no Workload API (1.37+)")]

GROUPS = "podgroups.scheduling.k8s.io"
GANGS = "workloads.scheduling.k8s.io"
SLOT = "example.com/slot"
HOLD = "example.com/hold"
RACK = "example.com/rack"
# A rank notes that it runs, and ends once the job's three ranks have.
SCRIPT = ("import os, sys, time\n"
          "from pathlib import Path\n"
          "state = Path('/state')\n"
          "me = os.environ['HOSTNAME']\n"
          "job = me.rsplit('-worker-', 1)[0]\n"
          "(state / me).touch()\n"
          "deadline = time.time() + 600\n"
          "while len(list(state.glob(job + '-worker-*'))) < 3:\n"
          "    if time.time() > deadline:\n"
          "        sys.exit(3)\n"
          "    time.sleep(0.2)\n")


def give_slots(cluster: TestCluster, node: str, count: int | None) -> None:
    """Advertise `count` slots on `node` (None: none), as its capacity and allocatable (the
    kubelet keeps an extended resource it does not manage)."""
    key = SLOT.replace("/", "~1")
    patch = [{"op": "add", "path": f"/status/{field}/{key}", "value": str(count)}
             for field in ("capacity", "allocatable")] if count is not None else [
        {"op": "remove", "path": f"/status/{field}/{key}"}
        for field in ("capacity", "allocatable")]
    cluster.kubectl("patch", "node", node, "--subresource=status", "--type=json",
                    "-p", json.dumps(patch), check=count is not None)


def ranks(name: str, state: Path, gated: bool = False,
          policy: dict[str, Any] | None = None) -> dict[str, Any]:
    """A job of three ranks, each taking a slot (and held by a scheduling gate where
    `gated`, until the test lets it go)."""
    job = python_job("TFJob", name, {"Worker": 3}, SCRIPT, spec={"runPolicy": {
        "cleanPodPolicy": "None", **({"schedulingPolicy": policy} if policy else {})}})
    spec = job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]
    spec["volumes"].append({"name": "state", "hostPath": {"path": str(state)}})
    main = spec["containers"][0]
    main["volumeMounts"].append({"name": "state", "mountPath": "/state"})
    main["resources"] = {"limits": {SLOT: "1"}}
    if gated:
        spec["schedulingGates"] = [{"name": HOLD}]
    return job


def bound(ns: Namespace, job: str) -> list[str]:
    """The job's pods the scheduler has bound to a node."""
    return sorted(p["metadata"]["name"] for p in ns.items("pods", f"training.kubeflow.org/"
                                                                   f"job-name={job}")
                  if p["spec"].get("nodeName"))


def gang(ns: Namespace, job: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The job's Workload and PodGroup (None where there is none)."""
    return ns.get(GANGS, job), ns.get(GROUPS, job)


def release(ns: Namespace, *pods: str) -> None:
    """Take the scheduling gate off `pods`, in this order."""
    for name in pods:
        wait_for(f"pod {name}", lambda n=name: ns.get("pod", n), 60)  # type: ignore[misc]
        ns.kubectl("patch", "pod", name, "--type=json", "-p",
                   '[{"op": "remove", "path": "/spec/schedulingGates"}]')


INTERLEAVED = ("a-worker-0", "b-worker-0", "a-worker-1", "b-worker-1", "a-worker-2",
               "b-worker-2")
"""Two jobs' pods as they reach the scheduler when both are made at the same moment."""


@pytest.fixture
def slots(cluster: TestCluster) -> Iterator[None]:
    try:
        yield
    finally:
        give_slots(cluster, NODE_NAME, None)


def test_without_a_gang_jobs_half_start_and_stall(cluster: TestCluster, manager: None,
                                                  slots: None) -> None:
    # the shipped manager gangs nothing
    give_slots(cluster, NODE_NAME, 2)
    with Namespace(cluster, "loose") as ns:
        state = state_folder(cluster, ns)
        ns.apply(ranks("one", state))
        wait_for("two of three bound", lambda: len(bound(ns, "one")) == 2 or None)
        ns.wait_running(2)
        time.sleep(5)
        assert len(bound(ns, "one")) == 2  # the third waits for a slot; the two hold theirs
        ns.kubectl("delete", "tfjob", "one", "--wait=true")
        wait_for("the pods gone", lambda: ns.items("pods") == [] or None)
        # two jobs of three, for four slots, made at the same moment: each gets two
        give_slots(cluster, NODE_NAME, 4)
        ns.apply(ranks("a", state, gated=True), ranks("b", state, gated=True))
        release(ns, *INTERLEAVED)
        ns.wait_running(4)
        time.sleep(10)
        assert (bound(ns, "a"), bound(ns, "b")) == (["a-worker-0", "a-worker-1"],
                                                    ["b-worker-0", "b-worker-1"])
        for name in ("a", "b"):  # stalled: neither can end
            job = ns.get("tfjob", name) or {}
            assert "Succeeded" not in {c["type"] for c in job["status"]["conditions"]}


@pytest.fixture(scope="module")
def gang_manager(cluster: TestCluster, manager: None) -> Iterator[None]:
    """The deployed manager with --gang-scheduler-name=workload-api."""
    manager_with(cluster, "--gang-scheduler-name=workload-api")
    try:
        yield
    finally:
        manager_as_shipped(cluster)


def test_a_gang_binds_all_or_none_and_gangs_run_one_after_the_other(
        cluster: TestCluster, gang_manager: None, slots: None) -> None:
    give_slots(cluster, NODE_NAME, 2)
    with Namespace(cluster, "gang") as ns:
        state = state_folder(cluster, ns)
        ns.apply(ranks("one", state))
        unschedulable = wait_for("the group found unschedulable", lambda: next((
            c for c in (ns.get(GROUPS, "one") or {}).get(
                "status", {}).get("conditions", [])
            if c["type"] == "PodGroupInitiallyScheduled" and c["status"] == "False"), None))
        assert unschedulable["reason"] == "Unschedulable"
        time.sleep(5)
        assert len(ns.items("pods")) == 3 and bound(ns, "one") == []  # none holds a slot
        give_slots(cluster, NODE_NAME, 3)  # room for the gang: it binds, and runs to the end
        ns.succeeds("TFJob", "one", timeout=180)
        ns.kubectl("delete", "tfjob", "one", "--wait=true")
        # two gangs of three, for four slots, made at the same moment: one runs, then the
        # other; no pod of the second holds a slot while the first runs
        give_slots(cluster, NODE_NAME, 4)
        ns.apply(ranks("a", state, gated=True), ranks("b", state, gated=True))
        release(ns, *INTERLEAVED[:4])
        time.sleep(5)
        assert bound(ns, "a") == bound(ns, "b") == []  # neither gang is whole yet
        release(ns, *INTERLEAVED[4:])
        wait_for("a bound", lambda: len(bound(ns, "a")) == 3 or None)
        assert bound(ns, "b") == []
        ns.succeeds("TFJob", "a", timeout=180)
        ns.succeeds("TFJob", "b", timeout=180)


def test_the_gang_goes_and_comes_back_with_suspend_and_is_deleted_with_the_job(
        cluster: TestCluster, gang_manager: None, slots: None) -> None:
    give_slots(cluster, NODE_NAME, 3)
    with Namespace(cluster, "gang-life") as ns:
        state = state_folder(cluster, ns)
        ns.apply(ranks("one", state, gated=True))  # its ranks wait, so that it can be suspended
        wait_for("the gang", lambda: all(gang(ns, "one")) or None)
        ns.kubectl("patch", "tfjob", "one", "--type=merge", "-p",
                   '{"spec": {"runPolicy": {"suspend": true}}}')
        # the pods go, and the group with them (its protection lets it go once no pod names
        # it); the Workload at once
        wait_for("the gang gone", lambda: (ns.items("pods") == [] and gang(ns, "one") == (
            None, None)) or None, 60)
        ns.kubectl("patch", "tfjob", "one", "--type=merge", "-p",
                   '{"spec": {"runPolicy": {"suspend": false}}}')
        wait_for("the gang back", lambda: all(gang(ns, "one")) or None, 60)
        release(ns, "one-worker-0", "one-worker-1", "one-worker-2")
        ns.succeeds("TFJob", "one", timeout=180)
        # deleted: the garbage collector takes the gang with the job
        ns.kubectl("delete", "tfjob", "one", "--wait=true")
        wait_for("nothing left", lambda: gang(ns, "one") == (None, None) or None, 60)


def test_the_topology_key_keeps_the_gang_in_one_rack(cluster: TestCluster,
                                                     gang_manager: None, slots: None) -> None:
    cluster.start_second_node()
    try:
        # rack a has one slot, rack b two: two ranks fit only in rack b, though each
        # alone would fit in either
        for node, rack, count in ((NODE_NAME, "a", 1), (SECOND_NODE, "b", 2)):
            cluster.kubectl("label", "node", node, f"{RACK}={rack}", "--overwrite")
            give_slots(cluster, node, count)
        with Namespace(cluster, "rack") as ns:
            job = ranks("one", state_folder(cluster, ns), policy={"topologyKey": RACK})
            job["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = 2
            ns.apply(job)
            wait_for("both bound", lambda: len(bound(ns, "one")) == 2 or None)
            assert {p["spec"]["nodeName"] for p in ns.items("pods")} == {SECOND_NODE}
    finally:
        cluster.kubectl("label", "node", NODE_NAME, f"{RACK}-", check=False)
        cluster.remove_second_node()
