"""Shared fixtures: the real test API server (started once per session, on demand), and
the rank supervisor built from this checkout."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from testbed.apiserver import TestAPIServer, release
from testbed.supervisor import NoGo, built
from tests.require import cannot_run

CRDS = Path(__file__).resolve().parents[1] / "config" / "crd"
SA_TOKEN = "trainop-manager-sa-token"
SA_USER = "system:serviceaccount:trainop-system:trainop-manager"
SA_GROUPS = ["system:serviceaccounts", "system:serviceaccounts:trainop-system",
             "system:authenticated"]
"""The manager's ServiceAccount, as the API server sees it (the test server runs no token
controller, so the token is a static one)."""


def pytest_report_header() -> list[str]:
    """The releases the suites run on, as the binaries themselves tell them."""
    lines = [f"kubernetes {release()}, etcd {release('etcd')}"]
    assets = os.environ.get("KUBEBUILDER_ASSETS")
    for binary in ("kube-apiserver", "kubelet", "etcd", "containerd"):
        path = Path(assets or "", binary)
        if assets and path.is_file():
            out = subprocess.run([str(path), "--version"], capture_output=True, text=True,
                                 timeout=30)
            lines.append(f"{path}: {(out.stdout or out.stderr).strip().splitlines()[0]}")
    return lines


@pytest.fixture(scope="session")
def apiserver() -> Iterator[TestAPIServer]:
    """etcd + kube-apiserver on loopback with the trainop CRDs installed."""
    server = TestAPIServer(users={SA_TOKEN: (SA_USER, SA_GROUPS)}).start()
    try:
        server.kubectl("apply", "--server-side", "-k", str(CRDS))
        server.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def supervisor() -> Path:
    """The rank supervisor built from this checkout (supervisor/)."""
    try:
        return built()
    except NoGo as err:
        cannot_run(str(err))
