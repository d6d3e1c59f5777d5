"""mpi-operator v0.8.2 beside trainop on trainop's one MPIJob CRD: the same v2beta1 manifest
in two namespaces, one each. mpi-operator reads and writes its jobs at v2beta1 through
trainop's conversion. What the two make is compared: the SSH design's objects are the same;
the launcher is mpi-operator's batch/v1 Job and trainop's pod (the README says so)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from testbed import mpioperator
from testbed.apiserver import TestAPIServer
from tests.conftest import CRDS, SA_GROUPS, SA_TOKEN, SA_USER
from tests.integration.kube import Kube, converting_manager, install_rbac, wait_for
from tests.require import cannot_run

pytestmark = pytest.mark.differential
V2 = "mpijobs.v2beta1.kubeflow.org"
TEMPLATE = {"spec": {"containers": [{"name": "mpi", "image": "mpi:1"}]}}


@pytest.fixture(scope="module")
def beside(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kube, Kube]]:
    """(mpi-operator's namespace, trainop's), on an API server of their own."""
    if not mpioperator.binary().is_file():
        cannot_run(f"mpi-operator is not built: {mpioperator.binary()} (hack/test-assets.sh)")
    tmp = tmp_path_factory.mktemp("mpi-operator")
    with TestAPIServer(users={SA_TOKEN: (SA_USER, SA_GROUPS)}) as api:
        api.kubectl("apply", "--server-side", "-k", str(CRDS))
        api.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        install_rbac(api)
        tag = uuid.uuid4().hex[:6]
        theirs, ours = Kube(api, f"mpi-operator-{tag}"), Kube(api, f"trainop-{tag}")
        manager = converting_manager(api, tmp, "--namespace", ours.ns)
        operator = mpioperator.MPIOperator(api, "--namespace", theirs.ns,
                                           log_path=tmp / "mpi-operator.log")
        try:
            operator.wait_ready()
            yield theirs, ours
        finally:
            operator.stop()
            manager.stop()


def submit(kube: Kube, doc: dict[str, Any]) -> None:
    doc = {**doc, "metadata": {**doc["metadata"], "namespace": kube.ns}}
    kube.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump(doc))


def test_one_v2beta1_job_each(beside: tuple[Kube, Kube]) -> None:
    theirs, ours = beside
    job = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": "pi"},
           "spec": {"slotsPerWorker": 2, "mpiReplicaSpecs": {
               "Launcher": {"replicas": 1, "template": TEMPLATE},
               "Worker": {"replicas": 2, "template": TEMPLATE}}}}
    for side in beside:
        submit(side, job)
    for side in beside:
        wait_for(f"{side.ns}'s workers", lambda s=side: {"pi-worker-0", "pi-worker-1"} <= set(
            s.names("pods")) or None, 60)
        wait_for(f"{side.ns}'s config", lambda s=side: s.get("configmap", "pi-config"), 30)
    # the same: the workers, the headless Service, the SSH key, the hostfile's entries
    for resource in ("services", "secrets"):
        assert theirs.names(resource) == ours.names(resource), resource
    hosts = {side.ns: side.get("configmap", "pi-config")["data"]["hostfile"].replace(
        side.ns, "NS") for side in beside}
    assert hosts[theirs.ns] == hosts[ours.ns] == (
        "pi-worker-0.pi.NS.svc slots=2\npi-worker-1.pi.NS.svc slots=2\n")
    secret = theirs.get("secret", "pi-ssh")
    assert secret["type"] == ours.get("secret", "pi-ssh")["type"] == "kubernetes.io/ssh-auth"
    # the difference the README names: mpi-operator's launcher is a batch/v1 Job
    launcher = wait_for("mpi-operator's launcher Job",
                        lambda: theirs.get("jobs.batch", "pi-launcher"), 30)
    assert launcher["spec"]["template"]["spec"]["containers"][0]["image"] == "mpi:1"
    assert ours.get("jobs.batch", "pi-launcher") is None
    assert ours.get("pod", "pi-launcher") is not None
    # mpi-operator writes its status at v2beta1, through trainop's conversion
    status = json.loads(theirs.kubectl("get", V2, "pi", "-o", "json"))["status"]
    assert status["conditions"][0]["type"] == "Created"
    assert status["conditions"][0]["reason"] == "MPIJobCreated"


def test_mpi_operator_meets_no_error_on_the_shared_crd(beside: tuple[Kube, Kube]) -> None:
    # it reads and writes its jobs at v2beta1 through trainop's conversion: no Warning of
    # its own (a failed create, a status it could not write) on the job of the test above
    theirs, _ = beside
    events = json.loads(theirs.kubectl("get", "events", "-o", "json"))["items"]
    assert events and not [e for e in events if e["type"] == "Warning"], events
