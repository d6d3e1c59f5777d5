"""trainop's MPIJob CRD installed over either past, with a job in it: training-operator
v1.9.4's (v1 stored, its operator's pods running) and mpi-operator's (v2beta1 stored, a job
of it running), as the README's steps say, and back again. Each on an API server of its
own."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from testbed import mpioperator, upstream
from testbed.apiserver import TestAPIServer
from testbed.jobcontrollers import JobControllers
from tests.conftest import CRDS, SA_GROUPS, SA_TOKEN, SA_USER
from tests.differential.test_mpi_operator import (
    launcher_pod,
    running,
    v2beta1_job,
    wait_condition,
)
from tests.integration.kube import Kube, converting_manager, install_rbac, wait_for
from trainop.api.conversion import WRITTEN_IN

pytestmark = pytest.mark.differential
CRD = "mpijobs.kubeflow.org"
V1, V2 = "mpijobs.v1.kubeflow.org", "mpijobs.v2beta1.kubeflow.org"
TEMPLATE = {"spec": {"containers": [{"name": "mpi", "image": "mpi:1"}]}}


@pytest.fixture
def api() -> Iterator[TestAPIServer]:
    with TestAPIServer(users={SA_TOKEN: (SA_USER, SA_GROUPS)}) as server:
        yield server


def install_trainop(api: TestAPIServer) -> None:
    """The README's step (the CRDs of `kubectl apply --server-side -k config/default`)."""
    api.kubectl("apply", "--server-side", "-k", str(CRDS))
    api.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
    install_rbac(api)


def read(kube: Kube, resource: str, name: str) -> dict[str, Any]:
    return dict(json.loads(kube.kubectl("get", resource, name, "-o", "json")))


def stored_versions(api: TestAPIServer) -> list[str]:
    crd = json.loads(api.kubectl("get", "crd", CRD, "-o", "json").stdout)
    return list(crd["status"]["storedVersions"])


def no_conversion(api: TestAPIServer) -> None:
    """The README's first step back: the CRD converts no more (the CA the manager gave it is
    the manager's field, which another CRD applied over it would leave behind)."""
    api.kubectl("patch", "crd", CRD, "--type=json", "-p", json.dumps([{
        "op": "replace", "path": "/spec/conversion", "value": {"strategy": "None"}}]))


def pods(kube: Kube) -> dict[str, str]:
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in kube.items("pods")}


def test_over_training_operators_mpijob_and_back(api: TestAPIServer, tmp_path: Path) -> None:
    kube = Kube(api)
    operator = upstream.UpstreamOperator(api, log_path=tmp_path / "upstream.log")
    try:
        operator.wait_ready()
        kube.apply({"apiVersion": "kubeflow.org/v1", "kind": "MPIJob",
                    "metadata": {"name": "pi"},
                    "spec": {"slotsPerWorker": 1, "mpiReplicaSpecs": {
                        "Launcher": {"replicas": 1, "template": TEMPLATE},
                        "Worker": {"replicas": 2, "template": TEMPLATE}}}})
        theirs = wait_for("upstream's pods", lambda: (lambda p: p if len(p) == 3 else None)(
            pods(kube)), 60)
    finally:
        operator.stop()
    written = read(kube, V1, "pi")

    install_trainop(api)
    assert stored_versions(api) == ["v1"]
    manager = converting_manager(api, tmp_path)
    try:
        wait_for("trainop's caches", lambda: "caches synced" in manager.log(), 30)
        time.sleep(5)  # a few reconciles: a pod it would remake would be gone by now
        assert pods(kube) == theirs, "no running pod is remade"
        at_v1 = read(kube, V1, "pi")
        assert at_v1["spec"] == written["spec"]
        at_v2 = read(kube, V2, "pi")
        assert at_v2["metadata"]["annotations"][WRITTEN_IN] == "v1"
        assert at_v2["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] == 2
    finally:
        manager.stop()

    # back: upstream's CRD again (nothing was stored at v2beta1)
    no_conversion(api)
    api.kubectl("apply", "--server-side", "-k",
                str(upstream.module_dir() / "manifests" / "base" / "crds"))
    assert [v["name"] for v in json.loads(api.kubectl(
        "get", "crd", CRD, "-o", "json").stdout)["spec"]["versions"]] == ["v1"]
    assert read(kube, V1, "pi")["spec"] == written["spec"]
    assert pods(kube) == theirs


def install_mpi_operators_crd(api: TestAPIServer) -> dict[str, Any]:
    theirs = mpioperator.crd()
    api.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump(theirs))
    wait_for("mpi-operator's CRD established", lambda: any(
        c["type"] == "Established" and c["status"] == "True" for c in json.loads(api.kubectl(
            "get", "crd", CRD, "-o", "json").stdout).get("status", {}).get("conditions") or []))
    return theirs


