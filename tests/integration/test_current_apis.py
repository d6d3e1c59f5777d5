"""What Kubernetes releases before 1.25 could not show, on the release the suites run on:
the API server's own validation rules on trainop's CRDs, the APIs the manager needs being
served, and the warnings the API server sends for what is deprecated."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from tests.integration.kube import Kube
from trainop.cluster.client import Client
from trainop.cluster.config import from_kubeconfig
from trainop.testing.apiserver import TestAPIServer, release

pytestmark = pytest.mark.integration


def pytorchjob(name: str, queue: str) -> dict[str, object]:
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": name},
            "spec": {"runPolicy": {"schedulingPolicy": {"queue": queue}},
                     "pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {
                         "spec": {"containers": [{"name": "pytorch", "image": "x"}]}}}}}}


def test_the_suites_run_on_the_release_they_were_built_for(apiserver: TestAPIServer) -> None:
    version = json.loads(apiserver.kubectl("get", "--raw", "/version").stdout)
    wanted = release("kube")
    assert version["gitVersion"] == wanted
    assert (version["major"], version["minor"]) == tuple(wanted[1:].split(".")[:2])


def test_the_api_server_itself_refuses_a_change_of_queue(kube: Kube) -> None:
    """Upstream's CRD rule (`self == oldSelf`), with no webhook in the way."""
    kube.apply(pytorchjob("queued", "team-a"))
    out = kube.api.kubectl("patch", "pytorchjob", "queued", "-n", kube.ns, "--type=merge",
                           "-p", '{"spec":{"runPolicy":{"schedulingPolicy":'
                           '{"queue":"team-b"}}}}', check=False)
    assert out.returncode != 0
    assert "spec.runPolicy.schedulingPolicy.queue is immutable" in out.stderr
    job = kube.get("pytorchjob", "queued")
    assert job["spec"]["runPolicy"]["schedulingPolicy"]["queue"] == "team-a"
    # other fields of the policy still change
    kube.kubectl("patch", "pytorchjob", "queued", "--type=merge",
                 "-p", '{"spec":{"runPolicy":{"schedulingPolicy":{"priorityClass":"high"}}}}')


def test_the_elastic_path_meets_autoscaling_v2(apiserver: TestAPIServer) -> None:
    groups = json.loads(apiserver.kubectl("get", "--raw", "/apis/autoscaling").stdout)
    assert "autoscaling/v2" in [v["groupVersion"] for v in groups["versions"]]


def test_the_client_logs_each_warning_it_is_sent_once(apiserver: TestAPIServer,
                                                      caplog: pytest.LogCaptureFixture
                                                      ) -> None:
    """v1 Endpoints are deprecated from 1.33: the API server says so on every read, and the
    client tells it (the manager's tests fail on any such line in its log)."""
    async def read_twice() -> set[str]:
        client = Client(from_kubeconfig(str(apiserver.kubeconfig)))
        try:
            for _ in range(2):
                await client.get("/api/v1/namespaces/default/endpoints")
            return client.warnings
        finally:
            await client.close()

    with caplog.at_level(logging.WARNING, logger="trainop.client"):
        warnings = asyncio.run(read_twice())
    assert len(warnings) == 1
    assert "v1 Endpoints is deprecated" in next(iter(warnings))
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1
    assert lines[0].startswith("API server warning on GET /api/v1/namespaces/default/endpoints")

