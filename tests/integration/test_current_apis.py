"""What Kubernetes releases before 1.25 could not show, on the release the suites run on:
the API server's own validation rules on trainop's CRDs, the APIs the manager needs being
served, and the warnings the API server sends for what is deprecated."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from testbed.apiserver import TestAPIServer, release
from tests.integration.kube import Kube
from trainop.cluster.reading.client import Client
from trainop.cluster.reading.config import from_kubeconfig

pytestmark = pytest.mark.integration


def jaxjob(name: str, queue: str | None, suspend: bool = False) -> dict[str, object]:
    policy = {"queue": queue} if queue else {"minAvailable": 1}
    return {"apiVersion": "kubeflow.org/v1", "kind": "JAXJob",
            "metadata": {"name": name},
            "spec": {"runPolicy": {"suspend": suspend, "schedulingPolicy": policy},
                     "jaxReplicaSpecs": {"Worker": {"replicas": 1, "template": {
                         "spec": {"containers": [{"name": "jax", "image": "x"}]}}}}}}


def test_the_suites_run_on_the_release_they_were_built_for(apiserver: TestAPIServer) -> None:
    version = json.loads(apiserver.kubectl("get", "--raw", "/version").stdout)
    wanted = release("kube")
    assert version["gitVersion"] == wanted
    assert (version["major"], version["minor"]) == tuple(wanted[1:].split(".")[:2])


@pytest.mark.parametrize("suspend", [False, True], ids=["running", "suspended"])
@pytest.mark.parametrize(("old", "new", "allowed"), [
    ("a", "b", False), (None, "b", True), ("a", None, True)], ids=["changed", "set", "unset"])
def test_the_api_server_itself_keeps_a_queue_once_set(kube: Kube, old: str | None,
                                                      new: str | None, allowed: bool,
                                                      suspend: bool) -> None:
    """Upstream's CRD rule `self == oldSelf`, with no webhook in the way: a transition
    rule, checked only where the stored and the new job both have a queue, suspended or not
    (the rule has no exception)."""
    kube.apply(jaxjob("queued", old, suspend))
    stored = kube.get("jaxjob", "queued")
    stored["spec"] = jaxjob("queued", new, suspend)["spec"]
    out = kube.api.kubectl("replace", "-n", kube.ns, "-f", "-", input=json.dumps(stored),
                           check=False)
    assert (out.returncode == 0) is allowed, out.stderr
    policy = kube.get("jaxjob", "queued")["spec"]["runPolicy"]["schedulingPolicy"]
    if not allowed:
        assert "spec.runPolicy.schedulingPolicy.queue is immutable" in out.stderr
        assert policy["queue"] == old
    else:
        assert policy.get("queue") == new


def test_the_api_server_itself_keeps_a_topology_key_once_set(kube: Kube) -> None:
    """trainop's CRD rule on `schedulingPolicy.topologyKey` (`self == oldSelf`), with no
    webhook in the way: a key changed is refused by the API server; one set or removed is
    the webhook's to refuse (tests/unit/test_webhook.py, and test_deploy.py beside it)."""
    job = jaxjob("placed", None)
    job["spec"]["runPolicy"]["schedulingPolicy"] = {"topologyKey": "example.com/rack"}
    kube.apply(job)
    stored = kube.get("jaxjob", "placed")
    stored["spec"]["runPolicy"]["schedulingPolicy"]["topologyKey"] = "example.com/zone"
    out = kube.api.kubectl("replace", "-n", kube.ns, "-f", "-", input=json.dumps(stored),
                           check=False)
    assert out.returncode != 0
    assert "spec.runPolicy.schedulingPolicy.topologyKey is immutable" in out.stderr, out.stderr
    policy = kube.get("jaxjob", "placed")["spec"]["runPolicy"]["schedulingPolicy"]
    assert policy["topologyKey"] == "example.com/rack"


def test_the_elastic_path_meets_autoscaling_v2(apiserver: TestAPIServer) -> None:
    groups = json.loads(apiserver.kubectl("get", "--raw", "/apis/autoscaling").stdout)
    assert "autoscaling/v2" in [v["groupVersion"] for v in groups["versions"]]


def test_the_client_logs_each_warning_it_is_sent_once(apiserver: TestAPIServer,
                                                      caplog: pytest.LogCaptureFixture
                                                      ) -> None:
    """A pod with the seccomp annotation that fields replaced draws a warning from every
    release since 1.22; the client tells each warning once (and the manager's tests fail on
    any such line in its log)."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "old-style", "annotations": {
            "seccomp.security.alpha.kubernetes.io/pod": "runtime/default"}},
        "spec": {"containers": [{"name": "c", "image": "x"}]}}

    async def create_twice() -> dict[str, None]:
        client = Client(from_kubeconfig(str(apiserver.kubeconfig)))
        try:
            for _ in range(2):  # a dry run: nothing is stored
                await client.request("POST", "/api/v1/namespaces/default/pods", pod,
                                     params={"dryRun": "All"})
            return client.warnings
        finally:
            await client.close()

    with caplog.at_level(logging.WARNING, logger="trainop.client"):
        warnings = asyncio.run(create_twice())
    assert len(warnings) == 1
    assert "seccomp.security.alpha.kubernetes.io/pod" in next(iter(warnings))
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1
    assert lines[0].startswith("API server warning on POST /api/v1/namespaces/default/pods: ")
