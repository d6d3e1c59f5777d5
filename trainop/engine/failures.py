"""What failed pods mean for their job: the failure rules, decided apart from the lifecycle.

`judge` reads the job, its live pods and the restarts its status remembers, and returns
one Judgement (or None when nothing failed): restart some pods, or fail the job, with the
condition's reason and message; `step` carries it out in a round (reconcile.py).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from trainop.api import JobStatus, ReplicaSpec, ReplicaStatus
from trainop.api.resolved import resolve
from trainop.api.types import Defaulted, PodFailurePolicy
from trainop.engine import conditions as cond
from trainop.engine import inplace, podfailure
from trainop.engine.framework import Framework
from trainop.engine.observed import Phase, PodState

if TYPE_CHECKING:
    from trainop.engine.round import Round


class Verdict(enum.Enum):
    RESTART = "restart"
    """Recreate the pod (or every pod, with restartScope Job): the job goes on."""
    FAIL = "fail"
    """The job fails."""
    IGNORE = "ignore"
    """Only failures the pod failure policy ignores: their pods are made again, uncounted."""


def _exit_code_rule(pod: PodState) -> Verdict:
    # 128 and above are signals (OOM 137, SIGTERM 143): retryable; 1-127 are the program's
    # own verdict: permanent. No exit code at all (evicted, lost node): retryable.
    code = pod.exit_code
    return Verdict.RESTART if code is None or code >= 128 else Verdict.FAIL


RULES: dict[str, Callable[[PodState], Verdict]] = {
    "Always": lambda pod: Verdict.RESTART,
    "OnFailure": lambda pod: Verdict.RESTART,  # a pod that still reached Failed: evicted
    "ExitCode": _exit_code_rule,
    "Never": lambda pod: Verdict.FAIL,
}
"""A failed pod's verdict by its replica type's restartPolicy."""


def classify(policy: str, pod: PodState) -> Verdict:
    """Whether a failed pod is restarted or fails the job, by its restart policy."""
    return RULES.get(policy, RULES["Never"])(pod)


@dataclass(frozen=True)
class Failure:
    pod: PodState
    verdict: Verdict

    def describe(self) -> str:
        code = self.pod.exit_code
        what = f"exited with code {code}" if code is not None else "failed"
        reason = f" ({self.pod.reason})" if self.pod.reason else ""
        return f"pod {self.pod.name} {what}{reason}"


@dataclass(frozen=True)
class Judgement:
    verdict: Verdict
    reason: str
    """The condition's reason (Failed or Restarting)."""
    message: str
    """The condition's message: upstream's words, then the facts of the failure."""
    event_message: str = ""
    """The event's message: upstream's words alone, as its event says them (a restart:
    the kind's controller's own event besides pod.go's, if any)."""
    warning: bool = True
    """The event's type (upstream tells some failures as Normal)."""
    first: Failure | None = None
    """The failure that decided it (recorded as status.lastFailure), if a pod failed."""
    restart: tuple[PodState, ...] = ()
    """Pods to delete so that they are made again (RESTART)."""
    recreations: dict[str, int] = field(default_factory=dict)
    """Replica type -> pod recreations this restart adds to its status (RESTART)."""
    whole_job: bool = False
    ignored: tuple[tuple[PodState, str], ...] = ()
    """Failed pods an Ignore rule of the pod failure policy matched, with the rule's words:
    deleted to be made again, counted nowhere (unless the job fails)."""
    by_replicas: bool = False
    """A FAIL because replicas failed for good (not a limit: upstream counts only these as
    failed jobs)."""
    condition_reason: str = ""
    """The Failed condition's reason where it is not the event's (Wording.failed_reason)."""


WHOLE_JOB = "all replicas restart"


def container_restarts(job: Defaulted, pods: list[PodState], rtype: str | None = None) -> int:
    """Restarts in place (OnFailure/Always) of live pods: they count against the limits
    too (upstream rule)."""
    resolved = resolve(job)
    total = 0
    for p in pods:
        if rtype is not None and p.replica_type != rtype:
            continue
        if p.replica_type in resolved.replicas and \
                p.phase in (Phase.RUNNING, Phase.PENDING) and \
                resolved.pod_restart_policy(p.replica_type) in ("OnFailure", "Always"):
            total += p.restarts
    return total


def _last_in_place(live: list[PodState]) -> Failure | None:
    """The pod restarted in place most often, as the failure its last run was (what a
    kubelet under OnFailure reports: the pod Running, the exit in lastState)."""
    # pods still restarting in place, as container_restarts counts them (an ended pod's
    # last run is its final one, not a failure)
    restarted = [p for p in live if p.restarts and p.last_run is not None
                 and p.phase in (Phase.RUNNING, Phase.PENDING)]
    if not restarted:
        return None
    pod = max(restarted, key=lambda p: (p.restarts, -p.index))
    assert pod.last_run is not None
    code, reason = pod.last_run
    return Failure(dataclasses.replace(pod, exit_code=code, reason=reason), Verdict.FAIL)


