"""One MPIJob CRD serving v1 (stored) and mpi-operator's v2beta1, converted by the
manager's webhook, on a real kube-apiserver: a job written at either version reads at both,
what one version lacks survives the other, a v2beta1 job runs, and the shipped RBAC lets
the manager give the CRD its CA."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from testbed.apiserver import TestAPIServer
from tests.conftest import CRDS, SA_GROUPS, SA_TOKEN, SA_USER
from tests.integration.kube import REPO, Kube, converting_manager, install_rbac, wait_for
from trainop.api.conversion import WRITTEN_IN, fields_annotation

pytestmark = pytest.mark.integration
CRD = "mpijobs.kubeflow.org"
V1, V2 = "mpijobs.v1.kubeflow.org", "mpijobs.v2beta1.kubeflow.org"
TEMPLATE = {"spec": {"containers": [{"name": "mpi", "image": "mpi:1"}]}}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestAPIServer]:
    """An API server of its own (its MPIJob CRD converts through this module's manager),
    with the install's CRDs and RBAC; the manager runs as the install's ServiceAccount."""
    tmp = tmp_path_factory.mktemp("versions")
    with TestAPIServer(users={SA_TOKEN: (SA_USER, SA_GROUPS)}) as api:
        api.kubectl("apply", "--server-side", "-k", str(CRDS))
        api.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        install_rbac(api)
        manager = converting_manager(api, tmp)
        try:
            api.manager_log = manager.log  # type: ignore[attr-defined]
            api.manager_log_path = manager.log_path  # type: ignore[attr-defined]
            yield api
        finally:
            manager.stop()


def apply(kube: Kube, doc: dict[str, Any]) -> None:
    doc = json.loads(json.dumps(doc))
    doc["metadata"]["namespace"] = kube.ns
    kube.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump(doc))


def read(kube: Kube, version: str, name: str) -> dict[str, Any]:
    return dict(json.loads(kube.kubectl("get", version, name, "-o", "json")))


def test_a_v2beta1_job_reads_at_v1_as_written_in_v2beta1(cluster: TestAPIServer) -> None:
    kube = Kube(cluster)
    apply(kube, {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
                 "metadata": {"name": "pi"},
                 "spec": {"slotsPerWorker": 2, "mpiImplementation": "Intel",
                          "mpiReplicaSpecs": {"Launcher": {"replicas": 1, "template": TEMPLATE},
                                              "Worker": {"replicas": 2, "template": TEMPLATE}}}})
    at_v1 = read(kube, V1, "pi")
    assert at_v1["apiVersion"] == "kubeflow.org/v1"
    assert at_v1["metadata"]["annotations"] == {WRITTEN_IN: "v2beta1"}
    # mpi-operator's CRD defaults, then what the v1 form says the v2beta1 API leaves unsaid
    assert {k: v for k, v in at_v1["spec"].items() if k != "mpiReplicaSpecs"} == {
        "slotsPerWorker": 2, "mpiImplementation": "Intel", "launcherCreationPolicy":
        "AtStartup", "runLauncherAsWorker": False, "sshAuthMountPath": "/root/.ssh",
        "transport": "SSH"}
    at_v2 = read(kube, V2, "pi")
    assert "annotations" not in at_v2["metadata"]
    assert at_v2["spec"]["mpiImplementation"] == "Intel"
    # and trainop runs it, as the SSH design it was written in: a key, no kubectl
    wait_for("the job's workers", lambda: kube.names("pods") == ["pi-worker-0", "pi-worker-1"]
             or None)
    # its launcher is mpi-operator's batch/v1 Job (its pod is the Job controller's to make)
    launcher = wait_for("its launcher Job", lambda: kube.get("jobs.batch", "pi-launcher"))
    assert launcher["spec"]["template"]["metadata"]["labels"][
        "training.kubeflow.org/job-role"] == "launcher"
    assert kube.get("secret", "pi-ssh") is not None
    hostfile = kube.get("configmap", "pi-config")["data"]["hostfile"]
    assert hostfile == (f"pi-worker-0.pi.{kube.ns}.svc:2\npi-worker-1.pi.{kube.ns}.svc:2\n")
    assert read(kube, V2, "pi")["status"]["conditions"][0]["type"] == "Created"


def test_v1_fields_survive_a_v2beta1_client(cluster: TestAPIServer) -> None:
    kube = Kube(cluster)
    apply(kube, {"apiVersion": "kubeflow.org/v1", "kind": "MPIJob",
                 "metadata": {"name": "old"},
                 "spec": {"mainContainer": "mpi", "runPolicy": {"suspend": True,
                                                                "restartScope": "Job"},
                          "mpiReplicaSpecs": {
                              "Launcher": {"replicas": 1, "template": TEMPLATE},
                              "Worker": {"replicas": 1, "restartLimit": 2,
                                         "template": TEMPLATE}}}})
    at_v2 = read(kube, V2, "old")
    annotations = at_v2["metadata"]["annotations"]
    assert annotations[WRITTEN_IN] == "v1"
    assert json.loads(annotations[fields_annotation("v1")]) == {"spec": {
        "mainContainer": "mpi", "runPolicy": {"restartScope": "Job"},
        "mpiReplicaSpecs": {"Worker": {"restartLimit": 2}}}}
    assert "mainContainer" not in at_v2["spec"]
    # a v2beta1 client (Kueue's MPIJob integration) resumes it: a write at v2beta1
    at_v2["spec"]["runPolicy"]["suspend"] = False
    kube.kubectl("replace", "-f", "-", input=json.dumps(at_v2))
    at_v1 = read(kube, V1, "old")
    assert at_v1["spec"]["runPolicy"] == {"suspend": False, "restartScope": "Job"}
    assert at_v1["spec"]["mainContainer"] == "mpi"
    assert at_v1["spec"]["mpiReplicaSpecs"]["Worker"]["restartLimit"] == 2
    assert "annotations" not in at_v1["metadata"]


def test_a_field_of_the_other_version_is_refused_by_the_api_server(
        cluster: TestAPIServer) -> None:
    kube = Kube(cluster)
    doc = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
           "metadata": {"name": "mixed", "namespace": kube.ns},
           "spec": {"mainContainer": "mpi", "mpiReplicaSpecs": {
               "Launcher": {"replicas": 1, "template": TEMPLATE}}}}
    created = cluster.kubectl("create", "-f", "-", input=yaml.safe_dump(doc), check=False)
    assert created.returncode != 0
    assert 'unknown field "spec.mainContainer"' in created.stderr, created.stderr
    applied = cluster.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump(doc),
                              check=False)
    assert applied.returncode != 0
    assert ".spec.mainContainer: field not declared in schema" in applied.stderr
    assert kube.get(V1, "mixed") is None


def hostile(kube: Kube, name: str, version: str, annotations: dict[str, str]
            ) -> subprocess.CompletedProcess[str]:
    """A create at `version` of an MPIJob whose author wrote `annotations`."""
    doc = {"apiVersion": f"kubeflow.org/{version}", "kind": "MPIJob",
           "metadata": {"name": name, "namespace": kube.ns, "annotations": annotations},
           "spec": {"mpiReplicaSpecs": {"Launcher": {"replicas": 1, "template": TEMPLATE}}}}
    return kube.api.kubectl("create", "-f", "-", input=yaml.safe_dump(doc), check=False)


@pytest.mark.parametrize(("annotations", "said"), [
    ({fields_annotation("v1"): "{not json"}, "trainop.kubeflow.org/v1-fields is not JSON"),
    # what v2beta1 has a place for is written there, where its schema checks it
    ({fields_annotation("v1"): '{"spec": {"runPolicy": {"activeDeadlineSeconds": "x"}}}'},
     "spec.runPolicy.activeDeadlineSeconds has a place at the job's own version"),
    ({fields_annotation("v1"): '{"spec": {"mpiReplicaSpecs": {"Worker": '
                               '{"restartLimit": "x"}}}}'},
     "v1-fields: spec.mpiReplicaSpecs.Worker.restartLimit: Input should be a valid integer"),
    # a status only the status subresource writes
    ({fields_annotation("v1"): '{"status": {"conditions": [{"type": "Succeeded", '
                               '"status": "True"}]}}'},
     "v1-fields may hold spec fields only, not status"),
    ({WRITTEN_IN: "v3"}, "written-in: 'v3' is not a version of MPIJob"),
])
def test_a_v2beta1_write_whose_annotations_v1_cannot_take_is_refused_and_nothing_stored(
        cluster: TestAPIServer, annotations: dict[str, str], said: str) -> None:
    kube = Kube(cluster)
    out = hostile(kube, "bad", "v2beta1", annotations)
    assert out.returncode != 0
    assert said in out.stderr, out.stderr
    assert kube.get(V1, "bad") is None


def test_no_job_an_author_annotates_stops_a_v2beta1_reader_of_any_namespace(
        cluster: TestAPIServer) -> None:
    # every reader of v2beta1 (Kueue's MPIJob integration, MultiKueue, mpi-operator) lists
    # and watches every namespace: one job that cannot be read at v2beta1 would stop them
    victim, tenant = Kube(cluster), Kube(cluster)
    watch = subprocess.Popen(["kubectl", "--kubeconfig", str(cluster.kubeconfig), "get", V2,
                              "-A", "--watch", "-o", "name"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1)  # the watch is open
        writes = [
            # a stash of v2beta1's own fields on a job written at v2beta1: meaningless
            ("own", "v2beta1", {fields_annotation("v2beta1"): "not-json"}),
            # stored at v1 as written: only a read at v2beta1 takes them
            ("stash", "v1", {fields_annotation("v2beta1"): "not-json"}),
            ("typed", "v1", {fields_annotation("v2beta1"): '{"spec": {"slotsPerWorker": "x"}}'}),
            ("where", "v1", {WRITTEN_IN: "v3"}),
        ]
        for name, version, annotations in writes:
            created = hostile(tenant, name, version, annotations)
            assert created.returncode == 0, created.stderr
        listed = cluster.kubectl("get", V2, "-A", "-o", "json")
        assert listed.returncode == 0, listed.stderr
        jobs = {j["metadata"]["name"]: j for j in json.loads(listed.stdout)["items"]}
        assert {"own", "stash", "typed", "where"} <= set(jobs)
        # what could not be taken is left out of the v2beta1 form; nothing else is
        assert fields_annotation("v2beta1") not in jobs["own"]["metadata"].get(
            "annotations", {})
        assert "slotsPerWorker" not in jobs["typed"]["spec"] or \
            jobs["typed"]["spec"]["slotsPerWorker"] == 1  # the schema's default
        assert read(tenant, V1, "own")["metadata"].get("annotations") in (None, {
            WRITTEN_IN: "v2beta1"})
        apply(victim, {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
                       "metadata": {"name": "victim"},
                       "spec": {"mpiReplicaSpecs": {"Launcher": {"replicas": 1,
                                                                 "template": TEMPLATE}}}})
        assert read(victim, V2, "victim")["spec"]["mpiReplicaSpecs"]
        out = watch.stdout
        assert out is not None
        os.set_blocking(out.fileno(), False)
        told: list[str] = []

        def victim_told() -> bool | None:
            told.append(out.read() or "")
            return "victim" in "".join(told) or None

        wait_for("the watch to tell the victim's job", victim_told, 30)
        assert watch.poll() is None  # still watching
        log = cluster.manager_log_path.read_text()  # type: ignore[attr-defined]
        assert f"MPIJob {tenant.ns}/stash read at kubeflow.org/v2beta1: annotation " \
            "trainop.kubeflow.org/v2beta1-fields is not JSON" in log, log
    finally:
        watch.kill()


def test_the_manager_gave_the_crd_its_ca_as_the_installs_service_account(
        cluster: TestAPIServer, tmp_path: Path) -> None:
    # the fixture's manager runs with the install's RBAC and no more
    crd = json.loads(cluster.kubectl("get", "crd", CRD, "-o", "json").stdout)
    assert crd["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"]
    assert "CA bundle patched into the conversion webhook of CRD mpijobs.kubeflow.org" in \
        cluster.manager_log()  # type: ignore[attr-defined]


def test_the_v2beta1_example_applies_and_reads_back(cluster: TestAPIServer) -> None:
    kube = Kube(cluster)
    path = REPO / "trainop" / "examples" / "mpi-v2beta1.yaml"
    kube.kubectl("apply", "--server-side", "-f", str(path))
    written = yaml.safe_load(path.read_text())
    got = read(kube, V2, written["metadata"]["name"])
    # nothing pruned, nothing changed; added only what mpi-operator's schema defaults
    assert got["spec"] == {**written["spec"], "launcherCreationPolicy": "AtStartup",
                           "mpiImplementation": "OpenMPI", "runLauncherAsWorker": False,
                           "sshAuthMountPath": "/root/.ssh",
                           "runPolicy": {**written["spec"]["runPolicy"], "suspend": False}}


def test_the_manager_runs_over_an_mpijob_crd_that_converts_nothing(tmp_path: Path) -> None:
    # a cluster whose MPIJob CRD serves v1 only (an install before v2beta1, or
    # training-operator's CRD kept): the manager has no CA to give it, says so, and runs
    with TestAPIServer() as api:
        api.kubectl("apply", "--server-side", "-k", str(CRDS))
        crd = yaml.safe_load((CRDS / f"kubeflow.org_{CRD.split('.')[0]}.yaml").read_text())
        crd["spec"]["versions"] = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
        crd["spec"]["conversion"] = {"strategy": "None"}
        api.kubectl("replace", "-f", "-", input=yaml.safe_dump(crd))
        api.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        manager = converting_manager(api, tmp_path, crd_converts=False)
        try:
            kube = Kube(api)
            apply(kube, {"apiVersion": "kubeflow.org/v1", "kind": "MPIJob",
                         "metadata": {"name": "pi"}, "spec": {"mpiReplicaSpecs": {
                             "Launcher": {"replicas": 1, "template": TEMPLATE},
                             "Worker": {"replicas": 1, "template": TEMPLATE}}}})
            wait_for("its launcher and worker", lambda: kube.names("pods") == [
                "pi-launcher", "pi-worker-0"])
            assert "CRD mpijobs.kubeflow.org converts no versions (strategy None)" in \
                manager.log_path.read_text()
        finally:
            manager.stop()
