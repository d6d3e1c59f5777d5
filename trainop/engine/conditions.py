"""The job condition machine, with the upstream operator's ordering rules.

- a condition whose status and reason did not change is left alone (no write);
- the condition set last moves to the end of the list (printer column State reads [-1]);
- Running and Restarting replace each other;
- Succeeded or Failed turn Running to False;
- once Failed, nothing changes any more.
"""

from __future__ import annotations

from trainop.api import JobCondition, JobStatus

CREATED = "Created"
RUNNING = "Running"
RESTARTING = "Restarting"
SUCCEEDED = "Succeeded"
FAILED = "Failed"
SUSPENDED = "Suspended"


def get(status: JobStatus, ctype: str) -> JobCondition | None:
    for c in status.conditions or []:
        if c.type == ctype:
            return c
    return None


def is_true(status: JobStatus, ctype: str) -> bool:
    c = get(status, ctype)
    return c is not None and c.status == "True"


def is_finished(status: JobStatus) -> bool:
    return is_true(status, SUCCEEDED) or is_true(status, FAILED)


def set_condition(
    status: JobStatus, ctype: str, value: str, reason: str, message: str, now: str
) -> bool:
    """Set a condition; True when the status changed. A job that becomes Succeeded or
    Failed gets its completionTime here (the one rule, for every way a job ends)."""
    if is_true(status, FAILED):
        return False
    current = get(status, ctype)
    if current is not None and current.status == value and current.reason == reason:
        return False
    transition = now
    if current is not None and current.status == value:
        transition = current.last_transition_time or now
    kept = []
    for c in status.conditions or []:
        if c.type == ctype:
            continue
        if {ctype, c.type} == {RUNNING, RESTARTING}:
            continue
        if ctype in (SUCCEEDED, FAILED) and c.type == RUNNING and c.status == "True":
            # only the status flips; its times stay (pkg/util/status.go:145-148)
            c = c.model_copy(update={"status": "False"})
        kept.append(c)
    kept.append(JobCondition(
        type=ctype, status=value, reason=reason, message=message,  # type: ignore[arg-type]
        last_update_time=now, last_transition_time=transition,
    ))
    status.conditions = kept
    if value == "True" and ctype in (SUCCEEDED, FAILED):
        status.completion_time = status.completion_time or now
    return True


def append_after_end(status: JobStatus, ctype: str, value: str, reason: str,
                     message: str, now: str) -> None:
    """Append a condition to a job that has ended, dated its completionTime (else `now`),
    past the rules above: mpi-operator's Running False for a job it never saw run, which
    tells how long it took whoever computes durations from the conditions."""
    at = status.completion_time or now
    status.conditions = [*(status.conditions or []), JobCondition(
        type=ctype, status=value, reason=reason, message=message,  # type: ignore[arg-type]
        last_update_time=at, last_transition_time=at)]
