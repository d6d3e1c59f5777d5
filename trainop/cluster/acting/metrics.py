"""Prometheus metrics: the upstream operator's job counters plus trainop's own."""

from __future__ import annotations

import contextlib

from prometheus_client import Counter, Gauge, Histogram, disable_created_metrics

from trainop.api.persona import MPI_OPERATOR, TRAINING_OPERATOR, Persona
from trainop.api.resources import JOBS
from trainop.api.types import Defaulted, JobStatus
from trainop.engine import EngineConfig, Observed
from trainop.engine.framework import batch_type
from trainop.engine.labels import replica_name
from trainop.frameworks import framework_of

# Go's client (upstream's) has no `_created` series; a scraper sees the same samples here
disable_created_metrics()  # type: ignore[no-untyped-call]

LABELS = ["job_namespace", "framework"]
JOBS_CREATED = Counter("training_operator_jobs_created", "Jobs created", LABELS)
JOBS_DELETED = Counter("training_operator_jobs_deleted", "Jobs deleted", LABELS)
JOBS_SUCCESSFUL = Counter("training_operator_jobs_successful", "Jobs succeeded", LABELS)
JOBS_FAILED = Counter("training_operator_jobs_failed", "Jobs failed", LABELS)
JOBS_RESTARTED = Counter("training_operator_jobs_restarted", "Jobs restarted", LABELS)
RECONCILE_SECONDS = Histogram("trainop_reconcile_duration_seconds",
                              "Time to reconcile one job", ["kind"],
                              buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                       0.5, 1, 2.5, 5, 10))
RECONCILE_ERRORS = Counter("trainop_reconcile_errors_total", "Reconciles that failed", ["kind"])
QUEUE_DEPTH = Gauge("trainop_workqueue_depth", "Keys waiting in the work queue", ["name"])
QUEUE_ADDS = Counter("trainop_workqueue_adds_total", "Keys added to the work queue", ["name"])
QUEUE_RETRIES = Counter("trainop_workqueue_retries_total", "Keys retried after an error",
                        ["name"])
# (trainop's own names, kept beside controller-runtime's below for the dashboards made for
# them; the queue updates both through one call each)

JOB_COUNTERS = {"created": JOBS_CREATED, "successful": JOBS_SUCCESSFUL, "failed": JOBS_FAILED,
                "restarted": JOBS_RESTARTED, "deleted": JOBS_DELETED}
"""Plan.metrics's names (and `deleted`, which the applier counts) -> the counters."""
MPI_OPERATOR_COUNTERS = {
    "created": Counter("mpi_operator_jobs_created", "Counts number of MPI jobs created"),
    "successful": Counter("mpi_operator_jobs_successful",
                          "Counts number of MPI jobs successful"),
    "failed": Counter("mpi_operator_jobs_failed", "Counts number of MPI jobs failed"),
}
"""mpi-operator's job counters (mpi_job_controller.go:124-136: no labels, and neither
`restarted` nor `deleted`), which count the jobs written in its API instead."""


MPI_OPERATOR_JOB_INFO = Gauge("mpi_operator_job_info", "Information about MPIJob",
                              ["launcher", "namespace"])
"""1 for each launcher Job (mpi_job_controller.go:1135); trainop forgets a job's once the
job is deleted (mpi-operator never does)."""


class LauncherInfo:
    """mpi_operator_job_info for the jobs whose launcher a Job makes (mpi-operator's jobs,
    the only ones: Launcher.batch_job), once the Job exists."""

    def __init__(self) -> None:
        self._told: dict[str, str] = {}
        """Job key -> the name of its launcher Job told."""

    def tell(self, key: str, job: Defaulted, observed: Observed, config: EngineConfig) -> None:
        batch = batch_type(framework_of(job), job, config)
        if batch is None or key in self._told:
            return
        name = replica_name(job, batch, 0)
        if observed.object(JOBS.kind, name) is not None:
            MPI_OPERATOR_JOB_INFO.labels(name, job.namespace).set(1)
            self._told[key] = name

    def forget(self, key: str, namespace: str) -> None:
        if (launcher := self._told.pop(key, None)) is not None:
            MPI_OPERATOR_JOB_INFO.remove(launcher, namespace)


PROGRESS_LABELS = ["job_namespace", "job_name", "kind"]
JOB_PROGRESS = Gauge("trainop_job_progress_percent",
                     "How far a job has got, in percent, as its lead rank last reported "
                     "(status.progress.percent)", PROGRESS_LABELS)
JOB_REMAINING = Gauge("trainop_job_remaining_seconds",
                      "The time a job's lead rank last reported it has left "
                      "(status.progress.remainingSeconds)", PROGRESS_LABELS)


