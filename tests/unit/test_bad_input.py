"""Whatever a manifest holds, trainop answers with a job or with readable problems: never
an exception of another kind, never a traceback from the CLI."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.jobs import TYPICAL, manifest
from trainop.api import KINDS, InvalidJob, load_job
from trainop.engine import ClusterAddressing, Observed, reconcile
from trainop.frameworks import framework_for

scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=10), inner, max_size=3)),
    max_leaves=8)
FIELDS = ["replicas", "restartPolicy", "template", "restartLimit", "runPolicy", "spec",
          "elasticPolicy", "successPolicy", "slotsPerWorker", "nprocPerNode", "metadata",
          "containers", "name", "image", "ports", "env", "command", "cleanPodPolicy",
          "backoffLimit", "schedulingPolicy", "minAvailable", "managedBy", "suspend"]


@st.composite
def mangled(draw: st.DrawFn) -> dict[str, Any]:
    """A valid manifest with a few values replaced by anything at all."""
    kind = draw(st.sampled_from(sorted(KINDS)))
    doc = manifest(kind, TYPICAL[kind])
    for _ in range(draw(st.integers(1, 4))):
        node: Any = doc
        path = draw(st.lists(st.sampled_from(FIELDS + list(TYPICAL[kind]) + [
            KINDS[kind].replica_specs_field]), min_size=1, max_size=5))
        for key in path[:-1]:
            if isinstance(node, dict):
                node = node.setdefault(key, {}) if isinstance(node.get(key, {}), dict) \
                    else node[key]
        if isinstance(node, dict):
            node[path[-1]] = draw(values)
    return doc


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=mangled())
def test_any_manifest_gives_a_job_or_readable_problems(doc: dict[str, Any]) -> None:
    try:
        job = load_job(json.loads(json.dumps(doc)))
    except InvalidJob as err:
        assert err.problems
        for problem in err.problems:
            assert problem.path and problem.message and "\n" not in str(problem)
        return
    plan = reconcile(job, Observed(), dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
                     framework_for(job.kind), ClusterAddressing())
    assert all(o["metadata"]["namespace"] == job.namespace for o in plan.to_create)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=mangled())
def test_run_dry_run_never_shows_a_traceback(doc: dict[str, Any]) -> None:
    out = subprocess.run([sys.executable, "-m", "trainop.cli", "run", "--dry-run", "-"],
                         input=json.dumps(doc), capture_output=True, text=True, timeout=60)
    assert "Traceback" not in out.stderr
    assert out.returncode in (0, 2), out.stderr
    if out.returncode == 2:
        assert out.stderr.startswith("trainop: ")


LEADERS_OF_NONE = [("TFJob", {"Chief": 0, "Worker": 1}), ("TFJob", {"Master": 0, "Worker": 1}),
                   ("PaddleJob", {"Master": 0, "Worker": 2}),
                   ("PyTorchJob", {"Master": 0, "Worker": 1}),
                   ("XGBoostJob", {"Master": 0, "Worker": 1}),
                   ("MPIJob", {"Launcher": 0, "Worker": 1}),
                   ("MXJob", {"Scheduler": 0, "Server": 1, "Worker": 1})]
"""A leading replica type given with no replicas, for each kind that has one."""


@pytest.mark.parametrize(("kind", "replicas"), LEADERS_OF_NONE,
                         ids=[f"{k}-{next(iter(r))}" for k, r in LEADERS_OF_NONE])
def test_a_leader_of_no_replicas_is_refused_in_one_line(kind: str,
                                                        replicas: dict[str, int]) -> None:
    """By validation, `trainop validate` and `trainop run` (also --dry-run): never a job
    that waits for ever or ends without running, never a traceback."""
    doc = json.dumps(manifest(kind, replicas))
    with pytest.raises(InvalidJob) as err:
        load_job(json.loads(doc))
    leader = next(iter(replicas))
    assert any(leader in str(p) for p in err.value.problems), err.value.problems
    for args in (["validate", "-"], ["run", "--dry-run", "-"], ["run", "-"]):
        out = subprocess.run([sys.executable, "-m", "trainop.cli", *args], input=doc,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode in (1, 2) and "Traceback" not in out.stderr, out.stderr
        told = (out.stdout + out.stderr).strip().splitlines()
        assert len(told) == 1 and leader in told[0], told


def test_huge_replica_counts_are_refused() -> None:
    try:
        load_job(manifest("PyTorchJob", {"Master": 1, "Worker": 1_000_000}))
    except InvalidJob as err:
        assert "spec.pytorchReplicaSpecs: must ask for at most 10000 replicas in all, got " \
               "1000001" in [str(p) for p in err.problems]
    else:
        raise AssertionError("a million replicas were accepted")
