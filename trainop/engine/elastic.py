"""Elastic scaling: the HorizontalPodAutoscaler that targets a job's scale subresource."""

from __future__ import annotations

from typing import Any

from trainop.api import Job
from trainop.api.resources import HPAS
from trainop.engine.labels import job_labels, object_meta


def desired_hpa(job: Job) -> dict[str, Any] | None:
    policy = job.spec.elastic()
    if policy is None or not policy.metrics:
        return None
    return {
        "apiVersion": HPAS.api_version,
        "kind": "HorizontalPodAutoscaler",
        "metadata": object_meta(job, job.name, job_labels(job)),
        "spec": hpa_spec(job),
    }


def hpa_spec(job: Job) -> dict[str, Any]:
    policy = job.spec.elastic()
    assert policy is not None
    return {
        "scaleTargetRef": {"apiVersion": job.api_version, "kind": job.kind, "name": job.name},
        "minReplicas": policy.min_replicas,
        "maxReplicas": policy.max_replicas,
        "metrics": policy.metrics,
    }
