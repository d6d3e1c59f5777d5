"""controller-runtime's metrics, which dashboards made for the training operator read
(names, labels and results of controller-runtime v0.19.1, upstream v1.9's version:
pkg/internal/controller/metrics/metrics.go, pkg/internal/controller/controller.go:268-340,
pkg/metrics/workqueue.go)."""

from __future__ import annotations

import asyncio

from prometheus_client import REGISTRY, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from trainop.cluster.acting import metrics
from trainop.cluster.acting.workqueue import WorkQueue, init_controller_metrics, run_worker
from trainop.cluster.reading.client import APIError


def value(name: str, /, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_results_are_counted_as_controller_runtime_counts_them() -> None:
    controller = "testjob-controller"

    async def scenario() -> None:
        queue = WorkQueue("TestJob", controller=controller, base_delay=10)
        init_controller_metrics(controller, 2)
        outcomes = {"ok": None, "later": 30.0, "broken": APIError(500, {"message": "x"})}

        async def sync(key: str) -> float | None:
            outcome = outcomes[key]
            if isinstance(outcome, Exception):
                raise outcome
            return outcome

        for key in outcomes:
            queue.add(key)
        worker = asyncio.create_task(run_worker(queue, sync))
        await asyncio.sleep(0.2)
        worker.cancel()

    before = {r: value("controller_runtime_reconcile_total", controller=controller, result=r)
              for r in ("success", "requeue_after", "error", "requeue")}
    asyncio.run(scenario())
    after = {r: value("controller_runtime_reconcile_total", controller=controller, result=r)
             for r in before}
    assert {r: after[r] - before[r] for r in after} == {
        "success": 1, "requeue_after": 1, "error": 1, "requeue": 0}
    assert value("controller_runtime_reconcile_errors_total", controller=controller) >= 1
    assert value("controller_runtime_max_concurrent_reconciles", controller=controller) == 2
    assert value("controller_runtime_active_workers", controller=controller) == 0
    assert value("workqueue_adds_total", name=controller, controller=controller) >= 3
    assert value("workqueue_retries_total", name=controller, controller=controller) >= 1
    assert value("workqueue_work_duration_seconds_count", name=controller,
                 controller=controller) >= 3


def test_both_depth_gauges_follow_the_queue() -> None:
    # a key added again while a worker holds it waits for done(): both names show it
    async def scenario() -> None:
        queue = WorkQueue("DepthJob", controller="depthjob-controller")
        queue.add("a")
        key = await queue.get()
        queue.add("a")  # while it is worked on
        assert value("workqueue_depth", name="depthjob-controller",
                     controller="depthjob-controller") == 0
        queue.done(key)
        for name, labels in (("workqueue_depth", {"name": "depthjob-controller",
                                                  "controller": "depthjob-controller"}),
                             ("trainop_workqueue_depth", {"name": "DepthJob"})):
            assert value(name, **labels) == 1, name
        assert value("trainop_workqueue_adds_total", name="DepthJob") == 2
    asyncio.run(scenario())


def test_no_series_upstream_does_not_have() -> None:
    # Go's client writes no `_created` sample beside a counter's `_total`
    metrics.JOBS_CREATED.labels("ns", "pytorch").inc()
    text = generate_latest(REGISTRY).decode()
    names = {s.name for f in text_string_to_metric_families(text) for s in f.samples}
    assert "training_operator_jobs_created_total" in names
    assert not [n for n in names if n.endswith("_created")], names
