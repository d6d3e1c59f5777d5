"""A node that stops reporting (--lost-node-grace) against a real API server: the Node and
its Ready condition as the node lifecycle controller writes them, the pods bound to it as the
scheduler binds them (set by the test; no kubelet answers for the lost node, so a pod
deleted there stays Terminating, as on a cluster)."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Callable, Iterator

import pytest

from testbed.apiserver import TestAPIServer
from tests.integration.kube import Kube, Manager, condition_of, wait_for
from tests.jobs import manifest

pytestmark = pytest.mark.integration


@pytest.fixture
def nodes(apiserver: TestAPIServer) -> Iterator[Callable[[], str]]:
    """Make Nodes (Ready) with names of their own; deleted after the test."""
    made: list[str] = []

    def make() -> str:
        name = f"node-{uuid.uuid4().hex[:6]}"
        apiserver.kubectl("create", "-f", "-", input=json.dumps({
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}))
        made.append(name)
        ready(apiserver, name, "True")
        return name

    yield make
    for name in made:
        apiserver.kubectl("delete", "node", name, "--wait=false", check=False)


def ready(api: TestAPIServer, node: str, status: str) -> str:
    """Set `node`'s Ready condition, as its kubelet or the node lifecycle controller would;
    returns the time it changed."""
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    api.kubectl("patch", "node", node, "--subresource=status", "--type=merge", "-p",
                json.dumps({"status": {"conditions": [{
                    "type": "Ready", "status": status, "reason": "NodeStatusUnknown",
                    "lastHeartbeatTime": now, "lastTransitionTime": now}]}}))
    return now


def bind(kube: Kube, pod: str, node: str) -> None:
    """Bind `pod` to `node`, as the scheduler does."""
    kube.api.kubectl("create", "--raw", f"/api/v1/namespaces/{kube.ns}/pods/{pod}/binding",
                     "-f", "-", input=json.dumps({
                         "apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod},
                         "target": {"apiVersion": "v1", "kind": "Node", "name": node}}))


def test_a_pod_on_a_lost_node_is_told_deleted_after_the_grace_and_made_again_once_gone(
        kube: Kube, start_manager: Callable[..., Manager], nodes: Callable[[], str],
        apiserver: TestAPIServer) -> None:
    start_manager("--lost-node-grace", "3")
    good, lost = nodes(), nodes()
    kube.apply(manifest("JAXJob", {"Worker": 2}, name="jx"))
    kube.wait_pods(2)
    bind(kube, "jx-worker-0", good)
    bind(kube, "jx-worker-1", lost)
    kube.set_all("Running")
    kube.wait_condition("JAXJob", "jx", "Running")
    first = kube.get("pod", "jx-worker-1")["metadata"]["uid"]

    since = ready(apiserver, lost, "Unknown")
    entry = wait_for("the pod told waiting for its node", lambda: next((
        w for w in (kube.job("JAXJob", "jx").get("status") or {}).get("waitingReplicas") or []
        if w["reason"] == "NodeLost"), None))
    assert (entry["pod"], entry["replicaType"], entry["index"]) == ("jx-worker-1", "Worker", 1)
    assert entry["message"].startswith(
        f"node {lost} has not been Ready (Unknown) since {since}: ")
    events = [e for e in kube.items("events") if e["reason"] == "NodeLost"]
    assert len(events) == 1 and events[0]["type"] == "Warning"
    assert f"pod jx-worker-1 is on node {lost}" in events[0]["message"]

    # after the grace: deleted with its own grace period, so it stays until a kubelet
    # confirms; nothing is forced, no copy is made
    wait_for("the pod deleted", lambda: kube.get("pod", "jx-worker-1")["metadata"].get(
        "deletionTimestamp"), timeout=15)
    wait_for("the waiting entry says why it stays", lambda: "is being deleted" in next(
        w["message"] for w in kube.job("JAXJob", "jx")["status"]["waitingReplicas"]))
    pod = kube.get("pod", "jx-worker-1")
    assert pod["metadata"]["uid"] == first and kube.names("pods") == ["jx-worker-0",
                                                                      "jx-worker-1"]
    assert kube.get("pod", "jx-worker-0")["metadata"].get("deletionTimestamp") is None

    # an admin says the node is down: the pod goes at once, and is made again
    apiserver.kubectl("taint", "node", lost, "node.kubernetes.io/out-of-service=nodeshutdown"
                      ":NoExecute")
    wait_for("the pod made again", lambda: (p := kube.get("pod", "jx-worker-1")) and
             p["metadata"]["uid"] != first, timeout=15)
    job = kube.job("JAXJob", "jx")
    assert condition_of(job, "Failed") is None and condition_of(job, "Restarting") is None
    assert not job["status"]["replicaStatuses"]["Worker"].get("restarts")
