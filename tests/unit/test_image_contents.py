"""The manager image holds the product, not its test harness (which starts API servers and a
node, and changes iptables and sysctls as root). The image itself is built from the
Dockerfile and read by tests/node/test_manager_image.py; this checks its build context."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_dockerfiles_context_leaves_the_harness_out() -> None:
    ignored = (REPO / ".dockerignore").read_text().split()
    assert "testbed" in ignored
    assert "COPY trainop ./trainop" in (REPO / "Dockerfile").read_text()
