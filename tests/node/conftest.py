"""The real single-node cluster (testbed.node), started once for the tests that need
it. Where it cannot run, they skip and say why; with TRAINOP_REQUIRE=1 (CI) that is a
failure instead (tests.require)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from testbed import manager_image
from testbed.node import HostState, TestCluster, Unavailable, unavailable
from tests.node.kube import python_job, wait_for
from tests.require import cannot_run

REPO = Path(__file__).resolve().parents[2]
NAMESPACE = "trainop-system"


def _cannot_run(reason: str) -> None:
    cannot_run(f"real node: {reason}")


@pytest.fixture(scope="session")
def cluster() -> Iterator[TestCluster]:
    reason = unavailable()
    if reason:
        _cannot_run(reason)
    node = TestCluster()
    try:
        node.start()
    except Unavailable as err:
        _cannot_run(str(err))
    before = node.host
    try:
        yield node
    finally:
        problems = node.stop()
        assert not problems, f"the host was not put back: {problems}"
        after = HostState.capture()
        assert before is not None
        assert (after.sysctls, after.links, after.mounts, after.dirs) == (
            before.sysctls, before.links, before.mounts, before.dirs)
        assert rules(after) == rules(before), "iptables rules left behind"


def rules(state: HostState) -> dict[str, list[str]]:
    """The iptables rules and chains of a saved state (not its counters or comments)."""
    return {cmd: [line for line in text.splitlines() if line.startswith(("-", ":KUBE",
                                                                          ":CNI"))]
            for cmd, text in state.iptables.items()}


@pytest.fixture(scope="session")
def manager_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The manager image, built from the Dockerfile (testbed.manager_image)."""
    reason = manager_image.available()
    if reason:
        _cannot_run(f"the manager image: {reason}")
    return manager_image.build(tmp_path_factory.mktemp("image") / "manager.tar")


@pytest.fixture(scope="session")
def manager(cluster: TestCluster, manager_archive: Path) -> Iterator[None]:
    """The manager deployed as the README says: the Dockerfile's image imported into the
    node, then `kubectl apply --server-side -k config/default`, and the rollout waited for."""
    cluster.import_image(manager_archive)
    applied = cluster.kubectl("apply", "--server-side", "-k", str(REPO / "config" / "default"),
                              timeout=180)
    assert "Warning" not in applied.stderr, applied.stderr  # nothing deprecated is installed
    out = cluster.kubectl("-n", NAMESPACE, "rollout", "status", "deployment/trainop-manager",
                          "--timeout=180s", check=False, timeout=200)
    assert out.returncode == 0, (out.stderr, manager_logs(cluster))
    wait_for_webhook(cluster)
    yield
    # what the API server warned the manager of (a deprecated API or field), from the logs of
    # its pods still there: nothing
    logs = cluster.kubectl("-n", NAMESPACE, "logs", "-l", "app.kubernetes.io/name=trainop",
                           "--tail=-1", "--prefix", check=False).stdout
    cluster.kubectl("delete", "-k", str(REPO / "config" / "default"), "--wait=false",
                    check=False)
    assert [line for line in logs.splitlines() if "API server warning" in line] == []


def manager_with(cluster: TestCluster, *args: str) -> None:
    """The deployed manager with `args` added, rolled out (undone by manager_as_shipped)."""
    patch = [{"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": arg}
             for arg in args]
    cluster.kubectl("-n", NAMESPACE, "patch", "deployment/trainop-manager", "--type=json",
                    "-p", json.dumps(patch))
    _rolled_out(cluster)


def manager_as_shipped(cluster: TestCluster) -> None:
    """The deployed manager as it was before manager_with, rolled out and answering."""
    cluster.kubectl("-n", NAMESPACE, "rollout", "undo", "deployment/trainop-manager")
    _rolled_out(cluster)
    wait_for_webhook(cluster)


def _rolled_out(cluster: TestCluster) -> None:
    """Until the Deployment's rollout is done and every pod of before is gone."""
    cluster.kubectl("-n", NAMESPACE, "rollout", "status", "deployment/trainop-manager",
                    "--timeout=180s", timeout=200)
    deployment = json.loads(cluster.kubectl("-n", NAMESPACE, "get",
                                            "deployment/trainop-manager", "-o", "json").stdout)
    wanted = deployment["spec"]["template"]["spec"]["containers"][0]["args"]

    def only_new_pods() -> bool:
        out = cluster.kubectl("-n", NAMESPACE, "get", "pods", "-o", "json", "-l",
                              "app.kubernetes.io/name=trainop")
        pods = json.loads(out.stdout)["items"]
        return bool(pods) and all("deletionTimestamp" not in p["metadata"] and
                                  p["spec"]["containers"][0]["args"] == wanted for p in pods)
    wait_for("the manager's old pods to go", only_new_pods, 120)


def wait_for_webhook(cluster: TestCluster, timeout: float = 60) -> None:
    """Until the webhook answers through its Service (a Ready pod is in its endpoints a
    moment later, and kube-proxy routes to it a moment after that)."""
    job = yaml.safe_dump(python_job("JAXJob", "probe", {"Worker": 1}, "pass"))

    def answered() -> bool:
        out = cluster.kubectl("apply", "--dry-run=server", "-n", "default", "-f", "-",
                              input=job, check=False)
        return out.returncode == 0
    wait_for("the webhook through its Service", answered, timeout)


def manager_logs(cluster: TestCluster) -> str:
    """What the manager's pods printed (for failure messages)."""
    return cluster.kubectl("-n", NAMESPACE, "logs", "-l", "app.kubernetes.io/name=trainop",
                           "--tail=100", "--prefix", check=False).stdout
