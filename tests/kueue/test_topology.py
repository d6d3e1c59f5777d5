"""Topology-aware scheduling: Kueue admits a job with a scheduling gate in each template,
then its ungater takes the gate off each pod and pins it to the node TAS chose (through the
pod's nodeSelector). trainop makes every pod from the template as it is, never remakes a pod
for what the ungater changed, and remakes a pod Kueue marked failed (its node went away)
with the template's gate, for Kueue to place on another node. The nodes are Node objects
only (no kubelet: the test plays it), which is all Kueue's TAS reads."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.kube import Kube, wait_for
from tests.kueue.queues import API, Queues
from tests.kueue.test_kueue import pods_of, queued, run, succeed, wait_pods_of

pytestmark = pytest.mark.kueue

BLOCK = "trainop.test/block"
HOSTNAME = "kubernetes.io/hostname"
GATE = "kueue.x-k8s.io/topology"


def node(kube: Kube, name: str, ready: bool = True) -> None:
    """A Node of 4 CPUs in block `b1` of the test's pool, Ready or not, as a kubelet would
    report it (and, Ready, without the not-ready taint the API server gives a new Node, as
    the node lifecycle controller would take it off)."""
    kube.api.kubectl("apply", "--server-side", "-f", "-", input=f"""
apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels: {{{HOSTNAME}: {name}, {BLOCK}: b1, trainop.test/pool: {kube.ns}}}
""")
    status = "True" if ready else "False"
    kube.api.kubectl("patch", "node", name, "--subresource=status", "--type=merge", "-p",
                     f'{{"status": {{"capacity": {{"cpu": "4", "memory": "16Gi", "pods": '
                     f'"110"}}, "allocatable": {{"cpu": "4", "memory": "16Gi", "pods": "110"}},'
                     f' "conditions": [{{"type": "Ready", "status": "{status}", "reason": '
                     f'"KubeletReady", "lastHeartbeatTime": null}}]}}}}')
    if ready:
        kube.api.kubectl("taint", "node", name, "node.kubernetes.io/not-ready:NoSchedule-",
                         check=False)


def two_nodes(kube: Kube) -> Iterator[list[str]]:
    names = [f"{kube.ns}-n1", f"{kube.ns}-n2"]
    for name in names:
        node(kube, name)
    yield names
    kube.api.kubectl("delete", "node", *names, "--ignore-not-found", check=False)


@pytest.fixture
def nodes(kube: Kube) -> Iterator[list[str]]:
    yield from two_nodes(kube)


@pytest.fixture
def ext_nodes(ext_kube: Kube) -> Iterator[list[str]]:
    yield from two_nodes(ext_kube)


def placed(kube: Kube, job: str, count: int) -> dict[str, dict[str, Any]] | None:
    """Pod name -> pod, once `count` live pods of `job` are ungated and pinned to a node."""
    pods = {p["metadata"]["name"]: p for p in pods_of(kube, job)
            if p.get("status", {}).get("phase") != "Failed"}
    if len(pods) != count or any(p["spec"].get("schedulingGates") or HOSTNAME not in
                                 p["spec"].get("nodeSelector", {}) for p in pods.values()):
        return None
    return pods


def topology(queues: Queues, ns: str) -> None:
    """A Topology of blocks and hosts, and a ClusterQueue of 8 CPUs whose flavor uses it."""
    queues.apply({"apiVersion": API, "kind": "Topology", "metadata": {"name": ns},
                  "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": HOSTNAME}]}})
    queues.create(cpu="8", flavor={"nodeLabels": {"trainop.test/pool": ns},
                                   "topologyName": ns})


def test_pods_are_placed_by_kueue_and_remade_with_the_gate_when_their_node_fails(
        kube: Kube, queues: Queues, nodes: list[str]) -> None:
    topology(queues, kube.ns)
    doc = queued("PyTorchJob")
    for rs in doc["spec"]["pytorchReplicaSpecs"].values():
        rs["restartPolicy"] = "OnFailure"
        rs["template"]["metadata"] = {"annotations": {
            "kueue.x-k8s.io/podset-required-topology": BLOCK}}
    kube.apply(doc)

    first = {p["metadata"]["name"]: p["metadata"]["uid"]
             for p in wait_pods_of(kube, "job", 3)}
    job = kube.job("PyTorchJob", "job")
    for rs in job["spec"]["pytorchReplicaSpecs"].values():
        assert {"name": GATE} in rs["template"]["spec"]["schedulingGates"]  # Kueue's
    pods = wait_for("Kueue's ungater to place every pod", lambda: placed(kube, "job", 3))
    # the same pods: what the ungater changed is not a reason to remake one
    assert {name: p["metadata"]["uid"] for name, p in pods.items()} == first
    assert {p["spec"]["nodeSelector"][HOSTNAME] for p in pods.values()} <= set(nodes)
    for p in pods.values():
        assert p["spec"]["nodeSelector"]["trainop.test/pool"] == kube.ns  # the flavor's

    # the node of the master goes NotReady: Kueue marks its pods (not started there yet)
    # failed, and trainop remakes them from the template, gated, for Kueue to place again
    lost = pods["job-master-0"]["spec"]["nodeSelector"][HOSTNAME]
    other = next(n for n in nodes if n != lost)
    node(kube, lost, ready=False)

    def remade() -> dict[str, dict[str, Any]] | None:
        """The pods, once the master is a new pod and each new pod is on the other node
        (where only the ungater puts it: a pod made without the template's gate would have
        no host in its nodeSelector)."""
        found = placed(kube, "job", 3)
        if not found or found["job-master-0"]["metadata"]["uid"] == first["job-master-0"]:
            return None
        return found if all(p["spec"]["nodeSelector"][HOSTNAME] == other for name, p in
                            found.items() if p["metadata"]["uid"] != first[name]) else None

    again = wait_for("the lost node's pods remade and placed on the other node", remade, 60)
    told = {e["involvedObject"]["name"] for e in kube.items("events")
            if e["reason"] == "PodTerminatedByKueue"}
    # Kueue failed exactly the pods it had put on the lost node; each was remade
    assert told == {name for name, p in pods.items()
                    if p["spec"]["nodeSelector"][HOSTNAME] == lost}
    assert {name for name, p in again.items() if p["metadata"]["uid"] != first[name]} == told
    assert kube.job("PyTorchJob", "job")["spec"]["pytorchReplicaSpecs"]["Master"][
        "template"]["spec"]["schedulingGates"] == [{"name": GATE}]

    run(kube, "PyTorchJob", "job")
    succeed(kube, "PyTorchJob", "job")
    assert queues.wait_condition("PyTorchJob", "job", "Finished")["reason"] == "Succeeded"


def test_kueue_places_the_ranks_of_a_job_trainop_queues_in_order(
        ext_kube: Kube, ext_queues: Queues, ext_nodes: list[str]) -> None:
    # trainop's Workload asks for the topology with the replica-index label as the pod
    # index: Kueue's ungater fills a host with consecutive ranks before the next
    kube, queues = ext_kube, ext_queues
    topology(queues, kube.ns)
    doc = queued("JAXJob", cpu="2")
    worker = doc["spec"]["jaxReplicaSpecs"]["Worker"]
    worker["replicas"] = 4
    worker["template"]["metadata"] = {"annotations": {
        "kueue.x-k8s.io/podset-required-topology": BLOCK}}
    kube.apply(doc)
    request = queues.wait_workload("JAXJob", "job")["spec"]["podSets"][0]["topologyRequest"]
    assert request["podIndexLabel"] == "training.kubeflow.org/replica-index"
    pods = wait_for("Kueue's ungater to place every pod", lambda: placed(kube, "job", 4))
    # the stored job keeps its template: the gate is on the pods only
    assert "schedulingGates" not in kube.job("JAXJob", "job")["spec"]["jaxReplicaSpecs"][
        "Worker"]["template"]["spec"]
    host = {int(p["metadata"]["labels"]["training.kubeflow.org/replica-index"]):
            p["spec"]["nodeSelector"][HOSTNAME] for p in pods.values()}
    assert host[0] == host[1] != host[2] == host[3], host
    assert {host[0], host[2]} == set(ext_nodes)
    run(kube, "JAXJob", "job")
    succeed(kube, "JAXJob", "job")
    assert queues.wait_condition("JAXJob", "job", "Finished")["reason"] == "Succeeded"
