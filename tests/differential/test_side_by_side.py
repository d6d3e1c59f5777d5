"""Upstream v1.9.4 and trainop given the same manifests and the same pod phases: what each
makes and reports must be the same, or be a row of the README's differences table."""

from __future__ import annotations

from typing import Any

import pytest

from tests.differential.peers import Pair, documented, undocumented
from tests.jobs import TYPICAL, manifest

pytestmark = pytest.mark.differential

UPSTREAM_KINDS = ("TFJob", "PyTorchJob", "MPIJob", "XGBoostJob", "PaddleJob", "JAXJob")


def job(kind: str, **kw: Any) -> dict[str, Any]:
    """A typical job of `kind` named `job`, as a user would submit it."""
    doc = manifest(kind, TYPICAL[kind], **kw)
    del doc["metadata"]["uid"], doc["metadata"]["namespace"]
    return doc


def _check(found: list[str]) -> None:
    missing = undocumented(found, documented())
    assert not missing, "differences from upstream not in the README's table:\n" + "\n".join(
        missing)


@pytest.mark.parametrize("kind", UPSTREAM_KINDS)
def test_a_job_that_succeeds(pair: Pair, kind: str) -> None:
    doc = job(kind)
    up, ours = pair.submit(doc)
    assert (ours.allowed, up.allowed) == (True, True), (ours, up)
    found = pair.compare(kind, "created")
    pair.set_all("Running")
    found += pair.compare(kind, "running")
    pair.set_all("Succeeded", exit_code=0)
    found += pair.compare(kind, "succeeded")
    print("\n".join(found))
    _check(found)