def earliest(failures: list[Failure]) -> Failure:
    """The failure that came first, where the containers' end times tell (the others are
    usually its victims: peers that lost their connection to it); else the first listed."""
    def when(f: Failure) -> str:
        ended = f.pod.ended
        return ended.finished_at if ended and ended.finished_at else "~"  # after any time
    return min(failures, key=when)


def recreations(status: JobStatus, rtype: str | None = None) -> int:
    """Pod recreations after failures so far, as the job's status remembers them."""
    statuses = status.replica_statuses or {}
    if rtype is not None:
        rs = statuses.get(rtype)
        return (rs.restarts or 0) if rs else 0
    return sum(rs.restarts or 0 for rs in statuses.values())


def judge(job: Defaulted, live: list[PodState], status: JobStatus, fw: Framework[Any],
          policy: PodFailurePolicy | None = None) -> Judgement | None:
    """The verdict on the job's failed pods and limits, in this order: a FailJob rule of
    the pod failure `policy`; restarts in place past backoffLimit; a permanent failure; a
    retryable one past backoffLimit or its type's restartLimit; else a restart (of every
    replica where a RestartJob rule matched). Pods an Ignore rule matched are left out of
    all of it. None when nothing failed. Messages start with upstream's words (the
    framework's); the failure that decided follows."""
    resolved = resolve(job)
    failures = sorted(
        (Failure(p, classify(resolved.restart_policies[p.replica_type], p))
         for p in live if p.phase == Phase.FAILED and resolved.in_spec(p.replica_type, p.index)),
        key=lambda f: (f.pod.replica_type, f.pod.index))
    matches = {f.pod.name: m for f in failures
               if (m := podfailure.match(policy, job.namespace, f.pod)) is not None}
    for f in failures:
        m = matches.get(f.pod.name)
        if m is not None and m.action == "FailJob":
            # the Job API's reason and words, as its Failed condition says them
            return Judgement(Verdict.FAIL, podfailure.REASON, m.why, m.why, True, f,
                             by_replicas=True)
    ignored = tuple((f.pod, matches[f.pod.name].why) for f in failures
                    if matches.get(f.pod.name, _COUNT).action == "Ignore")
    restart_job = any(m.action == "RestartJob" for m in matches.values())
    failures = [Failure(f.pod, Verdict.RESTART)
                if matches.get(f.pod.name, _COUNT).action == "RestartJob" else f
                for f in failures if matches.get(f.pod.name, _COUNT).action != "Ignore"]
    judgement = _judge_counted(job, live, status, fw, failures, restart_job)
    if judgement is None:
        return Judgement(Verdict.IGNORE, "", "", ignored=ignored) if ignored else None
    return dataclasses.replace(judgement, ignored=ignored)


_COUNT = podfailure.Match("Count", -1, "")


def _judge_counted(job: Defaulted, live: list[PodState], status: JobStatus, fw: Framework[Any],
                   failures: list[Failure], restart_job: bool) -> Judgement | None:
    """judge() over the failures that count."""
    title = f"{job.kind} {job.key}"
    # upstream's words (pkg/controller.v1/common/job.go:210); trainop's facts follow them
    backoff = f"Job {job.name} has failed because it has reached the specified backoff limit"
    rp = job.spec.run_policy
    specs: dict[str, ReplicaSpec] = job.spec.replica_specs
    in_place = container_restarts(job, live)
    if rp.backoff_limit is not None and in_place > 0 and (
            in_place >= rp.backoff_limit or rp.backoff_limit == 0):
        last = _last_in_place(live)
        facts = f"; last: {last.describe()}" if last else ""
        # job.go:226: a Normal event of upstream's words
        return Judgement(Verdict.FAIL, f"{job.kind}Failed",
                         f"{backoff} ({rp.backoff_limit}){facts}.", backoff, False, last)

    permanent = _permanent(job, fw, failures)
    if permanent is not None:
        return permanent

    retry = [f for f in failures if f.verdict is Verdict.RESTART]
    if not retry:
        return None
    first = earliest(retry)
    if rp.backoff_limit is not None and \
            recreations(status) + in_place >= rp.backoff_limit:
        return Judgement(Verdict.FAIL, f"{job.kind}Failed",
                         f"{backoff} ({rp.backoff_limit}); last: {first.describe()}.", backoff,
                         False, first)
    for rtype in sorted({f.pod.replica_type for f in retry}):
        limit = specs[rtype].restart_limit
        if limit is not None and \
                recreations(status, rtype) + container_restarts(job, live, rtype) >= limit:
            message = (f"{title} has failed because {rtype} replicas reached their "
                       f"restart limit ({limit}); last: {first.describe()}.")
            return Judgement(Verdict.FAIL, "RestartLimitExceeded", message, message, True,
                             first)

    whole_job = resolve(job).whole_job_restarts or restart_job
    if whole_job:
        bumps = {first.pod.replica_type: 1}
    else:
        bumps = {}
        for f in retry:
            bumps[f.pod.replica_type] = bumps.get(f.pod.replica_type, 0) + 1
    scope = f"; {WHOLE_JOB}" if whole_job else ""
    rtype = retry[0].pod.replica_type
    words = fw.wording.restarting(job, len(retry), rtype)
    return Judgement(
        Verdict.RESTART, f"{job.kind}Restarting",
        f"{words} Last failure: {first.describe()}{scope}.",
        fw.wording.restarting_event(job, len(retry), rtype) or "", True, first,
        restart=tuple(live) if whole_job else tuple(f.pod for f in retry),
        recreations=bumps, whole_job=whole_job)


