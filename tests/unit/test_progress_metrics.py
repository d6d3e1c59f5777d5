"""The per-job progress gauges (cluster/acting/metrics.py JobProgress): a series for each
figure a job's status shows, none for the metrics its ranks name, gone with the job."""

from __future__ import annotations

from prometheus_client import REGISTRY, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tests.jobs import job
from trainop.api.types import JobStatus, Metric, Progress
from trainop.cluster.acting.metrics import JobProgress


def series() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(generate_latest(REGISTRY).decode()):
        if family.name.startswith("trainop_job_"):
            for s in family.samples:
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def status(percent: int | None, remaining: int | None = None,
           metrics: list[Metric] | None = None) -> JobStatus:
    return JobStatus(progress=Progress(percent=percent, remaining_seconds=remaining,
                                       metrics=metrics, pod="p", last_reported_time="t"))


def test_a_jobs_series_follow_its_status_and_go_with_it() -> None:
    gauges = JobProgress("PyTorchJob")
    a, b = job("PyTorchJob", name="a"), job("PyTorchJob", name="b")
    labels = (("job_name", "a"), ("job_namespace", "default"), ("kind", "PyTorchJob"))
    gauges.tell("default/a", a, status(40, 600))
    gauges.tell("default/b", b, None)  # never reports: no series
    assert series() == {("trainop_job_progress_percent", labels): 40.0,
                        ("trainop_job_remaining_seconds", labels): 600.0}
    gauges.tell("default/a", a, status(55))  # no time left said any more
    assert series() == {("trainop_job_progress_percent", labels): 55.0}
    gauges.forget("default/a")
    gauges.forget("default/b")
    assert series() == {}


def test_metrics_a_tenant_names_make_no_series() -> None:
    """256 metrics of names a tenant chose (quotes, newlines, braces): still two series a
    job, and the exposition reads back as the same two."""
    gauges = JobProgress("TFJob")
    named = [Metric(name=f'm{i}"}} {{x="\\\n', value=f"{i}\n") for i in range(256)]
    for i in range(50):
        gauges.tell(f"ns/j{i}", job("TFJob", name=f"j{i}"), status(i, 10, named))
    try:
        assert len(series()) == 100
    finally:
        for i in range(50):
            gauges.forget(f"ns/j{i}")
    assert series() == {}
