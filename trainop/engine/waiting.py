"""Replicas that have not started, and why: `status.waitingReplicas`, the events that tell
of each cause once, and `runPolicy.startupDeadlineSeconds`."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from trainop.api import Job, WaitingReplica
from trainop.api.resolved import resolve
from trainop.api.types import Defaulted
from trainop.engine import clock, lostnode
from trainop.engine.labels import replica_name
from trainop.engine.observed import Held, Observed, Phase, PodState
from trainop.engine.plan import Event

if TYPE_CHECKING:
    from trainop.engine.round import Round

NAME_IN_USE = "NameInUse"
"""The reason of a replica whose name an object of an earlier job still holds."""
STARTUP_DEADLINE = "StartupDeadlineExceeded"
SAME_CAUSE = {"ImagePullBackOff": "ErrImagePull"}
"""Reasons the kubelet alternates between for one cause: told once, `since` kept."""


def not_ours(kind: str, name: str) -> str:
    """Why a job cannot run when an object it needs is someone else's for good."""
    return f"{kind} {name} already exists and is not controlled by this job (delete or rename it)"


@dataclass
class Survey:
    entries: list[WaitingReplica] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    """A Warning (Normal for NameInUse) per replica and reason not waiting so before: told
    once, where upstream tells its words again on every reconcile."""
    overdue: PodState | None = None
    """A pod past the startup deadline (the one made first)."""
    next_look: float | None = None
    """Seconds until the next deadline or look at a held name."""


def survey(job: Defaulted, observed: Observed, before: list[WaitingReplica] | None,
           now: dt.datetime, lost: Iterable[lostnode.Told] = ()) -> Survey:
    """The replicas of `job` that wait, with what `before` (the stored status) had of them;
    `lost`: its pods on nodes that stopped reporting (what their kubelet last said of them
    is not told)."""
    out = Survey()
    since = {(w.pod, SAME_CAUSE.get(w.reason, w.reason)): w.since for w in before or []}
    stamp = clock.fmt(now)

    def wait(rtype: str, index: int, pod: str, reason: str, message: str,
             event_message: str) -> None:
        cause = (pod, SAME_CAUSE.get(reason, reason))
        out.entries.append(WaitingReplica(replica_type=rtype, index=index, pod=pod,
                                          reason=reason, message=message,
                                          since=since.get(cause, stamp)))
        if cause not in since:
            out.events.append(Event("Normal" if reason == NAME_IN_USE else "Warning", reason,
                                  event_message))

    resolved = resolve(job)
    lost = [t for t in lost if resolved.in_spec(t.pod.replica_type, t.pod.index)]
    on_lost_nodes = {t.pod.name for t in lost}
    pending = [p for p in observed.pods if p.phase == Phase.PENDING and not p.terminating
               and resolved.in_spec(p.replica_type, p.index)]
    for p in sorted(pending, key=lambda p: (p.replica_type, p.index)):
        if p.waiting is not None and p.name not in on_lost_nodes:
            wait(p.replica_type, p.index, p.name, *p.waiting)
    for t in lost:
        wait(t.pod.replica_type, t.pod.index, t.pod.name, lostnode.REASON, t.message,
             t.event_message)
    if observed.held:
        _held(job, observed.held, out, wait)
    limit = job.spec.run_policy.startup_deadline_seconds
    if limit is not None:
        for p in sorted(pending, key=lambda p: p.created or ""):
            if p.created is None:
                continue
            left = limit - (now - clock.parse(p.created)).total_seconds()
            if left <= 0:
                out.overdue = out.overdue or p
            else:
                out.next_look = left if out.next_look is None else min(out.next_look, left)
    return out


def _held(job: Defaulted, held: tuple[Held, ...], out: Survey,
          wait: Callable[[str, int, str, str, str, str], None]) -> None:
    # a replica's pod and service share the name: one that is going is named (it is what
    # holds the replica back, as objects.missing decides), the pod before the service
    by_name = {h.name: h for h in sorted(held, key=lambda h: (h.going(job.kind, job.name),
                                                              h.kind == "Pod"))}
    for rtype, index in resolve(job).slots():
        h = by_name.get(replica_name(job, rtype, index))
        # one that is not going is the API server's to refuse (a cache can lag behind a
        # deletion)
        if h is None or not h.going(job.kind, job.name):
            continue
        if h.owner_kind == job.kind and h.owner_name == job.name:
            why = f"{h.kind} {h.name} of an earlier {job.kind} {job.name} is still there"
        else:
            why = f"{h.described()} is being deleted"
        message = f"{why}; it is made once that is gone"
        wait(rtype, index, h.name, NAME_IN_USE, message, f"pod {h.name} is waiting: {message}")
        out.next_look = h.look_again if out.next_look is None else min(out.next_look,
                                                                        h.look_again)


def overdue_message(job: Job, pod: PodState) -> str:
    limit = job.spec.run_policy.startup_deadline_seconds
    words = f"{job.kind} {job.name} has failed because pod {pod.name} did not start within " \
            f"{limit}s"
    if pod.waiting is not None:
        return f"{words} ({pod.waiting.reason}: {pod.waiting.message})."
    return f"{words}."


def step(r: Round) -> bool:
    """Say which replicas wait and why (status.waitingReplicas, an event per new cause);
    True when that fails the job: a pod past runPolicy.startupDeadlineSeconds."""
    found = survey(r.job, r.observed, r.status.waiting_replicas, r.now_dt, r.lost.told)
    r.status.waiting_replicas = found.entries or None
    r.plan.events.extend(found.events)
    if found.overdue is not None:
        r.report.fail(STARTUP_DEADLINE, overdue_message(r.job, found.overdue))
        return True
    if found.next_look is not None:
        r.plan.requeue(found.next_look)
    return False
