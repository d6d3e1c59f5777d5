"""What happens to a job outside a reconcile, decided here all the same: a job that cannot
be parsed, an object the API server refuses for good, a new job whose objects cannot be
made yet. Each returns a Plan, which the runtime applies like any other."""

from __future__ import annotations

import datetime as dt

from trainop.api import JobStatus
from trainop.engine import clock
from trainop.engine import conditions as cond
from trainop.engine.plan import Event, Plan


def rejected(status: JobStatus, kind: str, key: str, problems: str,
             now: dt.datetime) -> Plan:
    """A job that got past the schema but cannot run: Failed (InvalidSpec), once, on its
    stored `status`."""
    plan = Plan(status=status.model_copy(deep=True))
    _fail(plan, "InvalidSpec", f"{kind} {key} is invalid: {problems}", now)
    return plan


def create_refused(plan: Plan, kind: str, key: str, why: str, now: dt.datetime) -> Plan:
    """`plan` after the API server refused one of its objects for good (a template it
    rejects, a name taken by someone else's object): the job is Failed (CreateFailed), and
    nothing says its pods were created. It is decided again at once: that round cleans up
    what was made and waits for the TTL, as every finished job's does."""
    out = Plan(status=plan.status.model_copy(deep=True), events=list(plan.events),
               transitions=list(plan.transitions), status_changed=plan.status_changed,
               requeue_after=0,
               metrics={k: n for k, n in plan.metrics.items() if k == "created"})
    _fail(out, "CreateFailed", f"{kind} {key} cannot run: {why}", now)
    return out


def created_only(plan: Plan, stored: JobStatus, now: dt.datetime) -> Plan | None:
    """For a new job whose objects cannot be made yet (a quota, throttling): only the
    Created condition of `plan`, set on the `stored` status, as upstream shows such a job.
    The rest of the plan's status (restarts, say) waits until its writes are done. None
    when `plan` does not make the job Created."""
    created = cond.get(plan.status, cond.CREATED)
    if cond.CREATED not in plan.transitions or created is None:
        return None
    out = Plan(status=stored.model_copy(deep=True))
    reason, message = created.reason or "", created.message or ""
    if out.set_condition(cond.CREATED, "True", reason, message, clock.fmt(now)):
        out.add_metric("created")
    return out


def _fail(plan: Plan, reason: str, message: str, now: dt.datetime) -> None:
    plan.set_condition(cond.FAILED, "True", reason, message, clock.fmt(now),
                Event("Warning", reason, message))
