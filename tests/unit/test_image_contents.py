"""The manager image holds the product, not its test harness (which starts API servers and a
node, and changes iptables and sysctls as root)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from testbed.manager_image import app_layer

REPO = Path(__file__).resolve().parents[2]


def test_the_image_layer_the_tests_deploy_leaves_the_harness_out() -> None:
    with tarfile.open(fileobj=io.BytesIO(app_layer())) as tar:
        names = tar.getnames()
    assert any(n.endswith("trainop/cluster/manager.py") for n in names)
    assert any(n.endswith("trainop/api/kubeschema.json") for n in names)  # package data too
    assert not [n for n in names if "/testbed" in f"/{n}"]


def test_the_dockerfiles_context_leaves_the_harness_out() -> None:
    ignored = (REPO / ".dockerignore").read_text().split()
    assert "testbed" in ignored
    assert "COPY trainop ./trainop" in (REPO / "Dockerfile").read_text()
