"""Helpers the plugins share."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from typing import Any, TypeVar

import yaml

from trainop.api.types import Defaulted
from trainop.engine import Addressing, Counts
from trainop.engine.pods import init_container

T = TypeVar("T")


def per_job(job: Defaulted, addr: Addressing, what: str, compute: Callable[[], T]) -> T:
    """`compute()` once per plan, however many pods ask.

    What every replica's environment repeats (TF_CONFIG's cluster, XGBoost's worker list)
    costs O(replicas) to build: built once per plan, a job of n replicas costs O(n), not
    O(n^2). The memo is the plan's own (engine.PlanAddressing, one job, made and dropped
    with the reconcile); outside a plan it is built each time."""
    memo = getattr(addr, "memo", None)
    if not isinstance(memo, dict):
        return compute()
    if what not in memo:
        memo[what] = compute()
    return memo[what]  # type: ignore[no-any-return]


def all_succeeded(counts: dict[str, Counts], rtype: str) -> bool:
    c = counts.get(rtype)
    return c is not None and c.replicas > 0 and c.succeeded >= c.replicas


def any_succeeded(counts: dict[str, Counts], rtype: str) -> bool:
    c = counts.get(rtype)
    return c is not None and c.succeeded > 0


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


@functools.lru_cache(maxsize=64)
def _rendered(template: str | None, image: str, tries: int, master: str) -> str:
    if template is None:
        # upstream's default template (pkg/controller.v1/pytorch/initcontainer.go:35-46)
        return json.dumps([init_container("init-pytorch", image, [
            "sh", "-c", f"err=1;for i in $(seq {tries}); do if nslookup {master}; "
            "then err=0 && break; fi;echo waiting for master; sleep 2; done; exit $err"])])
    values = {"MasterAddr": master, "InitContainerImage": image, "MaxTries": str(tries)}
    text = re.sub(r"\{\{\s*\.(\w+)\s*\}\}", lambda m: values.get(m.group(1), m.group(0)),
                  template)
    containers = yaml.safe_load(text)
    if not isinstance(containers, list) or not all(
            isinstance(c, dict) and c.get("name") for c in containers):
        raise ValueError("the init container template must be a YAML list of containers, "
                         "each with a name")
    return json.dumps(containers)


def render_init_containers(template: str | None, image: str, tries: int, master: str
                           ) -> list[dict[str, Any]]:
    """The init containers of `template` (upstream's default when None) for one master
    address, its `{{.MasterAddr}}`, `{{.InitContainerImage}}` and `{{.MaxTries}}` filled in
    as upstream's; a fresh copy each call (pods own their specs)."""
    return list(json.loads(_rendered(template, image, tries, master)))
