"""A job's progress: its lead rank's reports, read strictly, in status.progress at most
once per --progress-interval (engine/progress.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.jobs import job
from tests.sim import Cluster
from trainop.engine import EngineConfig, Phase
from trainop.engine.observed import Reported
from trainop.engine.progress import NotAReport, read


def running(kind: str = "PyTorchJob", replicas: dict[str, int] | None = None,
            interval: float = 10.0) -> Cluster:
    c = Cluster(job(kind, replicas or {"Master": 1, "Worker": 2}),
                EngineConfig(progress_interval=interval))
    c.step()
    c.all(Phase.RUNNING)
    c.step()
    return c


def report(**status: Any) -> dict[str, Any]:
    return {"trainerStatus": {"lastUpdatedTime": "2026-01-01T00:00:00Z", **status}}


def shown(c: Cluster) -> dict[str, Any] | None:
    assert c.job.status is not None
    return None if c.job.status.progress is None else c.job.status.progress.to_dict()


def told(c: Cluster) -> list[tuple[str, str, str]]:
    return [(e.type, e.reason, e.message) for e in c.plans[-1].events]


def test_the_lead_ranks_report_is_shown_with_who_said_it_and_when() -> None:
    c = running()
    c.advance(5)
    c.reports["job-master-0"] = Reported("job-master-0", report(
        progressPercentage=45, estimatedRemainingSeconds=120, step=450, steps=1000,
        epoch=2, epochs=5, metrics=[{"name": "loss", "value": "0.15"}]))
    c.step()
    assert shown(c) == {"percent": 45, "step": 450, "steps": 1000, "epoch": 2, "epochs": 5,
                        "remainingSeconds": 120,
                        "metrics": [{"name": "loss", "value": "0.15"}],
                        "pod": "job-master-0", "lastReportedTime": "2026-01-01T00:00:05Z"}


def test_a_worker_reports_nothing_where_a_master_leads() -> None:
    c = running()
    c.reports["job-worker-0"] = Reported("job-worker-0", report(progressPercentage=10))
    c.step()
    assert shown(c) is None


def test_worker_0_leads_a_job_of_workers_only() -> None:
    c = running(replicas={"Worker": 2})
    c.reports["job-worker-1"] = Reported("job-worker-1", report(progressPercentage=70))
    c.step()
    assert shown(c) is None
    c.reports["job-worker-0"] = Reported("job-worker-0", report(progressPercentage=30))
    c.step()
    assert (shown(c) or {})["percent"] == 30
    # worker 0 gone (made again next): worker 1 still does not lead
    del c.pods["job-worker-0"]
    c.advance(60)
    c.reports["job-worker-1"] = Reported("job-worker-1", report(progressPercentage=90))
    c.step()
    assert (shown(c) or {})["percent"] == 30


def test_a_job_whose_ranks_never_report_has_no_block_and_runs_on() -> None:
    c = running()
    c.advance(3600)
    plan = c.step()
    assert shown(c) is None
    assert plan.requeue_after is None
    assert c.condition("Running").status == "True"


def test_reports_are_written_at_most_once_per_interval_the_latest_one_then() -> None:
    c = running(interval=10)
    c.reports["job-master-0"] = Reported("job-master-0", report(progressPercentage=1))
    c.step()
    assert c.plans[-1].status_changed
    for percent, after in ((2, 3), (3, 3)):
        c.advance(after)
        c.reports["job-master-0"] = Reported("job-master-0",
                                             report(progressPercentage=percent))
        plan = c.step()
        assert (shown(c) or {})["percent"] == 1  # not yet: the interval has not passed
        assert not plan.status_changed
    assert plan.requeue_after == 4  # back when it has
    c.advance(4)
    c.step()
    assert shown(c) == {"percent": 3, "pod": "job-master-0",
                        "lastReportedTime": "2026-01-01T00:00:10Z"}


def test_a_report_that_says_nothing_new_writes_nothing() -> None:
    c = running()
    c.reports["job-master-0"] = Reported("job-master-0", report(progressPercentage=5))
    c.step()
    c.advance(60)
    # the rank's own time moved on; what it says did not
    c.reports["job-master-0"] = Reported("job-master-0", {"trainerStatus": {
        "progressPercentage": 5, "lastUpdatedTime": "2026-01-01T00:01:00Z"}})
    plan = c.step()
    assert not plan.status_changed
    assert (shown(c) or {})["lastReportedTime"] == "2026-01-01T00:00:00Z"


def test_percent_follows_from_steps_where_the_report_gives_none() -> None:
    assert (read(report(step=333, steps=1000)) or pytest.fail()).percent == 33


def test_an_empty_report_says_nothing_as_trainers_server_takes_it() -> None:
    assert read({}) is None
    assert read({"trainerStatus": None}) is None
    assert read(report()) is None


@pytest.mark.parametrize(("doc", "why"), [
    ([], "a report is a JSON object"),
    ({"trainerStatus": []}, "trainerStatus is not an object"),
    (report(progressPercentage=101), "progressPercentage is not a whole number from 0 to 100"),
    (report(progressPercentage=-1), "progressPercentage is not a whole number from 0 to 100"),
    (report(progressPercentage=45.0), "progressPercentage is not a whole number"),
    (report(progressPercentage=True), "progressPercentage is not a whole number"),
    (report(progressPercentage="45"), "progressPercentage is not a whole number"),
    (report(estimatedRemainingSeconds=2**31), "estimatedRemainingSeconds is not a whole"),
    (report(step=2**53 + 1), "step is not a whole number"),
    (report(step=11, steps=10), "step 11 is past steps 10"),
    (report(epoch=3, epochs=2), "epoch 3 is past epochs 2"),
    ({"trainerStatus": {"progressPercentage": 1, "lastUpdatedTime": "yesterday"}},
     "lastUpdatedTime is not an RFC 3339 time"),
    ({"trainerStatus": {"progressPercentage": 1, "lastUpdatedTime": "2026-01-01T00:00:00"}},
     "lastUpdatedTime is not an RFC 3339 time"),
    (report(metrics={"loss": "1"}), "metrics is not a list of at most 256"),
    (report(metrics=[{"name": "l", "value": "1"}] * 257), "metrics is not a list of at most"),
    (report(metrics=[{"name": "loss", "value": 0.1}]), "a metric's name and value are text"),
    (report(metrics=[{"name": "", "value": "1"}]), "a metric's name and value are text"),
    (report(metrics=[{"name": "l" * 65, "value": "1"}]), "a metric's name and value are"),
    (report(metrics=[{"name": "loss\x1b[2J", "value": "1"}]), "printable characters"),
    (report(metrics=[{"name": "loss", "value": "1\n"}]), "printable characters"),
    (report(metrics=[{"name": "loss"}]), "a metric is an object of name and value"),
    (report(metrics=[{"name": "a", "value": "1", "unit": "s"}]), "an object of name and"),
])
def test_a_report_not_in_the_payloads_shape_is_refused_saying_where(doc: Any, why: str
                                                                    ) -> None:
    with pytest.raises(NotAReport, match=why.replace("(", r"\(")):
        read(doc)


def test_the_status_keeps_the_first_eight_metrics_of_as_many_as_256() -> None:
    names = [f"m{i}" for i in range(256)]
    got = read(report(metrics=[{"name": n, "value": "1"} for n in names])) or pytest.fail()
    assert [m.name for m in got.metrics or []] == names[:8]


def test_a_refused_report_keeps_the_last_good_one_and_is_told_once() -> None:
    c = running(interval=10)
    c.reports["job-master-0"] = Reported("job-master-0", report(progressPercentage=40))
    c.step()
    c.advance(10)
    c.reports["job-master-0"] = Reported("job-master-0", report(progressPercentage=400))
    c.step()
    why = ("pod job-master-0: progressPercentage is not a whole number from 0 to 100")
    assert shown(c) == {"percent": 40, "pod": "job-master-0", "refused": why,
                        "lastReportedTime": "2026-01-01T00:00:10Z"}
    assert told(c) == [("Warning", "ProgressReportRefused",
                        f"The progress report of {why}; the last one read is shown")]
    c.advance(60)
    plan = c.step()
    assert told(c) == [] and not plan.status_changed  # said once
    # a good one again clears it, though it says what the last good one did
    c.reports["job-master-0"] = Reported("job-master-0", report(progressPercentage=40))
    c.step()
    assert shown(c) == {"percent": 40, "pod": "job-master-0",
                        "lastReportedTime": "2026-01-01T00:01:10Z"}


def test_a_report_the_runtime_could_not_read_is_refused_with_its_words() -> None:
    c = running()
    c.reports["job-master-0"] = Reported(
        "job-master-0", problem="a report of 70000 bytes, over the 65536 one may hold")
    c.step()
    assert shown(c) == {"pod": "job-master-0", "lastReportedTime": "2026-01-01T00:00:00Z",
                        "refused": "pod job-master-0: a report of 70000 bytes, over the "
                        "65536 one may hold"}


def test_a_stored_time_no_manager_wrote_does_not_stop_progress() -> None:
    c = running()
    c.reports["job-master-0"] = Reported("job-master-0", report(progressPercentage=1))
    c.step()
    assert c.job.status is not None and c.job.status.progress is not None
    c.job.status.progress.last_reported_time = "soon"
    c.reports["job-master-0"] = Reported("job-master-0", report(progressPercentage=2))
    c.step()
    assert (shown(c) or {})["percent"] == 2


def test_a_finished_job_shows_its_last_report_at_once() -> None:
    c = running(replicas={"Worker": 1})
    c.reports["job-worker-0"] = Reported("job-worker-0", report(progressPercentage=90))
    c.step()
    c.advance(1)  # within the interval
    c.reports["job-worker-0"] = Reported("job-worker-0", report(progressPercentage=100))
    c.all(Phase.SUCCEEDED)
    c.step()
    assert c.condition("Succeeded").status == "True"
    assert (shown(c) or {})["percent"] == 100
