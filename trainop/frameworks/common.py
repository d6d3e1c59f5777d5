"""Helpers the plugins share."""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar

from trainop.api import Job
from trainop.engine import Addressing, Counts

T = TypeVar("T")
_MEMO: OrderedDict[tuple[int, int, str], tuple[Job, Addressing, Any]] = OrderedDict()
_MEMO_LOCK = threading.Lock()
MEMO_SIZE = 32


def per_job(job: Job, addr: Addressing, what: str, compute: Callable[[], T]) -> T:
    """`compute()` once for this job object and addressing, however many pods ask.

    What every replica's environment repeats (TF_CONFIG's cluster, XGBoost's worker list)
    costs O(replicas) to build: built once per plan, a job of n replicas costs O(n), not
    O(n^2). Keyed by identity, and the entry keeps the job and addressing it was made for,
    so a new parse of the job (a new version) never reads an old value."""
    key = (id(job), id(addr), what)
    with _MEMO_LOCK:
        hit = _MEMO.get(key)
        if hit is not None and hit[0] is job and hit[1] is addr:
            _MEMO.move_to_end(key)
            return hit[2]  # type: ignore[no-any-return]
    value = compute()
    with _MEMO_LOCK:
        _MEMO[key] = (job, addr, value)
        while len(_MEMO) > MEMO_SIZE:
            _MEMO.popitem(last=False)
    return value


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


def compact_json(value: object) -> str:
    """JSON without spaces, as the frameworks' config variables are written."""
    return json.dumps(value, separators=(",", ":"))


def host_slots(hosts: list[str], slots: int) -> dict[str, int]:
    """Each host once with all its slots, in order: MPI refuses a host listed twice with
    slots (which happens on one machine, where every worker is 127.0.0.1)."""
    out: dict[str, int] = {}
    for host in hosts:
        out[host] = out.get(host, 0) + slots
    return out
