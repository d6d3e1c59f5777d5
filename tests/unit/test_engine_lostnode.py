"""Pods on a node that stopped reporting (--lost-node-grace, engine/lostnode.py): told at
once, deleted after the grace, deleted at once with grace 0 only where the node is out of
service, left to the pod garbage collector where the Node is gone."""

from __future__ import annotations

from typing import Any

import pytest

from tests.jobs import job
from tests.sim import T0, Cluster
from tests.unit.test_engine_inplace import PODS, started
from tests.unit.test_engine_inplace import told as attempts_told
from trainop.engine import EngineConfig, ObjectRef, Phase, Waiting, inplace
from trainop.engine import conditions as cond
from trainop.engine.observed import NodeState

LOST = NodeState("n1", "Unknown", "2026-01-01T00:00:00Z")
PREFIX = "node n1 has not been Ready (Unknown) since 2026-01-01T00:00:00Z: "


def running(grace: float | None = 60) -> Cluster:
    """A PyTorchJob of a master and two workers, running, worker 1 on node n1."""
    c = Cluster(job("PyTorchJob", {"Master": 1, "Worker": 2}),
                EngineConfig(lost_node_grace=grace))
    c.step()
    c.all(Phase.RUNNING, node="n0")
    c.set("job-worker-1", node="n1")
    c.step()
    return c


def waiting(c: Cluster) -> list[dict[str, Any]]:
    assert c.job.status is not None
    return [w.to_dict() for w in c.job.status.waiting_replicas or []]


def told(c: Cluster, reason: str = "NodeLost") -> list[tuple[str, str]]:
    return [(e.type, e.message) for e in [*c.plans[-1].events, *c.plans[-1].on_removed]
            if e.reason == reason]


def test_a_pod_on_a_lost_node_is_told_at_once_then_deleted_after_the_grace() -> None:
    c = running()
    c.lost_nodes = (LOST,)
    plan = c.step()
    before = PREFIX + "the pod is deleted 60s after that and made again"
    assert waiting(c) == [{"replicaType": "Worker", "index": 1, "pod": "job-worker-1",
                           "reason": "NodeLost", "message": before,
                           "since": "2026-01-01T00:00:00Z"}]
    assert told(c) == [("Warning", "pod job-worker-1 is on node n1, which has not been Ready "
                        "(Unknown) since 2026-01-01T00:00:00Z: the pod is deleted 60s after "
                        "that and made again")]
    assert plan.delete == [] and plan.requeue_after == 60
    c.advance(45)
    plan = c.step()
    assert told(c) == [] and plan.delete == []  # told once
    assert plan.requeue_after == 15
    c.advance(15)
    plan = c.step()
    # deleted with the pod's own grace: the kubelet, if it comes back, ends it first
    assert plan.delete == [ObjectRef("Pod", "job-worker-1")]
    assert told(c, "SuccessfulDeletePod") == [("Normal", "Deleted pod: job-worker-1")]
    assert c.pods["job-worker-1"].terminating
    assert waiting(c)[0]["message"] == PREFIX + (
        "the pod is being deleted: it is made again once the node's kubelet confirms that, "
        "or once the node is tainted node.kubernetes.io/out-of-service or deleted")
    assert waiting(c)[0]["since"] == "2026-01-01T00:00:00Z"
    # while it is Terminating, nothing is deleted again, and nothing forced
    c.advance(600)
    plan = c.step()
    assert plan.delete == [] and "job-worker-1" not in [
        o["metadata"]["name"] for o in plan.create]
    # an admin says the node is down: the pod goes at once, and is made again
    c.lost_nodes = (NodeState("n1", "Unknown", LOST.since, out_of_service=True),)
    plan = c.step()
    assert plan.delete == [ObjectRef("Pod", "job-worker-1", grace=0)]
    c.lost_nodes = ()
    plan = c.step()
    assert [o["metadata"]["name"] for o in plan.create] == ["job-worker-1"]
    # a disruption, not the job's failure
    assert not cond.is_finished(c.job.status)
    assert c.condition(cond.RESTARTING) is None
    assert c.job.status is not None and c.job.status.replica_statuses is not None
    assert not c.job.status.replica_statuses["Worker"].restarts


def test_an_out_of_service_node_s_pods_are_deleted_at_once_with_grace_0() -> None:
    c = running()
    c.lost_nodes = (NodeState("n1", "False", "2026-01-01T00:00:00Z", out_of_service=True),)
    plan = c.step()
    assert plan.delete == [ObjectRef("Pod", "job-worker-1", grace=0)]
    assert waiting(c)[0]["message"] == (
        "node n1 has not been Ready (False) since 2026-01-01T00:00:00Z: it is tainted "
        "node.kubernetes.io/out-of-service: the pod is deleted at once and made again")
    assert "job-worker-1" not in c.pods


def test_a_pod_whose_node_is_gone_is_left_to_the_pod_garbage_collector() -> None:
    c = running()
    c.lost_nodes = (NodeState("n1", ""),)
    plan = c.step()
    assert plan.delete == []  # not at once either: the garbage collector's to do
    assert waiting(c)[0]["message"] == (
        "node n1 is gone: the pod garbage collector deletes the pod, and it is made again "
        "then")
    assert told(c) == [("Warning", "pod job-worker-1 is on node n1, which is gone: the pod "
                        "garbage collector deletes the pod, and it is made again then")]
    c.advance(3600)
    plan = c.step()
    assert plan.delete == []  # a cache may not show a new Node yet: never forced on that


