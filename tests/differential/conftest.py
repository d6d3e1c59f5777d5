"""Fixtures of the differential suite: upstream's operator and trainop (twice: at its defaults
and with the shipped Deployment's flags), each on its own API server with its own CRDs and
webhook, all watching every namespace."""

from __future__ import annotations

import base64
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from testbed import upstream
from testbed.apiserver import TestAPIServer
from tests.differential.peers import VARIANTS, Side, Sides, scenario_of
from tests.integration.kube import REPO, Kube, Manager, convert_at, wait_converting
from tests.require import cannot_run
from trainop.local.ports import free_port

CRDS = REPO / "config" / "crd"
PODGROUPS = REPO / "tests" / "integration" / "crds" / "podgroups.yaml"


def start_upstream(logs: Path, *args: str
                   ) -> Iterator[tuple[TestAPIServer, upstream.UpstreamOperator]]:
    """An API server with upstream's CRDs (and the PodGroup kinds), upstream on it."""
    if not upstream.binary().is_file():
        cannot_run(f"no {upstream.binary().name} (hack/test-assets.sh builds it)")
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


def start_trainop(logs: Path, *args: str,
                  prepare: Callable[[TestAPIServer], None] | None = None,
                  aggregation: bool = False) -> Iterator[tuple[TestAPIServer, Manager]]:
    """An API server with trainop's CRDs (and the PodGroup kinds), its webhook registered
    as shipped and its MPIJob conversion called, the manager on it (`prepare`: what to do
    on the API server before the manager starts; `aggregation`: see TestAPIServer)."""
    logs.mkdir(parents=True, exist_ok=True)
    api = TestAPIServer(aggregation=aggregation).start()
    try:
        api.kubectl("apply", "--server-side", "-k", str(CRDS))
        api.kubectl("apply", "--server-side", "-f", str(PODGROUPS))
        api.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        port = free_port()
        convert_at(api, port)
        config = _webhook_configuration(port)
        api.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump(config))
        api.kubectl("create", "namespace", "trainop-system")
        if prepare is not None:
            prepare(api)
        manager = Manager(api, "--webhook-port", str(port), "--webhook-cert-dir",
                          str(logs / "certs"), "--webhook-config-name",
                          str(config["metadata"]["name"]),  # type: ignore[index]
                          "--webhook-service-namespace", "trainop-system", *args, log_dir=logs)
        try:
            manager.wait_ready()
            wait_converting(api)
            yield api, manager
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


def shipped_flags() -> list[str]:
    """The flags of the shipped Deployment (config/manager) that change what trainop does
    with a job; those of its plumbing (leader election, ports, certificates) left out."""
    deployment = yaml.safe_load((REPO / "config" / "manager" / "deployment.yaml").read_text())
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    plumbing = ("--leader-elect", "--metrics-", "--health-", "--webhook-")
    return [arg for arg in container["args"] if not arg.startswith(plumbing)]


def flags(variant: str) -> list[str]:
    return shipped_flags() if variant == "shipped" else []


@pytest.fixture(scope="session")
def trainop_sides(tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[dict[str, tuple[TestAPIServer, Manager]]]:
    """trainop at its defaults and as shipped, each on an API server of its own."""
    started = {v: start_trainop(tmp_path_factory.mktemp(f"trainop-{v}"), *flags(v))
               for v in VARIANTS}
    try:
        yield {v: next(it) for v, it in started.items()}
    finally:
        for it in started.values():
            it.close()


def new_sides(node: pytest.Item, upstream_side: tuple[TestAPIServer, upstream.UpstreamOperator],
              trainop_sides: dict[str, tuple[TestAPIServer, Manager]]) -> Sides:
    """A fresh namespace of the same name on every side, for the scenario of test `node`."""
    ns = f"d-{uuid.uuid4().hex[:8]}"
    up_api, operator = upstream_side
    return Sides(scenario_of(node.name), Side("upstream", Kube(up_api, ns), operator.metrics_port),
                 {v: Side(f"trainop {v}", Kube(api, ns), manager.metrics_port)
                  for v, (api, manager) in trainop_sides.items()})


@pytest.fixture
def sides(request: pytest.FixtureRequest,
          upstream_side: tuple[TestAPIServer, upstream.UpstreamOperator],
          trainop_sides: dict[str, tuple[TestAPIServer, Manager]]) -> Sides:
    return new_sides(request.node, upstream_side, trainop_sides)


STALE_CHECK = "test_no_pattern_of_the_readme_is_stale"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The stale-pattern check runs after every scenario of the run."""
    last = [item for item in items if item.name == STALE_CHECK]
    items[:] = [item for item in items if item.name != STALE_CHECK] + last
