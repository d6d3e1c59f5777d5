"""Pods on a node that stopped reporting (--lost-node-grace): told at once, deleted after the
grace so that they are made again elsewhere, and never two live copies of one rank.

Kubernetes' rules, which this keeps:

- A pod is gone once its kubelet confirmed that its containers ended, or once it is
  force-deleted. A graceful delete of a pod whose node does not answer leaves it
  Terminating: its name (fixed, as every replica's) stays held and no copy is made.
- Force-deleting is safe only where the node is known to run nothing: the taint
  node.kubernetes.io/out-of-service on a node that is not Ready (put by whoever knows the
  node is down: Kubernetes' non-graceful node shutdown). kube-controller-manager's pod
  garbage collector force-deletes such pods too, and those of a Node object that is gone
  (once it has read the Node from the API server, not a cache).

So: each pod on a node that is not Ready (or gone) is told at once (status.waitingReplicas
reason NodeLost, and a Warning); once the node has not been Ready for the grace, the pod is
deleted with its own grace period (a kubelet that comes back ends its containers first); on
an out-of-service node it is deleted with grace 0 at once; a pod whose Node is gone is left
to the pod garbage collector. Nothing else is ever force-deleted. Once a pod is gone it is
made again under the job's rules, as a pod the cluster took away: not the job's failure (a
job that restarts as a whole restarts as such pods are deleted, uncounted: `step`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from trainop.engine import clock, failures, inplace
from trainop.engine import conditions as cond
from trainop.engine.observed import LIVE_PHASES, NodeState, PodState
from trainop.engine.plan import shown

if TYPE_CHECKING:
    from trainop.engine.round import Round

REASON = "NodeLost"
OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"


@dataclass(frozen=True)
class Told:
    """A pod on a lost node, as status.waitingReplicas and its Warning say it."""

    pod: PodState
    message: str
    event_message: str


@dataclass
class Decision:
    told: list[Told] = field(default_factory=list)
    delete: list[PodState] = field(default_factory=list)
    """Deleted with the pod's own grace period (their node has not been Ready for the grace)."""
    force: list[PodState] = field(default_factory=list)
    """Deleted with grace 0 (their node is out of service)."""
    next_look: float | None = None
    """Seconds until the next pod's grace runs out."""


def decide(pods: Iterable[PodState], nodes: Iterable[NodeState], grace: float,
           now: dt.datetime) -> Decision:
    """What becomes of the live pods of `pods` that are on one of the lost `nodes`."""
    lost = {n.name: n for n in nodes}
    out = Decision()
    for p in sorted(pods, key=lambda p: (p.replica_type, p.index)):
        node = lost.get(p.node) if p.node else None
        if node is None or p.phase not in LIVE_PHASES:
            continue
        if not node.ready:
            state = "is gone"
            what = "the pod garbage collector deletes the pod, and it is made again then"
        else:
            state = f"has not been Ready ({node.ready}) since {node.since or 'a moment'}"
            if node.out_of_service:
                what = f"it is tainted {OUT_OF_SERVICE}: the pod is deleted at once and made " \
                       "again"
                out.force.append(p)
            else:
                # a node whose condition tells no time has been lost for as long as it takes
                gone_for = grace if node.since is None else \
                    (now - clock.parse(node.since)).total_seconds()
                if p.terminating or gone_for >= grace:
                    what = ("the pod is being deleted: it is made again once the node's "
                            "kubelet confirms that, or once the node is tainted "
                            f"{OUT_OF_SERVICE} or deleted")
                    if not p.terminating:
                        out.delete.append(p)
                else:
                    what = f"the pod is deleted {grace:g}s after that and made again"
                    left = grace - gone_for
                    out.next_look = left if out.next_look is None else min(out.next_look, left)
        out.told.append(Told(p, f"node {node.name} {state}: {what}",
                             f"pod {p.name} is on node {node.name}, which {state}: {what}"))
    return out


def step(r: Round) -> bool:
    """The round's step for pods on nodes that stopped reporting (--lost-node-grace):
    deleted once the grace ran out, at once where the node is out of service (told in
    waiting.step). A job that restarts as a whole (restartScope: Job) restarts as the pods
    go, uncounted: its other ranks cannot go on without the lost ones (True then: the
    round ends)."""
    grace = r.config.lost_node_grace
    if grace is None or not r.observed.lost_nodes:
        return False
    r.lost = decide(r.observed.pods, r.observed.lost_nodes, grace, r.now_dt)
    r.acts.delete_pods(r.lost.delete, "node lost")
    r.acts.delete_pods(r.lost.force, "node out of service", force=True)
    if r.lost.next_look is not None:
        r.plan.requeue(r.lost.next_look)
    # (a pod deleted before is Terminating, or gone: its job restarted then)
    going = [p for p in r.lost.delete + r.lost.force if not p.terminating]
    if not going or not r.resolved.whole_job_restarts:
        return False
    names = {p.name for p in going}
    others = [p for p in r.observed.live_pods() if p.name not in names]
    message = (f"{r.job.kind} {r.job.name} is restarting because "
               f"{shown(p.name for p in going)} lost {'its' if len(going) == 1 else 'their'}"
               f" node (not counted); {failures.WHOLE_JOB}.")
    if r.attempts is not None and inplace.restarts_in_place(r, others):
        inplace.next_attempt(r, others)  # the lost pods are made again for it, at the barrier
    else:
        r.acts.delete_pods(others, "restarting the whole job")
    r.report.condition(cond.RESTARTING, "True", f"{r.job.kind}Restarting", message, tell=False)
    r.report.event(f"{r.job.kind}Restarting", message, warning=True)
    return True
