"""An MPIJob shaped like upstream's examples/mpi/tensorflow-mnist.yaml, on the real API server,
with the manager under its own ServiceAccount and ClusterRole (as deployed, never as an
administrator): the objects training-operator v1.9 makes, and the launcher's rights.

Citations: C = pkg/controller.v1/mpi/mpijob_controller.go at release-1.9
(tests/unit/test_mpi_v1.py checks every field; this checks what the API server keeps).
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from testbed.apiserver import TestAPIServer
from tests.conftest import SA_TOKEN
from tests.integration.kube import Kube, Manager, install_rbac, wait_for

pytestmark = pytest.mark.integration

MNIST: dict[str, Any] = {
    "apiVersion": "kubeflow.org/v1", "kind": "MPIJob",
    "metadata": {"name": "tensorflow-mnist"},
    "spec": {"slotsPerWorker": 1, "runPolicy": {"cleanPodPolicy": "Running"},
             "mpiReplicaSpecs": {
                 "Launcher": {"replicas": 1, "template": {"spec": {"containers": [{
                     "image": "horovod/horovod:0.28.1", "name": "mpi",
                     "command": ["mpirun"],
                     "args": ["-np", "2", "--allow-run-as-root", "-bind-to", "none",
                              "python", "/horovod/examples/tensorflow2/tensorflow2_mnist.py"],
                     "resources": {"limits": {"cpu": 1, "memory": "2Gi"}}}]}}},
                 "Worker": {"replicas": 2, "template": {"spec": {"containers": [{
                     "image": "horovod/horovod:0.28.1", "name": "mpi",
                     "resources": {"limits": {"cpu": 2, "memory": "4Gi"}}}]}}}}},
}
JOB = "tensorflow-mnist"
DELIVERY_IMAGE = "registry.example/kubectl-delivery:1.0"


@pytest.fixture(scope="module")
def rbac(apiserver: TestAPIServer) -> None:
    install_rbac(apiserver)


def can(kube: Kube, who: str, *what: str) -> bool:
    out = kube.api.kubectl("auth", "can-i", *what, "-n", kube.ns,
                           f"--as=system:serviceaccount:{kube.ns}:{who}", check=False)
    return out.stdout.strip() == "yes"


def test_upstreams_example_gets_upstreams_objects_under_the_managers_own_role(
        apiserver: TestAPIServer, kube: Kube, rbac: None, tmp_path: Path) -> None:
    sa = apiserver.kubeconfig_for(SA_TOKEN, tmp_path / "sa.kubeconfig")
    m = Manager(apiserver, "--kubeconfig", str(sa), "--namespace", kube.ns,
                "--enable-scheme", "mpijob", "--mpi-kubectl-delivery-image", DELIVERY_IMAGE,
                log_dir=tmp_path)
    try:
        m.wait_ready()
        kube.apply(MNIST)
        assert kube.wait_pods(3) == [f"{JOB}-launcher", f"{JOB}-worker-0", f"{JOB}-worker-1"]
        uid = kube.job("MPIJob", JOB)["metadata"]["uid"]
        owner = [{"apiVersion": "kubeflow.org/v1", "kind": "MPIJob", "name": JOB,
                  "uid": uid, "controller": True, "blockOwnerDeletion": True}]

        launcher = kube.get("pod", f"{JOB}-launcher")
        assert launcher["metadata"]["labels"] == {  # mpijob.go:227-243, C:1011-1014
            "training.kubeflow.org/job-name": JOB,
            "training.kubeflow.org/operator-name": "mpijob-controller",
            "training.kubeflow.org/replica-type": "launcher",
            "training.kubeflow.org/job-role": "master"}
        assert launcher["metadata"]["ownerReferences"] == owner
        spec = launcher["spec"]
        assert spec["serviceAccountName"] == f"{JOB}-launcher"  # C:1037-1039
        (delivery,) = spec["initContainers"]
        assert (delivery["name"], delivery["image"]) == ("kubectl-delivery", DELIVERY_IMAGE)
        assert delivery["resources"]["limits"] == {  # C:1065-1076
            "cpu": "100m", "memory": "512Mi", "ephemeral-storage": "5Gi"}
        env = [(e["name"], e.get("value", "")) for e in spec["containers"][0]["env"]]
        assert env == [  # C:1085-1128
            ("OMPI_MCA_plm_rsh_agent", "/etc/mpi/kubexec.sh"),
            ("OMPI_MCA_orte_default_hostfile", "/etc/mpi/hostfile"),
            ("NVIDIA_VISIBLE_DEVICES", ""), ("NVIDIA_DRIVER_CAPABILITIES", ""),
            ("I_MPI_HYDRA_BOOTSTRAP", "rsh"),
            ("I_MPI_HYDRA_BOOTSTRAP_EXEC", "/etc/mpi/kubexec.sh")]
        config = next(v for v in spec["volumes"] if v["name"] == "mpi-job-config")
        assert [i["key"] for i in config["configMap"]["items"]] == [
            "kubexec.sh", "hostfile", "discover_hosts.sh"]  # C:1166-1182

        worker = kube.get("pod", f"{JOB}-worker-0")["spec"]["containers"][0]
        assert (worker["command"], worker["args"]) == (["sleep"], ["365d"])  # C:942-945
        assert kube.names("services") == []  # C:262-269

        cm = kube.get("configmap", f"{JOB}-config")
        assert cm["metadata"]["ownerReferences"] == owner and cm["metadata"]["labels"]["app"] \
            == JOB
        assert cm["data"]["hostfile"] == f"{JOB}-worker-0 slots=1\n{JOB}-worker-1 slots=1\n"
        assert cm["data"]["kubexec.sh"].endswith(
            '/opt/kube/kubectl exec ${POD_NAME} -- /bin/sh -c "$*"')
        for kind in ("serviceaccount", "role", "rolebinding"):
            obj = kube.get(kind, f"{JOB}-launcher")  # C:1301-1392
            assert obj["metadata"]["ownerReferences"] == owner, kind

        # The launcher may exec into its own workers and nothing else (C:1325-1355).
        who = f"{JOB}-launcher"
        assert can(kube, who, "create", f"pods/{JOB}-worker-1", "--subresource=exec")
        assert not can(kube, who, "create", f"pods/{JOB}-launcher", "--subresource=exec")
        assert not can(kube, who, "create", "pods/someone-else", "--subresource=exec")
        assert can(kube, who, "list", "pods") and not can(kube, who, "delete", "pods")
        assert not can(kube, who, "get", "secrets")

        # discover_hosts.sh follows the running workers (C:1270-1296)
        kube.set_all("Running", prefix=f"{JOB}-worker")
        wait_for("running workers in discover_hosts.sh", lambda: kube.get(
            "configmap", f"{JOB}-config")["data"]["discover_hosts.sh"] == (
            f"#!/bin/sh\necho {JOB}-worker-0:1\necho {JOB}-worker-1:1"))

        kube.set_pod(f"{JOB}-launcher", "Running")
        running = kube.wait_condition("MPIJob", JOB, "Running")  # C:581-585
        assert (running["reason"], running["message"]) == (
            "MPIJobRunning", f"MPIJob {JOB} is running.")
        kube.set_pod(f"{JOB}-launcher", "Succeeded", exit_code=0)
        done = kube.wait_condition("MPIJob", JOB, "Succeeded")  # C:587-597
        assert (done["reason"], done["message"]) == (
            "MPIJobSucceeded", f"MPIJob {JOB} is successfully completed.")
        # cleanPodPolicy Running: the sleeping workers go, the finished launcher stays
        wait_for("running workers deleted", lambda: kube.names("pods") == [f"{JOB}-launcher"])
        assert "Forbidden" not in m.log() and " 403" not in m.log(), m.log()
    finally:
        m.stop()


def small(name: str, account: str | None = None) -> dict[str, Any]:
    launcher: dict[str, Any] = {"containers": [{"name": "mpi", "image": "mpi:1",
                                                "command": ["mpirun"]}]}
    if account:
        launcher["serviceAccountName"] = account
    return {"apiVersion": "kubeflow.org/v1", "kind": "MPIJob", "metadata": {"name": name},
            "spec": {"mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": {"spec": launcher}},
                "Worker": {"replicas": 2, "template": {"spec": {"containers": [
                    {"name": "mpi", "image": "mpi:1"}]}}}}}}


def test_a_role_the_job_does_not_own_is_never_bound(
        apiserver: TestAPIServer, kube: Kube, rbac: None, tmp_path: Path) -> None:
    # an admin's Role under the name the launcher's would have, and a job whose launcher
    # names the submitter's own ServiceAccount
    kube.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "ci-launcher"},
        "rules": [{"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create"]},
                  {"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}]}))
    kube.kubectl("create", "serviceaccount", "attacker")
    sa = apiserver.kubeconfig_for(SA_TOKEN, tmp_path / "sa.kubeconfig")
    m = Manager(apiserver, "--kubeconfig", str(sa), "--namespace", kube.ns,
                "--enable-scheme", "mpijob", log_dir=tmp_path).wait_ready()
    # every RoleBinding the namespace ever holds, however briefly
    watch = subprocess.Popen(["kubectl", "--kubeconfig", str(apiserver.kubeconfig), "get",
                              "rolebindings", "-n", kube.ns, "--watch", "-o", "name"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        time.sleep(1)  # the watch is open
        kube.apply(small("ci", account="attacker"))
        failed = kube.wait_condition("MPIJob", "ci", "Failed")
        assert failed["reason"] == "CreateFailed"
        assert "Role ci-launcher already exists and is not controlled by this job" in \
            failed["message"]
        assert kube.get("rolebinding", "ci-launcher") is None
        assert not can(kube, "attacker", "create", "pods/x", "--subresource=exec")
        assert not can(kube, "attacker", "list", "secrets")
        assert kube.names("pods") == []
        time.sleep(1)
        watch.terminate()
        assert watch.communicate()[0] == ""  # never made, not made and then deleted
    finally:
        watch.kill()
        m.stop()


def test_a_job_that_failed_on_other_pods_names_grants_no_exec_into_them(
        apiserver: TestAPIServer, kube: Kube, rbac: None, tmp_path: Path) -> None:
    for i in (0, 1):  # another workload's pods, under the names the job's workers need
        kube.kubectl("run", f"db-worker-{i}", "--image=postgres:17", "--restart=Never")
    sa = apiserver.kubeconfig_for(SA_TOKEN, tmp_path / "sa.kubeconfig")
    m = Manager(apiserver, "--kubeconfig", str(sa), "--namespace", kube.ns,
                "--enable-scheme", "mpijob", log_dir=tmp_path).wait_ready()
    try:
        kube.apply(small("db"))
        failed = kube.wait_condition("MPIJob", "db", "Failed")
        assert failed["reason"] == "CreateFailed"
        assert "db-worker-" in failed["message"] and "not controlled by this job" in \
            failed["message"]
        wait_for("the launcher's Role and RoleBinding deleted", lambda: kube.get(
            "role", "db-launcher") is None and kube.get("rolebinding", "db-launcher") is None)
        assert not can(kube, "db-launcher", "create", "pods/db-worker-0", "--subresource=exec")
    finally:
        m.stop()
