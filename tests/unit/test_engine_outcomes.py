"""Outcomes decided outside a reconcile: a job that cannot run, a create refused for good,
a new job whose objects cannot be made yet. Each is a Plan, like a reconcile's."""

from __future__ import annotations

from tests.jobs import job
from tests.sim import T0, Cluster
from trainop.api import JobStatus
from trainop.engine import conditions as cond
from trainop.engine import create_refused, created_only, rejected

NOW = "2026-01-01T00:00:00Z"


def test_a_rejected_job_fails_once_with_its_problems() -> None:
    plan = rejected(JobStatus(), "PyTorchJob", "ns/pt", "spec.x: bad", T0)
    failed = cond.get(plan.status, cond.FAILED)
    assert failed is not None and (failed.reason, failed.message) == (
        "InvalidSpec", "PyTorchJob ns/pt is invalid: spec.x: bad")
    assert plan.status.completion_time == NOW
    assert plan.status_changed and plan.transitions == [cond.FAILED]
    assert [(e.type, e.reason) for e in plan.events] == [("Warning", "InvalidSpec")]
    again = rejected(plan.status, "PyTorchJob", "ns/pt", "spec.x: bad", T0)
    assert not again.status_changed and again.events == [] and again.transitions == []


def test_a_refused_create_fails_the_job_and_tells_no_pod_as_created() -> None:
    plan = Cluster(job("JAXJob", {"Worker": 2})).plan()
    assert plan.on_created
    refused = create_refused(plan, "JAXJob", "default/job", "Pod job-worker-0 was rejected",
                             T0)
    assert refused.on_created == [] and refused.create == [] and refused.prerequisites == []
    assert [e.reason for e in refused.events] == [e.reason for e in plan.events] + [
        "CreateFailed"]
    failed = cond.get(refused.status, cond.FAILED)
    assert failed is not None and failed.message == (
        "JAXJob default/job cannot run: Pod job-worker-0 was rejected")
    assert refused.status.completion_time == NOW
    assert cond.get(plan.status, cond.FAILED) is None  # the plan it came from is unchanged


def test_a_blocked_new_job_shows_created_only() -> None:
    plan = Cluster(job("JAXJob", {"Worker": 2})).plan()
    blocked = created_only(plan, JobStatus(), T0)
    assert blocked is not None
    assert [c.type for c in blocked.status.conditions or []] == [cond.CREATED]
    assert blocked.status.start_time is None  # the rest waits for the writes it needs
    assert blocked.events == []  # upstream v1.9 tells no event for Created
    assert blocked.to_create == [] and blocked.on_created == []


def test_nothing_to_tell_when_the_job_was_created_before() -> None:
    c = Cluster(job("JAXJob", {"Worker": 2}))
    c.step()
    assert created_only(c.plan(), c.job.status, T0) is None


def test_the_engine_never_reads_the_clock() -> None:
    # `now` is an input of every engine entry point; only the runtimes read the clock
    from pathlib import Path

    engine = Path(__file__).resolve().parents[2] / "trainop" / "engine"
    readers = [p.name for p in engine.glob("*.py")
               if "datetime.now(" in p.read_text() or "wallclock" in p.read_text()]
    assert readers == []
    assert "def now" not in (engine / "clock.py").read_text()  # trainop/wallclock.py's
