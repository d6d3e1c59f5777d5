"""Fixtures of the differential suite: upstream's operator and trainop, each on its own API
server with its own CRDs and webhook, both watching every namespace at their defaults."""

from __future__ import annotations

import base64
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.differential.peers import Pair, Side
from tests.integration.kube import REPO, Kube, Manager
from trainop.testing import upstream
from trainop.testing.apiserver import TestAPIServer, free_port

CRDS = REPO / "config" / "crd"
PODGROUPS = REPO / "tests" / "integration" / "crds" / "podgroups.yaml"


def start_upstream(logs: Path, *args: str
                   ) -> Iterator[tuple[TestAPIServer, upstream.UpstreamOperator]]:
    """An API server with upstream's CRDs (and the PodGroup kinds), upstream on it."""
    api = TestAPIServer().start()
    try:
        api.kubectl("apply", "--server-side", "-f", str(PODGROUPS))
        operator = upstream.UpstreamOperator(api, *args, log_path=logs / "upstream.log")
        try:
            yield api, operator.wait_ready()
        finally:
            operator.stop()
    finally:
        api.stop()


def start_trainop(logs: Path, *args: str) -> Iterator[tuple[TestAPIServer, Manager]]:
    """An API server with trainop's CRDs (and the PodGroup kinds), its webhook registered
    as shipped, the manager on it."""
    api = TestAPIServer().start()
    try:
        api.kubectl("apply", "--server-side", "-k", str(CRDS))
        api.kubectl("apply", "--server-side", "-f", str(PODGROUPS))
        api.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        port = free_port()
        config = _webhook_configuration(port)
        api.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump(config))
        api.kubectl("create", "namespace", "trainop-system")
        manager = Manager(api, "--webhook-port", str(port), "--webhook-cert-dir",
                          str(logs / "certs"), "--webhook-config-name",
                          str(config["metadata"]["name"]),  # type: ignore[index]
                          "--webhook-service-namespace", "trainop-system", *args, log_dir=logs)
        try:
            yield api, manager.wait_ready()
        finally:
            manager.stop()
    finally:
        api.stop()


@pytest.fixture(scope="session")
def upstream_side(tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[tuple[TestAPIServer, upstream.UpstreamOperator]]:
    yield from start_upstream(tmp_path_factory.mktemp("upstream"))


def _webhook_configuration(port: int) -> dict[str, object]:
    """The shipped ValidatingWebhookConfiguration (config/default), called at a loopback
    URL instead of through its Service."""
    rendered = subprocess.run(["kubectl", "kustomize", str(REPO / "config" / "default")],
                              capture_output=True, text=True, check=True).stdout
    config = next(d for d in yaml.safe_load_all(rendered)
                  if d and d["kind"] == "ValidatingWebhookConfiguration")
    for hook in config["webhooks"]:
        path = hook["clientConfig"]["service"]["path"]
        hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}",
                                "caBundle": base64.b64encode(b"placeholder").decode()}
    return dict(config)


@pytest.fixture(scope="session")
def trainop_side(tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[tuple[TestAPIServer, Manager]]:
    yield from start_trainop(tmp_path_factory.mktemp("trainop"))


@pytest.fixture
def pair(upstream_side: tuple[TestAPIServer, upstream.UpstreamOperator],
         trainop_side: tuple[TestAPIServer, Manager]) -> Pair:
    """A fresh namespace of the same name on both sides."""
    ns = f"d-{uuid.uuid4().hex[:8]}"
    return Pair(Side("upstream", Kube(upstream_side[0], ns)),
                Side("trainop", Kube(trainop_side[0], ns)))
