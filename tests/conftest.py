"""Shared fixtures: the real test API server (started once per session, on demand)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from trainop.testing.apiserver import TestAPIServer


@pytest.fixture(scope="session")
def apiserver() -> Iterator[TestAPIServer]:
    """etcd + kube-apiserver on loopback with the trainop CRDs installed."""
    server = TestAPIServer().start()
    try:
        server.kubectl("apply", "--server-side", "-f", "config/crd/")
        server.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        yield server
    finally:
        server.stop()
