"""Kueue and Kubernetes' own gang on the real node, composed: a queued job waits for Kueue
(suspended, nothing of its gang made), then, admitted, for the scheduler (its gang made,
no pod bound until every one fits), then runs to the end."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from testbed import kueue
from testbed.apiserver import release, serves_workload_api
from testbed.node import NODE_NAME, TestCluster
from tests.integration.kube import Kube
from tests.kueue.conftest import external_config
from tests.kueue.queues import Queues
from tests.node.conftest import manager_as_shipped, manager_with
from tests.node.kube import Namespace, state_folder, wait_for
from tests.node.test_kubegang import GROUPS, bound, gang, give_slots, ranks
from tests.require import cannot_run

pytestmark = [pytest.mark.node, pytest.mark.kueue, pytest.mark.skipif(
    not serves_workload_api(), reason=f"Kubernetes {release()} has no Workload API (1.37+)")]


@pytest.fixture(scope="module")
def queued_gangs(cluster: TestCluster, manager: None,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Kueue as released (configured as the README says, slots left to the nodes), and the
    deployed manager keeping the Workloads and ganging with Kubernetes' own gang."""
    assert cluster.api is not None
    if reason := kueue.unavailable():
        cannot_run(reason)
    kueue.install(cluster.api)
    manager_with(cluster, "--kueue-workloads", "all", "--gang-scheduler-name=workload-api")
    try:
        peer = kueue.Kueue(cluster.api, tmp_path_factory.mktemp("kueue-gang"), released=True,
                           config={**external_config(), "resources": {
                               "excludeResourcePrefixes": ["example.com/"]}})
        try:
            peer.wait_ready()
            yield
        finally:
            peer.stop()
    finally:
        give_slots(cluster, NODE_NAME, None)
        manager_as_shipped(cluster)


def test_a_queued_gang_waits_for_kueue_then_for_the_scheduler(
        cluster: TestCluster, queued_gangs: None) -> None:
    assert cluster.api is not None
    give_slots(cluster, NODE_NAME, 2)
    with Namespace(cluster, "queued-gang") as ns:
        queues = Queues(Kube(cluster.api, ns.name, existing=True))
        try:
            queue = queues.create(cpu="200m")  # two ranks' worth: the job is not admitted
            job = ranks("one", state_folder(cluster, ns))
            job["metadata"]["labels"] = {kueue.QUEUE_LABEL: queue}
            job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0][
                "resources"]["requests"] = {"cpu": "100m"}
            ns.apply(job)
            queues.wait_workload("TFJob", "one", timeout=60)
            time.sleep(5)
            # queued: suspended, and nothing of it made, its gang included
            assert (ns.get("tfjob", "one") or {})["spec"]["runPolicy"]["suspend"] is True
            assert ns.items("pods") == []
            assert gang(ns, "one") == (None, None)
            queues.create(cpu="1")  # room in the quota: Kueue admits it
            wait_for("the gang made", lambda: all(gang(ns, "one")) or None)
            wait_for("the group found unschedulable", lambda: any(
                c["type"] == "PodGroupInitiallyScheduled" and c["status"] == "False"
                for c in (ns.get(GROUPS, "one") or {}).get("status", {}).get(
                    "conditions", [])) or None)
            assert len(ns.items("pods")) == 3 and bound(ns, "one") == []
            give_slots(cluster, NODE_NAME, 3)  # room on the node: the scheduler binds them
            ns.succeeds("TFJob", "one", timeout=180)
        finally:
            for kind in ("clusterqueue", "resourceflavor"):
                cluster.kubectl("delete", f"{kind}.kueue.x-k8s.io", queues.name,
                                "--ignore-not-found", "--wait=false", check=False)
