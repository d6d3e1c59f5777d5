"""The test cluster itself: a pod of the python image runs the host's interpreter, pods reach
each other by Service name through cluster DNS, and the API through the `kubernetes`
Service with their ServiceAccount's token."""

from __future__ import annotations

import pytest

from testbed.node import TestCluster
from tests.node.kube import Namespace, pod

pytestmark = pytest.mark.node


def test_pods_resolve_services_and_reach_the_api(cluster: TestCluster) -> None:
    with Namespace(cluster, "smoke") as ns:
        ns.apply(pod("server", ["python3", "-m", "http.server", "8000"],
                     labels={"app": "server"}))
        ns.apply({"apiVersion": "v1", "kind": "Service",
                  "metadata": {"name": "server"},
                  "spec": {"clusterIP": "None", "selector": {"app": "server"},
                           "ports": [{"port": 8000}]}})
        ns.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                  "metadata": {"name": "default-view"},
                  "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                              "name": "view"},
                  "subjects": [{"kind": "ServiceAccount", "name": "default",
                                "namespace": ns.name}]})
        ns.wait_phase("server", "Running")
        ns.apply(pod("client", ["python3", "-c", CLIENT], restart="Never"))
        assert ns.wait_phase("client", "Succeeded") == "Succeeded", ns.logs("client")
        out = ns.logs("client")
        assert "http 200 from server" in out
        assert "api 200 for pods" in out


CLIENT = r"""
import json, os, socket, ssl, time, urllib.request
for _ in range(60):  # the Service's record appears within a second or two
    try:
        socket.gethostbyname("server")
        break
    except OSError:
        time.sleep(0.5)
with urllib.request.urlopen("http://server:8000/", timeout=10) as r:
    print("http", r.status, "from server", flush=True)
sa = "/var/run/secrets/kubernetes.io/serviceaccount"
ctx = ssl.create_default_context(cafile=f"{sa}/ca.crt")
ns = open(f"{sa}/namespace").read()
req = urllib.request.Request(
    f"https://kubernetes.default.svc/api/v1/namespaces/{ns}/pods",
    headers={"Authorization": "Bearer " + open(f"{sa}/token").read()})
with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
    print("api", r.status, "for pods", json.load(r)["kind"], flush=True)
"""
