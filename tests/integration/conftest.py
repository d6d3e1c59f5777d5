"""Fixtures for the manager's integration tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from testbed.apiserver import TestAPIServer
from tests.integration.kube import Kube, Manager


@pytest.fixture
def kube(apiserver: TestAPIServer) -> Kube:
    return Kube(apiserver)


@pytest.fixture
def start_manager(apiserver: TestAPIServer, kube: Kube, tmp_path: Path
                  ) -> Iterator[Callable[..., Manager]]:
    """Start `trainop manager --namespace <the test's namespace> ARGS`; stopped after, and
    the test fails if the API server sent any of them a warning (a deprecated API or field:
    what the manager asks for must be current on the release the suites run on)."""
    started: list[Manager] = []

    def start(*args: str, namespace: bool = True, ready: bool = True) -> Manager:
        extra = ("--namespace", kube.ns) if namespace else ()
        m = Manager(apiserver, *extra, *args, log_dir=tmp_path)
        started.append(m)
        return m.wait_ready() if ready else m

    yield start
    for m in started:
        m.stop()
    assert [w for m in started for w in m.api_warnings()] == []


@pytest.fixture
def manager(start_manager: Callable[..., Manager]) -> Manager:
    return start_manager()
