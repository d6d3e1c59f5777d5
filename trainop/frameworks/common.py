"""Helpers the plugins share."""

from __future__ import annotations

from trainop.api import Job
from trainop.engine import Counts


def replicas(job: Job, rtype: str) -> int:
    spec = job.spec.replica_specs.get(rtype)
    return (spec.replicas or 0) if spec is not None else 0


def all_succeeded(counts: dict[str, Counts], rtype: str) -> bool:
    c = counts.get(rtype)
    return c is not None and c.replicas > 0 and c.succeeded >= c.replicas


def any_succeeded(counts: dict[str, Counts], rtype: str) -> bool:
    c = counts.get(rtype)
    return c is not None and c.succeeded > 0


def total_replicas(job: Job) -> int:
    return sum(r.replicas or 0 for r in job.spec.replica_specs.values())
