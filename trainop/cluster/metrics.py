"""Prometheus metrics: the upstream operator's job counters plus trainop's own."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

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

BY_TRANSITION = {"Created": JOBS_CREATED, "Succeeded": JOBS_SUCCESSFUL, "Failed": JOBS_FAILED,
                 "Restarting": JOBS_RESTARTED}