class JobProgress:
    """trainop_job_progress_percent and trainop_job_remaining_seconds of one kind's jobs
    (engine/progress.py): a series for each job and figure its status shows, gone with the
    job. The metrics a rank names are not exported: their names are the tenant's, and
    would make series without bound."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._shown: dict[str, tuple[str, str]] = {}
        """Job key -> its namespace and name, for the jobs with series."""

    def tell(self, key: str, job: Defaulted, status: JobStatus | None) -> None:
        block = status.progress if status is not None else None
        labels = (job.namespace, job.name, self.kind)
        for gauge, value in ((JOB_PROGRESS, block.percent if block else None),
                             (JOB_REMAINING, block.remaining_seconds if block else None)):
            if value is not None:
                gauge.labels(*labels).set(value)
            elif key in self._shown:
                with contextlib.suppress(KeyError):
                    gauge.remove(*labels)
        if block is not None:
            self._shown[key] = (job.namespace, job.name)

    def forget(self, key: str) -> None:
        if (shown := self._shown.pop(key, None)) is not None:
            for gauge in (JOB_PROGRESS, JOB_REMAINING):
                with contextlib.suppress(KeyError):
                    gauge.remove(*shown, self.kind)


def count_jobs(counts: dict[str, int], namespace: str, framework: str,
               persona: Persona = TRAINING_OPERATOR) -> None:
    """Add a plan's job counts (Plan.metrics) to the counters of the operator whose API
    the job was written in."""
    for name, n in counts.items():
        if n:
            COUNTED[persona](name, namespace, framework, n)


def _training_operator(name: str, namespace: str, framework: str, n: int) -> None:
    JOB_COUNTERS[name].labels(namespace, framework).inc(n)


def _mpi_operator(name: str, namespace: str, framework: str, n: int) -> None:
    if (counter := MPI_OPERATOR_COUNTERS.get(name)) is not None:
        counter.inc(n)


COUNTED = {TRAINING_OPERATOR: _training_operator, MPI_OPERATOR: _mpi_operator}
"""Each persona's counting."""


# The metrics of controller-runtime v0.19 (what upstream v1.9 runs on), with its names,
# labels and buckets, so that dashboards made for the training operator work unchanged.
# `controller` is the controller's name, e.g. `pytorchjob-controller`.
RECONCILE_TOTAL = Counter("controller_runtime_reconcile_total",
                          "Total number of reconciliations per controller",
                          ["controller", "result"])
RECONCILE_RESULTS = ("error", "requeue_after", "requeue", "success")
CR_RECONCILE_ERRORS = Counter("controller_runtime_reconcile_errors_total",
                              "Total number of reconciliation errors per controller",
                              ["controller"])
# Shown at 0 and never counted, as upstream's: a reconcile error of either is retried,
# none is terminal (controller-runtime's reconcile.TerminalError, which upstream never uses).
TERMINAL_RECONCILE_ERRORS = Counter(
    "controller_runtime_terminal_reconcile_errors_total",
    "Total number of terminal reconciliation errors per controller", ["controller"])
RECONCILE_PANICS = Counter("controller_runtime_reconcile_panics_total",
                           "Total number of reconciliation panics per controller",
                           ["controller"])
RECONCILE_TIME = Histogram(
    "controller_runtime_reconcile_time_seconds",
    "Length of time per reconciliation per controller", ["controller"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6,
             0.7, 0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9,
             10, 15, 20, 25, 30, 40, 50, 60))
MAX_CONCURRENT = Gauge("controller_runtime_max_concurrent_reconciles",
                       "Maximum number of concurrent reconciles per controller", ["controller"])
ACTIVE_WORKERS = Gauge("controller_runtime_active_workers",
                       "Number of currently used workers per controller", ["controller"])

_QUEUE = ["name", "controller"]
_QUEUE_BUCKETS = tuple(1e-8 * 10 ** k for k in range(12))
WQ_DEPTH = Gauge("workqueue_depth", "Current depth of workqueue", _QUEUE)
WQ_ADDS = Counter("workqueue_adds_total", "Total number of adds handled by workqueue", _QUEUE)
WQ_QUEUE_SECONDS = Histogram("workqueue_queue_duration_seconds",
                             "How long in seconds an item stays in workqueue before being "
                             "requested", _QUEUE, buckets=_QUEUE_BUCKETS)
WQ_WORK_SECONDS = Histogram("workqueue_work_duration_seconds",
                            "How long in seconds processing an item from workqueue takes.",
                            _QUEUE, buckets=_QUEUE_BUCKETS)
WQ_UNFINISHED_SECONDS = Gauge("workqueue_unfinished_work_seconds",
                              "How many seconds of work has been done that is in progress and "
                              "hasn't been observed by work_duration.", _QUEUE)
WQ_LONGEST_SECONDS = Gauge("workqueue_longest_running_processor_seconds",
                           "How many seconds has the longest running processor for workqueue "
                           "been running.", _QUEUE)
WQ_RETRIES = Counter("workqueue_retries_total", "Total number of retries handled by workqueue",
                     _QUEUE)