def _permanent(job: Defaulted, fw: Framework[Any], failures: list[Failure]) -> Judgement | None:
    """The job's failure by replicas that failed for good (of a type whose failure the
    framework does not tolerate), or None."""
    permanent = [f for f in failures if f.verdict is Verdict.FAIL
                 and not fw.tolerates_failure(job, f.pod.replica_type)]
    if not permanent:
        return None
    rtype = permanent[0].pod.replica_type  # upstream's words name the first type
    first = earliest(permanent)
    n = sum(1 for f in permanent if f.pod.replica_type == rtype)
    policy = resolve(job).restart_policies[rtype]
    words = fw.wording.failed(job, n, rtype, policy)
    # ExitCode's permanent failure is pod.go:371's Warning; the rest the controllers'
    # Normal event (e.g. pytorchjob_controller.go:436)
    return Judgement(Verdict.FAIL, f"{job.kind}Failed",
                     f"{words} Last failure: {first.describe()}.", words,
                     policy == "ExitCode", first, by_replicas=True,
                     condition_reason=fw.wording.failed_reason(job))


def step(r: Round) -> bool:
    """Restart or fail as the failure rules judge (`judge`); True when the job stopped or
    restarts (nothing more to create in this round)."""
    policy = r.job.spec.run_policy.pod_failure_policy
    if policy is None and r.config.ignore_disruptions:
        policy = podfailure.IGNORE_DISRUPTIONS
    live = r.observed.live_pods()
    judgement = judge(r.job, live, r.status, r.fw, policy)
    if judgement is None:
        return False
    in_place = r.attempts is not None and inplace.restarts_in_place(r, live)
    if judgement.verdict is not Verdict.FAIL and judgement.ignored:
        # made again, counted nowhere: the pod's end was not the job's doing
        ignored = [pod for pod, _ in judgement.ignored]
        r.acts.delete_pods([p for p in ignored if not (in_place and inplace.alive(p))],
                      "pod failure policy")
        for _, why in judgement.ignored:
            r.report.event(podfailure.REASON, f"{why}: the pod is made again, not counted")
        if in_place and any(inplace.alive(p) for p in ignored):
            inplace.next_attempt(r, live)  # every pod goes on from a new attempt together
    if judgement.verdict is Verdict.IGNORE:
        return True
    if judgement.first is not None:
        r.report.failure(judgement.first)
    if judgement.verdict is Verdict.FAIL:
        if r.report.fail(judgement.reason, judgement.message, judgement.event_message,
                  judgement.warning, judgement.condition_reason) and judgement.by_replicas:
            r.plan.add_metric("failed")  # not a limit's failure (upstream's counters)
        return True
    if in_place and judgement.whole_job:
        inplace.next_attempt(r, live)
    else:
        r.acts.delete_pods(list(judgement.restart), "restarting the whole job"
                      if judgement.whole_job else "restarting")
    statuses = r.status.replica_statuses or {}
    for rtype, n in judgement.recreations.items():
        rs = statuses.setdefault(rtype, ReplicaStatus())
        rs.restarts = (rs.restarts or 0) + n
    r.status.replica_statuses = statuses
    r.plan.add_metric("restarted", sum(judgement.recreations.values()))  # pod.go:366
    r.report.condition(cond.RESTARTING, "True", judgement.reason, judgement.message, tell=False)
    # upstream's two Warnings, on every restart: one per pod it deletes (pod.go:362-364),
    # then its controller's (e.g. pytorchjob_controller.go:431)
    for rtype, n in sorted(judgement.recreations.items()):
        for _ in range(n):
            r.report.event(judgement.reason, f"job {r.job.name} is restarting because "
                                      f"{rtype} replica(s) failed.", warning=True)
    if judgement.event_message:
        r.report.event(judgement.reason, judgement.event_message, warning=True)
    return True
