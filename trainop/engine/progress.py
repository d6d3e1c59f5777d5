"""How far a job has got: its lead rank's reports (trainop.progress writes them), read
strictly and shown in the job's status (`status.progress`, trainop's own) at most once per
--progress-interval.

A report is Kubeflow Trainer's progress payload (KEP-2779: `{"trainerStatus":
{progressPercentage, estimatedRemainingSeconds, metrics, lastUpdatedTime}}`), so that a
callback written for a TrainJob writes one unchanged, with four fields of trainop's own
beside Trainer's: step, steps, epoch, epochs. Only the lead replica's first pod reports
(the one whose rank leads: master, chief, launcher, or worker 0): the runtimes tell it
where to report (TRAINOP_PROGRESS_FILE; with --progress-server, Trainer's URL: engine/
progress_server.py) and pass on what it reported, at most LIMIT bytes. A report that
cannot be read leaves the last good one shown and says why (`refused`, and one Warning
event per reason).
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from trainop.api.resolved import resolve
from trainop.api.types import Defaulted, Metric, Progress
from trainop.engine import clock
from trainop.engine import conditions as cond
from trainop.engine.labels import replica_name
from trainop.engine.observed import Reported

if TYPE_CHECKING:
    from trainop.engine.round import Round

ENV = "TRAINOP_PROGRESS_FILE"
"""Where the lead rank writes its report (the file is replaced whole: write and rename)."""
LIMIT = 64 << 10
"""The most bytes a report may hold (Trainer's status server takes as many)."""
METRICS_SHOWN = 8
"""The named metrics the status keeps: the first ones a report lists."""
METRICS_MOST = 256
"""The most metrics a report may list (Trainer's CRD holds as many)."""
TEXT_MOST = 64
"""The longest metric name or value, in characters (as Trainer's)."""
INT32_MOST = 2**31 - 1
COUNT_MOST = 2**53
"""The largest step or epoch: a number every JSON reader keeps exactly."""
REFUSED = "ProgressReportRefused"


class NotAReport(ValueError):
    """A report not in the payload's shape: the message says where."""


def read(doc: Any) -> Progress | None:
    """A report as the status shows it (no `pod`, no time yet); None where it says nothing
    (no trainerStatus, as Trainer's server takes one). Raises NotAReport."""
    if not isinstance(doc, dict):
        raise NotAReport("a report is a JSON object")
    status = doc.get("trainerStatus")
    if status is None:
        return None
    if not isinstance(status, dict):
        raise NotAReport("trainerStatus is not an object")
    percent = _whole(status, "progressPercentage", 100)
    remaining = _whole(status, "estimatedRemainingSeconds", INT32_MOST)
    step, steps = _whole(status, "step", COUNT_MOST), _whole(status, "steps", COUNT_MOST)
    epoch, epochs = _whole(status, "epoch", COUNT_MOST), _whole(status, "epochs", COUNT_MOST)
    for n, of, what in ((step, steps, "step"), (epoch, epochs, "epoch")):
        if n is not None and of is not None and n > of:
            raise NotAReport(f"{what} {n} is past {what}s {of}")
    if percent is None and step is not None and steps:
        percent = step * 100 // steps
    when = status.get("lastUpdatedTime")
    if when is not None and not _is_time(when):
        raise NotAReport("lastUpdatedTime is not an RFC 3339 time")
    metrics = _metrics(status.get("metrics"))
    if all(v is None for v in (percent, remaining, step, steps, epoch, epochs, metrics)):
        return None
    return Progress(percent=percent, step=step, steps=steps, epoch=epoch, epochs=epochs,
                    remaining_seconds=remaining, metrics=metrics, pod="",
                    last_reported_time="")


def _whole(status: dict[str, Any], field: str, most: int) -> int | None:
    value = status.get(field)
    if value is None:
        return None
    # bool is an int to Python, and 45.0 is no integer to Trainer's decoder
    if type(value) is not int or not 0 <= value <= most:
        raise NotAReport(f"{field} is not a whole number from 0 to {most}")
    return value


def _metrics(value: Any) -> list[Metric] | None:
    if value is None:
        return None
    if not isinstance(value, list) or len(value) > METRICS_MOST:
        raise NotAReport(f"metrics is not a list of at most {METRICS_MOST}")
    out = []
    for item in value:
        if not isinstance(item, dict) or set(item) != {"name", "value"}:
            raise NotAReport("a metric is an object of name and value")
        name, text = item["name"], item["value"]
        if not (_text(name) and _text(text)):
            raise NotAReport(f"a metric's name and value are text of 1 to {TEXT_MOST} "
                             "printable characters")
        out.append(Metric(name=name, value=text))
    return out[:METRICS_SHOWN] or None


def _text(value: Any) -> bool:
    # printable only: a name is shown on terminals (describe, trainop run) as it is
    return type(value) is str and 0 < len(value) <= TEXT_MOST and value.isprintable()


def _is_time(value: Any) -> bool:
    if type(value) is not str or not value.isascii():
        return False
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        return False
    return parsed.tzinfo is not None and "T" in value.upper()


def lead_name(job: Defaulted, leader: str | None = None) -> str:
    """The name of the pod whose reports count: the lead replica type's first (`leader`:
    that type, where the caller has it resolved already)."""
    return replica_name(job, leader or resolve(job).leader, 0)


def lead_pod(r: Round) -> str | None:
    """The job's lead pod, where it lives."""
    name = lead_name(r.job, r.resolved.leader)
    return name if any(p.name == name for p in r.observed.live_pods()) else None


def step(r: Round) -> None:
    """Show the lead pod's latest report in the job's status, where it says something new
    and the last was written at least config.progress_interval ago (else come back then),
    or the job has finished."""
    lead = lead_pod(r)
    heard = next((h for h in r.observed.reports if h.pod == lead), None)
    shown = r.status.progress
    if lead is None or heard is None or (block := _block(heard, lead, shown)) is None:
        return
    last = clock.parsed(shown.last_reported_time) if shown is not None else None
    # a finished job's ranks report no more: its last report is shown at once
    if last is not None and not cond.is_finished(r.status) and (
            left := r.config.progress_interval - (r.now_dt - last).total_seconds()) > 0:
        r.plan.requeue(left)
        return
    if block.refused is not None:
        r.report.event(REFUSED, f"The progress report of {block.refused}; the last one read "
                       "is shown", warning=True)
    r.status.progress = block.model_copy(update={"last_reported_time": r.now})


def _block(heard: Reported, lead: str, shown: Progress | None) -> Progress | None:
    """The block `heard` makes of the one `shown`; None where it changes nothing."""
    try:
        if heard.problem is not None:
            raise NotAReport(heard.problem)
        new = read(heard.doc)
    except NotAReport as err:
        why = f"pod {lead}: {err}"
        if shown is not None and shown.refused == why:
            return None  # said once
        return (shown or Progress(pod=lead, last_reported_time="")).model_copy(
            update={"refused": why})
    if new is None:
        return None
    block = new.model_copy(update={"pod": lead})
    keep = {"last_reported_time", "refused"}
    if shown is not None and shown.refused is None and \
            shown.model_dump(exclude=keep) == block.model_dump(exclude=keep):
        return None
    return block


def summary(p: Progress) -> str:
    """One line of what a progress block says, as `trainop run` and `trainop describe`
    show it: `45%, step 450 of 1000, epoch 2 of 5, 2m0s left, loss 0.15`."""
    parts = [] if p.percent is None else [f"{p.percent}%"]
    for what, n, of in (("step", p.step, p.steps), ("epoch", p.epoch, p.epochs)):
        if n is not None:
            parts.append(f"{what} {n}" + ("" if of is None else f" of {of}"))
    if p.remaining_seconds is not None:
        minutes, seconds = divmod(p.remaining_seconds, 60)
        hours, minutes = divmod(minutes, 60)
        left = f"{hours}h{minutes}m" if hours else f"{minutes}m{seconds}s" if minutes else \
            f"{seconds}s"
        parts.append(f"{left} left")
    parts += [f"{m.name} {m.value}" for m in p.metrics or []]
    return ", ".join(parts) or "nothing reported yet"