@pytest.mark.parametrize("grace", [0, 1])
def test_past_the_grace_a_pod_is_deleted_with_its_own_grace_however_short(grace: int) -> None:
    # grace 0 is for out-of-service nodes only: a kubelet that comes back must end the
    # pod's containers before a copy runs elsewhere (two live copies of one rank)
    c = running(grace=grace)
    c.lost_nodes = (LOST,)
    c.advance(5)
    plan = c.step()
    assert plan.delete == [ObjectRef("Pod", "job-worker-1", grace=None)]
    assert c.pods["job-worker-1"].terminating
    c.advance(3600)
    assert c.step().delete == []  # and never forced while it is Terminating


def test_a_node_back_before_the_grace_leaves_its_pods_alone() -> None:
    c = running()
    c.lost_nodes = (LOST,)
    c.step()
    c.advance(30)
    c.lost_nodes = ()
    plan = c.step()
    assert plan.delete == [] and waiting(c) == []
    c.advance(60)
    assert c.step().delete == []


def test_only_live_pods_are_told_and_what_their_kubelet_last_said_is_not() -> None:
    c = running()
    c.set("job-worker-0", node="n1", phase=Phase.SUCCEEDED)
    c.set("job-worker-1", phase=Phase.PENDING,
          waiting=Waiting("ContainerCreating", "creating", "creating"))
    c.lost_nodes = (LOST,)
    c.step()
    assert [(w["pod"], w["reason"]) for w in waiting(c)] == [("job-worker-1", "NodeLost")]


def test_without_the_flag_nodes_change_nothing() -> None:
    c = running(grace=None)
    c.lost_nodes = (NodeState("n1", "Unknown", "2026-01-01T00:00:00Z", out_of_service=True),)
    c.advance(3600)
    plan = c.step()
    assert plan.delete == [] and waiting(c) == [] and told(c) == []
    assert c.now > T0


WHOLE = {"runPolicy": {"restartScope": "Job"}}


def test_a_job_that_restarts_as_a_whole_restarts_as_its_lost_pods_go_uncounted() -> None:
    # its other ranks cannot go on without the lost one: they start again with it
    c = Cluster(job("PyTorchJob", {"Master": 1, "Worker": 2}, spec=WHOLE),
                EngineConfig(lost_node_grace=60))
    c.step()
    c.all(Phase.RUNNING, node="n0")
    c.set("job-worker-1", node="n1")
    c.step()
    c.lost_nodes = (LOST,)
    assert c.step().delete == []  # within the grace: the node may come back
    c.advance(60)
    plan = c.step()
    assert sorted(r.name for r in plan.delete) == ["job-master-0", "job-worker-0",
                                                   "job-worker-1"]
    message = ("PyTorchJob job is restarting because job-worker-1 lost its node (not "
               "counted); all replicas restart.")
    assert (c.condition(cond.RESTARTING).status, c.condition(cond.RESTARTING).message) == (
        "True", message)
    assert told(c, "PyTorchJobRestarting") == [("Warning", message)]
    # the others are made again at once; the lost one once its name is free
    plan = c.step()
    assert sorted(o["metadata"]["name"] for o in plan.create) == ["job-master-0",
                                                                  "job-worker-0"]
    c.all(Phase.RUNNING, rtype="Master", node="n0")
    c.set("job-worker-0", phase=Phase.RUNNING, node="n0")
    plan = c.step()
    assert plan.delete == [] and told(c, "PyTorchJobRestarting") == []  # once
    c.lost_nodes = (NodeState("n1", "Unknown", LOST.since, out_of_service=True),)
    plan = c.step()
    assert plan.delete == [ObjectRef("Pod", "job-worker-1", grace=0)]
    assert told(c, "PyTorchJobRestarting") == []
    c.lost_nodes = ()
    assert [o["metadata"]["name"] for o in c.step().create] == ["job-worker-1"]
    assert c.job.status is not None and c.job.status.last_failure is None
    assert c.job.status.replica_statuses is not None
    assert not any(rs.restarts for rs in c.job.status.replica_statuses.values())


def test_a_job_restarting_in_place_moves_to_its_next_attempt_as_its_lost_pods_go() -> None:
    c = started({"runPolicy": {**WHOLE["runPolicy"], "restartInPlace": True}},
                config=EngineConfig(lost_node_grace=60))
    c.set("job-worker-1", node="n1")
    c.lost_nodes = (NodeState("n1", "Unknown", LOST.since, out_of_service=True),)
    plan = c.step()
    # the lost pod goes at once (out of service), the others stop for attempt 1
    assert plan.delete == [ObjectRef("Pod", "job-worker-1", grace=0)]
    assert attempts_told(plan) == {"job-master-0": ("1", "0"), "job-worker-0": ("1", "0")}
    assert inplace.RESTARTING in [e.reason for e in plan.events]
    c.lost_nodes = ()
    c.in_place.settle()
    plan = c.step()
    # made again for attempt 1, it waits at its barrier with the others; then all start it
    assert [o["metadata"]["name"] for o in plan.create] == ["job-worker-1"]
    assert plan.create[0]["metadata"]["annotations"][inplace.ATTEMPT] == "1"
    c.in_place.settle()
    c.step()
    c.in_place.settle()
    c.step()
    assert c.in_place.running() == dict.fromkeys(PODS, 1)
    assert c.job.status is not None and c.job.status.replica_statuses is not None
    assert not any(rs.restarts for rs in c.job.status.replica_statuses.values())
