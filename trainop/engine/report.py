"""What a round shows on the job: its conditions (each with its event where it turned
True), events, and the last failure in its status, all into the round's plan."""

from __future__ import annotations

from trainop.api import FailureInfo
from trainop.api.types import Defaulted
from trainop.engine import conditions as cond
from trainop.engine.failures import Failure
from trainop.engine.plan import Event, Plan
from trainop.engine.wording import Wording


class Report:
    """Writes what the job shows into `plan`, at the round's time `now`."""

    def __init__(self, plan: Plan, now: str, job: Defaulted, wording: Wording):
        self.plan = plan
        self.now = now
        self.job = job
        self.wording = wording

    def condition(self, ctype: str, value: str, reason: str, message: str,
                  warning: bool = False, tell: bool = True) -> bool:
        """Set a condition; True when it became True just now (and then its event is told,
        unless `tell` is False: upstream v1.9 tells no event for Created or Running)."""
        event = Event("Warning" if warning else "Normal", reason, message) if tell else None
        return self.plan.set_condition(ctype, value, reason, message, self.now, event)

    def event(self, reason: str, message: str, warning: bool = False) -> None:
        self.plan.events.append(Event("Warning" if warning else "Normal", reason, message))

    def also(self, ctype: str, reason: str) -> None:
        """The event a condition that just turned True tells in the kind's words, where it
        tells one (Wording.told)."""
        if (message := self.wording.told(self.job, ctype)) is not None:
            self.event(reason, message)

    def fail(self, reason: str, message: str, event_message: str = "", warning: bool = True,
             condition_reason: str = "") -> bool:
        """Fail the job with `message` on its condition and `event_message` (else the same)
        in its event, each with `reason` (the condition with `condition_reason` where given);
        False when it had failed already."""
        return self.plan.set_condition(
            cond.FAILED, "True", condition_reason or reason, message, self.now,
            Event("Warning" if warning else "Normal", reason, event_message or message))

    def failure(self, f: Failure) -> None:
        ended = f.pod.ended
        self.plan.status.last_failure = FailureInfo(
            replica_type=f.pod.replica_type, index=f.pod.index, pod=f.pod.name,
            exit_code=f.pod.exit_code, reason=f.pod.reason,
            time=(ended.finished_at if ended else None) or self.now, node=f.pod.node,
            container=ended.container if ended else None,
            message=ended.message if ended else None,
        )
