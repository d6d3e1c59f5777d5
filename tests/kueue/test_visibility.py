"""Kueue's visibility API (an extension API server in Kueue's manager, served through the
API server's aggregation layer) and `kueuectl` show where trainop's queued jobs wait, as
for any kind Kueue integrates itself (the `opted_in` cluster: Kueue as released plus the
README's lines, trainop keeping the Workloads)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from testbed.apiserver import TestAPIServer
from tests.integration.kube import Kube, wait_for
from tests.jobs import TYPICAL
from tests.kueue.queues import QUEUE, Queues
from tests.kueue.test_external import kueuectl
from tests.kueue.test_kueue import queued, run, wait_pods_of

pytestmark = pytest.mark.kueue



def pending(api: TestAPIServer, ns: str) -> list[dict[str, Any]]:
    """The visibility API's pending Workloads of the namespace's LocalQueue."""
    out = api.kubectl("get", "--raw", f"/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/"
                      f"{ns}/localqueues/{QUEUE}/pendingworkloads")
    return list(json.loads(out.stdout)["items"])


def test_the_visibility_api_and_kueuectl_show_where_trainops_jobs_wait(
        opted_in: TestAPIServer) -> None:
    kube = Kube(opted_in)
    queues = Queues(kube)
    replicas = sum(TYPICAL["PyTorchJob"].values())  # type: ignore[arg-type]
    queues.create(cpu=str(replicas))  # room for one job at a time
    workloads = {}
    for name in ("first", "second", "third"):
        kube.apply(queued("PyTorchJob", name))
        workloads[name] = queues.wait_workload("PyTorchJob", name)["metadata"]["name"]
        time.sleep(1.1)  # Kueue orders by creation time, in whole seconds
    wait_pods_of(kube, "first", replicas)
    run(kube, "PyTorchJob", "first")  # before Kueue's waitForPodsReady evicts it

    waiting = wait_for("two pending Workloads", lambda: (lambda items: items if len(
        items) == 2 else None)(pending(opted_in, kube.ns)), timeout=30)
    assert [(w["metadata"]["name"], w["metadata"]["ownerReferences"][0]["kind"],
             w["metadata"]["ownerReferences"][0]["name"], w["positionInLocalQueue"],
             w["localQueueName"]) for w in waiting] == [
        (workloads["second"], "PyTorchJob", "second", 0, QUEUE),
        (workloads["third"], "PyTorchJob", "third", 1, QUEUE)]

    rows = {line.split()[0]: line.split() for line in kueuectl(
        opted_in, "list", "workload", "-n", kube.ns).splitlines()[1:]}
    assert rows[workloads["first"]][1:6] == ["pytorchjob", "first", QUEUE, queues.name,
                                             "ADMITTED"]
    for name, position in (("second", "0"), ("third", "1")):
        assert rows[workloads[name]][1:7] == ["pytorchjob", name, QUEUE, queues.name,
                                              "PENDING", position]
    # Kueue's own events tell on trainop's Workloads as on any other
    told = {e["reason"] for e in kube.items("events")
            if e["involvedObject"]["kind"] == "Workload"
            and e["involvedObject"]["name"] == workloads["first"]}
    assert {"QuotaReserved", "Admitted"} <= told
