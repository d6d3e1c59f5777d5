"""Kueue as released on the real node, configured as the README says, and the deployed
manager keeping the Workloads (`--kueue-workloads all`): the queued example
(examples/kueue/) trains once Kueue admits it; a job admitted with topology-aware
scheduling is pinned to the node by Kueue's ungater, and the real scheduler and kubelet
run it to success."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import yaml

from testbed import kueue
from testbed.node import TestCluster
from tests.e2e.conftest import EXAMPLES
from tests.integration.kube import Kube
from tests.kueue.conftest import external_config
from tests.kueue.queues import API, Queues
from tests.node.conftest import manager_as_shipped, manager_logs, manager_with
from tests.node.kube import Namespace, python_job, wait_for
from tests.node.test_examples import on_this_node, run_to_the_end
from tests.require import cannot_run

pytestmark = [pytest.mark.node, pytest.mark.kueue]

HOSTNAME = "kubernetes.io/hostname"


@pytest.fixture(scope="module")
def queueing(cluster: TestCluster, manager: None,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[kueue.Kueue]:
    """Kueue as released, configured as the README says, beside the deployed manager
    started with `--kueue-workloads all` (after Kueue's CRDs), for this module's tests
    only."""
    assert cluster.api is not None
    if reason := kueue.unavailable():
        cannot_run(reason)
    kueue.install(cluster.api)
    manager_with(cluster, "--kueue-workloads", "all")
    try:
        peer = kueue.Kueue(cluster.api, tmp_path_factory.mktemp("kueue-node"), released=True,
                           config=external_config())
        try:
            yield peer.wait_ready()
        finally:
            peer.stop()
    finally:
        manager_as_shipped(cluster)


def test_the_queued_example_trains_once_kueue_admits_it(
        cluster: TestCluster, queueing: kueue.Kueue) -> None:
    queues = list(yaml.safe_load_all((EXAMPLES / "kueue" / "queues.yaml").read_text()))
    job = on_this_node(EXAMPLES / "kueue" / "pytorch.yaml")
    try:
        with Namespace(cluster, "queued") as ns:
            ns.apply(*queues)
            ns.apply(job)
            try:
                done, logs = run_to_the_end(ns, "PyTorchJob", "pytorch-queued")
            except AssertionError as err:
                raise AssertionError(
                    f"{err}\njob: {ns.get('PyTorchJob', 'pytorch-queued')}\nworkloads: "
                    f"{ns.items('workloads.kueue.x-k8s.io')}\npods: {ns.items('pods')}\n"
                    f"manager: {manager_logs(cluster)}") from None
            conditions = {c["type"]: c["status"] for c in done["status"]["conditions"]}
            assert conditions["Succeeded"] == "True", (done["status"], logs)
            assert logs.count("allreduce sum 6") == 3, logs
            # the Workload is told the job's end once that end is written (a moment after)
            finished = wait_for("the Workload finished", lambda: [
                c["reason"] for w in ns.items("workloads.kueue.x-k8s.io")
                for c in w["status"]["conditions"]
                if c["type"] == "Finished" and c["status"] == "True"], timeout=30)
            assert finished == ["Succeeded"]
    finally:
        for doc in queues[:2]:  # the cluster-scoped ones
            cluster.kubectl("delete", doc["kind"].lower(), doc["metadata"]["name"],
                            "--ignore-not-found", "--wait=false", check=False)


def test_a_queued_job_is_placed_on_the_node_by_kueue_and_runs(
        cluster: TestCluster, queueing: kueue.Kueue) -> None:
    assert cluster.api is not None
    kube = Kube(cluster.api)
    wait_for("the namespace's default ServiceAccount",
             lambda: kube.get("serviceaccount", "default"), 60)
    queues = Queues(kube)
    node = cluster.kubectl("get", "nodes", "-o", "jsonpath={.items[0].metadata.name}").stdout
    queues.apply({"apiVersion": API, "kind": "Topology", "metadata": {"name": kube.ns},
                  "spec": {"levels": [{"nodeLabel": HOSTNAME}]}})
    queues.create(cpu="1", flavor={"nodeLabels": {"kubernetes.io/os": "linux"},
                                   "topologyName": kube.ns})
    job = python_job("PyTorchJob", "placed", {"Master": 1, "Worker": 1},
                     "print('trained', flush=True)")
    job["metadata"]["labels"] = {kueue.QUEUE_LABEL: "queue"}
    for rs in job["spec"]["pytorchReplicaSpecs"].values():
        rs["template"]["metadata"] = {"annotations": {
            "kueue.x-k8s.io/podset-required-topology": HOSTNAME}}
        rs["template"]["spec"]["containers"][0]["resources"] = {
            "requests": {"cpu": "100m", "memory": "64Mi"}}
    kube.apply(job)
    try:
        kube.wait_condition("PyTorchJob", "placed", "Succeeded", timeout=180)
        pods = kube.items("pods")
        assert sorted(p["metadata"]["name"] for p in pods) == ["placed-master-0",
                                                               "placed-worker-0"]
        for p in pods:
            # the ungater's placement, which the scheduler followed
            assert p["spec"]["nodeSelector"][HOSTNAME] == node
            assert p["spec"]["nodeName"] == node
            assert not p["spec"].get("schedulingGates")
        assert queues.wait_condition("PyTorchJob", "placed", "Finished")["reason"] == \
            "Succeeded"
    finally:
        kube.kubectl("delete", "pytorchjob", "placed", "--wait=false")
        cluster.kubectl("delete", "namespace", kube.ns, "--wait=false", check=False)