def test_over_mpi_operators_mpijob_and_back(api: TestAPIServer, tmp_path: Path) -> None:
    kube = Kube(api)
    theirs = install_mpi_operators_crd(api)
    kube.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump({
        "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
        "metadata": {"name": "pi", "namespace": kube.ns},
        "spec": {"runPolicy": {"suspend": True}, "mpiReplicaSpecs": {
            "Launcher": {"replicas": 1, "template": TEMPLATE},
            "Worker": {"replicas": 2, "template": TEMPLATE}}}}))
    written = read(kube, V2, "pi")

    # training-operator's CRD cannot be installed over it (kubeflow/trainer#1930) ...
    refused = api.kubectl("apply", "--server-side", "-f",
                          str(upstream.module_dir() / "manifests" / "base" / "crds" /
                              "kubeflow.org_mpijobs.yaml"), check=False)
    assert refused.returncode != 0 and "storedVersions" in refused.stderr, refused.stderr
    # ... trainop's can
    install_trainop(api)
    assert stored_versions(api) == ["v2beta1", "v1"]
    manager = converting_manager(api, tmp_path)
    try:
        at_v1 = read(kube, V1, "pi")
        assert at_v1["metadata"]["annotations"] == {WRITTEN_IN: "v2beta1"}
        assert at_v1["spec"]["transport"] == "SSH"
        assert read(kube, V2, "pi")["spec"] == written["spec"]

        # back, as the README says: store v2beta1, write every job again, forget v1
        api.kubectl("patch", "crd", CRD, "--type=json", "-p", json.dumps([
            {"op": "replace", "path": "/spec/versions/0/storage", "value": False},
            {"op": "replace", "path": "/spec/versions/1/storage", "value": True}]))
        every = json.loads(api.kubectl("get", V2, "-A", "-o", "json").stdout)
        api.kubectl("replace", "-f", "-", input=json.dumps(every))
        api.kubectl("patch", "crd", CRD, "--subresource=status", "--type=merge", "-p",
                    json.dumps({"status": {"storedVersions": ["v2beta1"]}}))
    finally:
        manager.stop()
    no_conversion(api)
    # the storage flags were patched: their CRD takes them over
    api.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-",
                input=yaml.safe_dump(theirs))
    crd = json.loads(api.kubectl("get", "crd", CRD, "-o", "json").stdout)
    assert [v["name"] for v in crd["spec"]["versions"]] == ["v2beta1"]
    assert read(kube, V2, "pi")["spec"] == written["spec"]


def test_a_job_mpi_operator_runs_is_taken_over_as_it_runs(
        api: TestAPIServer, tmp_path: Path) -> None:
    # mpi-operator ran it until now: its workers, its launcher Job and that Job's pod run
    kube = Kube(api)
    install_mpi_operators_crd(api)
    jobs = JobControllers(api, tmp_path / "job-controllers.log")
    try:
        jobs.wait_ready()
        operator = mpioperator.MPIOperator(api, "--namespace", kube.ns,
                                           log_path=tmp_path / "mpi-operator.log")
        try:
            operator.wait_ready()
            kube.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump(
                {**v2beta1_job("pi"), "metadata": {"name": "pi", "namespace": kube.ns}}))
            running(kube, "pi")
            wait_condition(kube, "pi", "Running")
        finally:
            operator.stop()
        before = pods(kube)
        install_trainop(api)
        manager = converting_manager(api, tmp_path)
        try:
            # trainop labels mpi-operator's launcher Job for its caches, and runs the job on
            adopted = wait_for("the launcher Job labelled", lambda: (kube.get(
                "jobs.batch", "pi-launcher")["metadata"].get("labels") or {}).get(
                "training.kubeflow.org/job-name"), 60)
            assert adopted == "pi"
            assert kube.get("jobs.batch", "pi-launcher")["metadata"]["ownerReferences"][0][
                "apiVersion"] == "kubeflow.org/v2beta1"  # mpi-operator's, kept
            assert pods(kube) == before, "no running pod is remade"
            kube.set_pod(launcher_pod(kube, "pi") or "", "Succeeded", exit_code=0)
            done = wait_condition(kube, "pi", "Succeeded")[-1]
            assert done["message"] == f"MPIJob {kube.ns}/pi successfully completed."
            assert set(pods(kube)) <= set(before)  # none made since
        finally:
            manager.stop()
    finally:
        jobs.stop()
