"""A problem of a job (a field path and what is wrong) and the checks kinds share."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from trainop.api.model import settled

NPROC = re.compile(r"^(auto|cpu|gpu|[1-9][0-9]*)$")


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a job: where (a field path) and what, in plain words."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class _Replicas(Protocol):
    replicas: int | None


def count(specs: Mapping[str, _Replicas], rtype: str) -> int:
    """Replicas of `rtype` in defaulted specs (0 when the type is absent)."""
    r = specs.get(rtype)
    return settled(r.replicas, f"[{rtype}].replicas") if r is not None else 0


def total(specs: Mapping[str, _Replicas]) -> int:
    """Replicas of every type in defaulted specs."""
    return sum(count(specs, rtype) for rtype in specs)


def exactly_one(field: str, specs: Mapping[str, _Replicas], rtype: str) -> list[Problem]:
    rspec = specs.get(rtype)
    if rspec is None:
        return [Problem(f"{field}[{rtype}]", "is required")]
    if rspec.replicas != 1:
        return [Problem(f"{field}[{rtype}].replicas", f"must be 1, got {rspec.replicas}")]
    return []


def at_most_one(field: str, specs: Mapping[str, _Replicas], rtype: str) -> list[Problem]:
    if count(specs, rtype) > 1:
        r = specs[rtype]
        return [Problem(f"{field}[{rtype}].replicas", f"must be at most 1, got {r.replicas}")]
    return []


def no_replicas_of_a_leader(field: str, specs: Mapping[str, _Replicas],
                            leaders: tuple[str, ...], why: str) -> list[Problem]:
    """A leading replica type given with 0 replicas: a job that could never run as meant.
    Upstream accepts it (its TFJob then succeeds at once without running anything, its
    PaddleJob's workers wait for a master that is never made); trainop refuses it."""
    return [Problem(f"{field}[{rt}].replicas",
                    f"must be at least 1 where {rt} is given ({why}); leave {rt} out to run "
                    "without one")
            for rt in leaders if (r := specs.get(rt)) is not None and r.replicas == 0]


def elastic_problems(path: str, lo: int | None, hi: int | None) -> list[Problem]:
    problems = []
    if lo is not None and lo < 1:
        problems.append(Problem(f"{path}.minReplicas", f"must be 1 or more, got {lo}"))
    if lo is not None and hi is not None and hi < lo:
        problems.append(Problem(
            f"{path}.maxReplicas", f"must not be less than minReplicas ({lo}), got {hi}"
        ))
    return problems
