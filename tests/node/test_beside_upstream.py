"""trainop as it ships and upstream v1.9.4 beside it on the real node, where the kubelet, the
scheduler, the eviction API and the HPA controller act: a real MPI launcher, a pod evicted
through the API, an elastic job scaled by an HPA, a replica no node fits.

One cluster holds both sides, each in a namespace of its own: upstream's operator (a
process on this host, at the node's API server, its webhook registered for its namespace
only) watches only its own, and the deployed manager, while this module runs, only trainop's
(one flag added to its Deployment, taken back after). What each side makes and reports is read
as the differential suite reads it (tests/differential/peers.py) and must be a row of the
README's differences table; the scenarios are named `on_the_node_*`, and their own check
at the end fails on a row of theirs that matched nothing.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from testbed import upstream
from testbed.node import TestCluster
from tests.differential.peers import (
    NODE_SCENARIOS,
    RESOURCES,
    Ledger,
    Side,
    Sides,
    check,
    patterns,
    scenario_of,
)
from tests.e2e.conftest import EXAMPLES
from tests.integration.kube import Kube
from tests.node.conftest import manager_as_shipped, manager_with
from tests.node.kube import python_job, wait_for
from tests.node.test_examples import on_this_node
from tests.require import cannot_run

pytestmark = pytest.mark.node

LEDGER = Ledger(lambda scenario: scenario.startswith(NODE_SCENARIOS), every_scenario=False)
TOKEN_VOLUME = re.compile(r"kube-api-access-[a-z0-9]{5}")
NODE_COMPONENTS = ("kubelet", "default-scheduler")
"""Who tells events of a pod's life on the node (when is the node's, not the operator's)."""
SLEEP = "import time; time.sleep(600)"


class NodeSide(Side):
    """One operator's namespace on the real node, read as a test API server's is, but: the
    namespace's name (which differs between the sides here) as `<ns>`, the service account
    token's volume without its random suffix, of a pod only what the operator wrote and its
    phase, and the events of the kubelet and scheduler, and the HPA's other than a rescale,
    left out. No gang scheduler runs here (nor are the PodGroup kinds installed)."""

    resources = tuple(r for r in RESOURCES if not r.startswith("podgroups."))

    def snapshot(self, kind: str) -> dict[str, Any]:
        text = json.dumps(super().snapshot(kind)).replace(self.kube.ns, "<ns>")
        return dict(json.loads(TOKEN_VOLUME.sub("kube-api-access-<x>", text)))

    def normalise(self, obj: dict[str, Any]) -> dict[str, Any]:
        out = super().normalise(obj)
        if obj["kind"] == "Pod":
            out["status"] = {"phase": obj.get("status", {}).get("phase")}
        return out

    def keeps(self, event: dict[str, Any]) -> bool:
        component = (event.get("source") or {}).get("component") or \
            event.get("reportingComponent")
        if component == "horizontal-pod-autoscaler":
            return bool(event.get("reason") == "SuccessfulRescale")
        return component not in NODE_COMPONENTS


@pytest.fixture(scope="module")
def beside(cluster: TestCluster, manager: None, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[Kube, Kube]]:
    """Upstream's namespace and trainop's, each watched by its operator alone."""
    if not upstream.binary().is_file():
        cannot_run(f"no {upstream.binary().name} (hack/test-assets.sh builds it)")
    tag = uuid.uuid4().hex[:6]
    theirs, ours = Kube(cluster, f"upstream-{tag}"), Kube(cluster, f"trainop-{tag}")
    manager_with(cluster, f"--namespace={ours.ns}")
    operator = upstream.UpstreamOperator(
        cluster, "--namespace", theirs.ns, install_crds=False,
        log_path=tmp_path_factory.mktemp("upstream") / "upstream.log",
        webhook_namespaces={"matchLabels": {"kubernetes.io/metadata.name": theirs.ns}})
    try:
        operator.wait_ready()
        yield theirs, ours
    finally:
        operator.stop()
        manager_as_shipped(cluster)
        for kube in (theirs, ours):
            cluster.kubectl("delete", "namespace", kube.ns, "--wait=false", check=False)


@pytest.fixture
def sides(request: pytest.FixtureRequest, beside: tuple[Kube, Kube]) -> Iterator[Sides]:
    """The scenario's sides; its jobs, their pods and the namespace's events gone after."""
    theirs, ours = beside
    yield Sides(scenario_of(request.node.name), NodeSide("upstream", theirs, None),
                {"shipped": NodeSide("trainop", ours, None)})
    for kube in beside:
        for kind in ("pytorchjobs", "mpijobs"):
            kube.api.kubectl("-n", kube.ns, "delete", f"{kind}.kubeflow.org", "--all",
                             "--wait=false")
        kube.api.kubectl("-n", kube.ns, "delete", "pods", "--all", "--grace-period=0",
                         "--force")
        wait_for(f"the pods of {kube.ns} to go", lambda k=kube: not k.items("pods"), 120)
        kube.api.kubectl("-n", kube.ns, "delete", "events", "--all")


def submit(sides: Sides, doc: dict[str, Any]) -> None:
    up, ours = sides.submit(doc)
    assert up.allowed and all(a.allowed for a in ours.values()), (ours, up)


def until(sides: Sides, what: str, done: Any, timeout: float = 300) -> None:
    """Until `done(kube)` holds on every side."""
    sides.each(lambda side: wait_for(f"{what} ({side.name})", lambda: done(side.kube),
                                     timeout, 1))


def running_pods(kube: Kube, prefix: str = "job-") -> list[str]:
    return sorted(p["metadata"]["name"] for p in kube.items("pods")
                  if p["metadata"]["name"].startswith(prefix)
                  and p["status"].get("phase") == "Running"
                  and "deletionTimestamp" not in p["metadata"])


def ended(kind: str, name: str) -> Any:
    def done(kube: Kube) -> bool:
        conditions = kube.job(kind, name).get("status", {}).get("conditions", [])
        return any(c["type"] in ("Succeeded", "Failed") and c["status"] == "True"
                   for c in conditions)
    return done


def test_on_the_node_a_real_mpi_launcher(sides: Sides) -> None:
    """examples/mpi.yaml (MPIJob v1: the launcher's kubectl delivery, `mpirun` through
    `kubectl exec` into the workers) to its end."""
    job = on_this_node(EXAMPLES / "mpi.yaml")
    submit(sides, job)
    until(sides, "the MPIJob to end", ended("MPIJob", job["metadata"]["name"]))
    check(sides, sides.compare("MPIJob", "ended"), LEDGER)


def test_on_the_node_an_evicted_worker(sides: Sides) -> None:
    """A worker evicted through the eviction API (as `kubectl drain` does): the pod gets the
    DisruptionTarget condition, the kubelet stops it, and it is made again."""
    submit(sides, python_job("PyTorchJob", "job", {"Master": 1, "Worker": 1}, SLEEP,
                             restart="OnFailure"))
    until(sides, "both pods running", lambda kube: len(running_pods(kube)) == 2)
    found = sides.compare("PyTorchJob", "running")
    uids = {side.name: side.kube.get("pods", "job-worker-0")["metadata"]["uid"]
            for side in sides.sides}
    for side in sides.sides:
        eviction = {"apiVersion": "policy/v1", "kind": "Eviction",
                    "metadata": {"name": "job-worker-0", "namespace": side.kube.ns}}
        side.kube.api.kubectl(
            "create", "--raw", f"/api/v1/namespaces/{side.kube.ns}/pods/job-worker-0/eviction",
            "-f", "-", input=json.dumps(eviction))

    def again(side: Side) -> Any:
        def done(kube: Kube) -> bool:
            pod = kube.get("pods", "job-worker-0")
            return bool(pod and pod["metadata"]["uid"] != uids[side.name]
                        and pod["status"].get("phase") == "Running")
        return wait_for(f"a new job-worker-0 ({side.name})", lambda: done(side.kube), 180, 1)
    sides.each(again)
    found += sides.compare("PyTorchJob", "evicted")
    check(sides, found, LEDGER)


def test_on_the_node_an_elastic_job_scaled_by_the_hpa(sides: Sides) -> None:
    """An elastic PyTorchJob asking for fewer workers than its minimum: the HPA each operator
    made scales it (through the job's scale subresource) to the minimum."""
    cpu = {"type": "Resource", "resource": {
        "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}
    submit(sides, python_job("PyTorchJob", "job", {"Worker": 1}, SLEEP, restart="OnFailure",
                             spec={"elasticPolicy": {"rdzvBackend": "c10d", "minReplicas": 2,
                                                     "maxReplicas": 3, "metrics": [cpu]}}))
    until(sides, "two workers running", lambda kube: len(running_pods(kube)) == 2, 180)
    check(sides, sides.compare("PyTorchJob", "scaled by the hpa"), LEDGER)


def test_on_the_node_a_replica_that_cannot_start(sides: Sides) -> None:
    """A worker no node fits (the scheduler says why) beside a running master: what the job
    tells of the replica that waits."""
    doc = python_job("PyTorchJob", "job", {"Master": 1, "Worker": 1}, SLEEP,
                     restart="OnFailure")
    worker = doc["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    worker["nodeSelector"] = {"trainop.test/none": "x"}
    submit(sides, doc)

    def waiting(kube: Kube) -> bool:
        pod = kube.get("pods", "job-worker-0")
        return bool(running_pods(kube) == ["job-master-0"] and pod and any(
            c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
            for c in pod["status"].get("conditions", [])))
    until(sides, "the master running and the worker unschedulable", waiting, 120)
    check(sides, sides.compare("PyTorchJob", "waiting"), LEDGER)


def test_on_the_node_no_pattern_of_the_readme_is_stale() -> None:
    """Every row's pattern written for a scenario of the node that ran matched a difference
    in it (pytest runs a module's tests in order: this one last)."""
    if not LEDGER.ran:
        pytest.skip("no scenario beside upstream ran on the node")
    stale = LEDGER.stale(patterns())
    assert not stale, "patterns of the README's differences table that matched nothing:\n" \
        + "\n".join(stale)
