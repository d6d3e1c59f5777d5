"""The manager against a real API server: every kind end to end, restarts, limits,
cleanup, suspend, managedBy. Pod phases are driven by the test, as a kubelet would."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.integration.kube import Kube, Manager, wait_for
from tests.jobs import TYPICAL, manifest
from trainop.api import KINDS

pytestmark = pytest.mark.integration


def env_of(pod: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][0].get("env", [])}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_runs_to_success(kube: Kube, manager: Manager, kind: str) -> None:
    kube.apply(manifest(kind, TYPICAL[kind], name="job"))
    total = sum(n or 0 for n in TYPICAL[kind].values())
    pods = kube.wait_pods(total)
    assert pods == sorted("job-launcher" if rt == "Launcher" else f"job-{rt.lower()}-{i}"
                          for rt, n in TYPICAL[kind].items() for i in range(n or 0))
    services = kube.names("services")
    if kind == "MPIJob":  # training-operator v1's objects (test_mpi_v1.py has them all)
        assert services == []
        assert kube.get("configmap", "job-config")["data"]["hostfile"].count("slots=1") == 2
        assert kube.get("role", "job-launcher")["rules"][1]["resourceNames"] == [
            "job-worker-0", "job-worker-1"]
    else:
        assert services == pods
    first = kube.get("pod", pods[0] if kind == "MPIJob" else pods[-1])
    env = env_of(first)
    expected_var = {"TFJob": "TF_CONFIG", "PyTorchJob": "MASTER_ADDR",
                    "MPIJob": "OMPI_MCA_plm_rsh_agent",
                    "XGBoostJob": "WORKER_ADDRS", "PaddleJob": "PADDLE_MASTER",
                    "JAXJob": "COORDINATOR_ADDRESS", "MXJob": "DMLC_ROLE"}[kind]
    assert expected_var in env
    kube.set_all("Running")
    kube.wait_condition(kind, "job", "Running")
    kube.set_all("Succeeded", exit_code=0)
    done = kube.wait_condition(kind, "job", "Succeeded")
    assert done["reason"] == f"{kind}Succeeded"
    if kind != "MPIJob":  # each ended pod's code, as upstream's pod.go:343-346 tells it
        told = wait_for("ExitedWithCode events", lambda: {
            e["message"] for e in kube.items("events") if e["reason"] == "ExitedWithCode"
            and e["source"]["component"] == f"{kind.lower()}-controller"} or None)
        assert f"Pod: {kube.ns}.{pods[0]} exited with code 0" in told, told
    job = kube.job(kind, "job")
    assert job["status"]["conditions"][-1]["type"] == "Succeeded"
    assert job["status"]["completionTime"]
    assert manager.metric("training_operator_jobs_successful_total", job_namespace=kube.ns) == 1
    assert manager.metric("training_operator_jobs_created_total", job_namespace=kube.ns) == 1
    # controller-runtime's series, by upstream's controller names
    # (pkg/controller.v1/*/..._controller.go: controllerName = "<kind>-controller")
    controller = f"{kind.lower()}-controller"
    assert manager.metric("controller_runtime_reconcile_total", controller=controller,
                          result="success") > 0
    assert manager.metric("controller_runtime_reconcile_time_seconds_count",
                          controller=controller) > 0
    assert manager.metric("controller_runtime_max_concurrent_reconciles",
                          controller=controller) == 1
    assert manager.metric("workqueue_adds_total", name=controller, controller=controller) > 0
    # events are told by the same controller name, as upstream's recorders are
    # (GetEventRecorderFor(controllerName), e.g. pytorchjob_controller.go:67)
    told = [e for e in kube.items("events") if e["involvedObject"]["kind"] == kind]
    assert told and {e["source"]["component"] for e in told} == {controller}


def test_pytorch_env_uses_service_names(kube: Kube, manager: Manager) -> None:
    kube.apply(manifest("PyTorchJob", {"Master": 1, "Worker": 2}, name="pt"))
    kube.wait_pods(3)
    env = env_of(kube.get("pod", "pt-worker-1"))
    assert (env["MASTER_ADDR"], env["MASTER_PORT"], env["WORLD_SIZE"], env["RANK"]) == (
        "pt-master-0", "23456", "3", "2")
    svc = kube.get("service", "pt-master-0")
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["ports"][0]["port"] == 23456


def test_exit_code_retryable_then_permanent(kube: Kube, manager: Manager) -> None:
    kube.apply(manifest("TFJob", {"Worker": 2}, name="tf",
                        replica_extra={"Worker": {"restartPolicy": "ExitCode"}}))
    kube.wait_pods(2)
    first_uid = kube.get("pod", "tf-worker-1")["metadata"]["uid"]
    kube.set_pod("tf-worker-1", "Failed", exit_code=137, reason="OOMKilled")
    restarting = kube.wait_condition("TFJob", "tf", "Restarting")
    assert "pod tf-worker-1 exited with code 137 (OOMKilled)" in restarting["message"]
    wait_for("a new tf-worker-1", lambda: (p := kube.get("pod", "tf-worker-1")) and
             p["metadata"]["uid"] != first_uid)
    status = kube.job("TFJob", "tf")["status"]
    assert status["replicaStatuses"]["Worker"]["restarts"] == 1
    assert status["lastFailure"]["exitCode"] == 137
    kube.set_pod("tf-worker-0", "Failed", exit_code=2)
    failed = kube.wait_condition("TFJob", "tf", "Failed")
    assert "pod tf-worker-0 exited with code 2" in failed["message"]
    events = kube.items("events")
    assert any(e["reason"] == "TFJobFailed" and e["type"] == "Warning" for e in events)


def test_onfailure_pod_failure_recreates_and_backoff_limit_fails(kube: Kube,
                                                               manager: Manager) -> None:
    kube.apply(manifest("PyTorchJob", {"Master": 1, "Worker": 1}, name="pt",
                        spec={"runPolicy": {"backoffLimit": 2}}))
    kube.wait_pods(2)
    uid = kube.get("pod", "pt-worker-0")["metadata"]["uid"]
    kube.set_pod("pt-worker-0", "Failed", reason="Evicted")
    wait_for("recreated", lambda: (p := kube.get("pod", "pt-worker-0")) and
             p["metadata"]["uid"] != uid)
    kube.set_pod("pt-master-0", "Running", restarts=2, last_exit=3)
    failed = kube.wait_condition("PyTorchJob", "pt", "Failed")
    # upstream: pkg/controller.v1/common/job.go:210 (message) and :245 (reason)
    assert failed["reason"] == "PyTorchJobFailed"
    # the container restarted in place: its last run named, and kept in lastFailure
    assert failed["message"].endswith("; last: pod pt-master-0 exited with code 3 (Error).")
    last = kube.job("PyTorchJob", "pt")["status"]["lastFailure"]
    assert (last["pod"], last["exitCode"]) == ("pt-master-0", 3)
    assert failed["message"].startswith(
        "Job pt has failed because it has reached the specified backoff limit")


def test_active_deadline_fails_and_cleans_up_as_the_policy_says(kube: Kube,
                                                                manager: Manager) -> None:
    kube.apply(manifest("JAXJob", {"Worker": 2}, name="jx",
                        spec={"runPolicy": {"activeDeadlineSeconds": 2, "cleanPodPolicy": "All"}}))
    kube.wait_pods(2)
    failed = kube.wait_condition("JAXJob", "jx", "Failed", timeout=20)
    # upstream: pkg/controller.v1/common/job.go:212 (message) and :245 (reason)
    assert failed["reason"] == "JAXJobFailed"
    words = "Job jx has failed because it was active longer than specified deadline"
    assert failed["message"] == f"{words} of 2s."
    # the event: upstream's words alone, Normal (job.go:226)
    told = wait_for("the Failed event", lambda: [
        (e["type"], e["message"]) for e in kube.items("events") if e["reason"] == "JAXJobFailed"])
    assert told == [("Normal", words)]
    wait_for("pods and services deleted", lambda: not kube.names("pods") and
             not kube.names("services"))


def test_ttl_deletes_the_job(kube: Kube, manager: Manager) -> None:
    kube.apply(manifest("JAXJob", {"Worker": 1}, name="jx",
                        spec={"runPolicy": {"ttlSecondsAfterFinished": 1}}))
    kube.wait_pods(1)
    kube.set_all("Succeeded", exit_code=0)
    wait_for("job deleted", lambda: kube.get("jaxjobs.kubeflow.org", "jx") is None, 20)
    assert manager.metric("training_operator_jobs_deleted_total", job_namespace=kube.ns) == 1


@pytest.mark.parametrize(("policy", "left"), [
    ("None", ["tf-ps-0", "tf-worker-0"]), ("Running", ["tf-worker-0"]), ("All", [])],
    ids=["None", "Running", "All"])
def test_clean_pod_policy(kube: Kube, manager: Manager, policy: str, left: list[str]) -> None:
    kube.apply(manifest("TFJob", {"PS": 1, "Worker": 1}, name="tf",
                        spec={"runPolicy": {"cleanPodPolicy": policy}}))
    kube.wait_pods(2)
    kube.set_pod("tf-ps-0", "Running")
    kube.set_pod("tf-worker-0", "Succeeded", exit_code=0)
    kube.wait_condition("TFJob", "tf", "Succeeded")
    wait_for(f"pods {left}", lambda: kube.names("pods") == left)
    assert kube.names("services") == left


def test_suspend_and_resume(kube: Kube, manager: Manager) -> None:
    kube.apply(manifest("PyTorchJob", {"Master": 1, "Worker": 1}, name="pt"))
    kube.wait_pods(2)
    kube.kubectl("patch", "pytorchjob", "pt", "--type=merge",
                 "-p", json.dumps({"spec": {"runPolicy": {"suspend": True}}}))
    kube.wait_condition("PyTorchJob", "pt", "Suspended")
    wait_for("no pods", lambda: not kube.names("pods") and not kube.names("services"))
    # upstream: pkg/controller.v1/common/job.go:146-161: startTime kept while suspended,
    # Suspended is the last condition (the State column)
    status = kube.job("PyTorchJob", "pt")["status"]
    started = status["startTime"]
    assert status["conditions"][-1]["type"] == "Suspended"
    assert status["conditions"][-1]["message"] == "PyTorchJob pt is suspended."
    kube.kubectl("patch", "pytorchjob", "pt", "--type=merge",
                 "-p", json.dumps({"spec": {"runPolicy": {"suspend": False}}}))
    kube.wait_pods(2)
    job = kube.job("PyTorchJob", "pt")
    suspended = next(c for c in job["status"]["conditions"] if c["type"] == "Suspended")
    assert (suspended["status"], suspended["reason"]) == ("False", "PyTorchJobResumed")
    assert job["status"]["startTime"] >= started  # reset on resume (common/job.go:170-171)


def test_managed_by_another_controller_is_left_alone(kube: Kube, manager: Manager) -> None:
    kube.apply(manifest("PyTorchJob", {"Master": 1, "Worker": 1}, name="theirs",
                        spec={"runPolicy": {"managedBy": "kueue.x-k8s.io/multikueue"}}))
    kube.apply(manifest("PyTorchJob", {"Master": 1, "Worker": 1}, name="ours"))
    kube.wait_pods(2)
    assert all(n.startswith("ours-") for n in kube.names("pods"))
    assert "status" not in kube.job("PyTorchJob", "theirs")


def test_job_wide_restart(kube: Kube, manager: Manager) -> None:
    kube.apply(manifest("PyTorchJob", {"Master": 1, "Worker": 2}, name="pt",
                        spec={"runPolicy": {"restartScope": "Job", "backoffLimit": 3}}))
    kube.wait_pods(3)
    uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in kube.items("pods")}
    kube.set_all("Running")
    kube.set_pod("pt-worker-1", "Failed", exit_code=137)
    kube.wait_condition("PyTorchJob", "pt", "Restarting")

    def all_new() -> bool:
        pods = kube.items("pods")
        return len(pods) == 3 and all(p["metadata"]["uid"] != uids[p["metadata"]["name"]]
                                      for p in pods)
    wait_for("every pod recreated", all_new)


@pytest.mark.parametrize("transport", ["KubectlExec", "SSH"])
def test_owner_references_on_everything(kube: Kube, manager: Manager, transport: str) -> None:
    kube.apply(manifest("MPIJob", {"Launcher": 1, "Worker": 2}, name="mpi",
                        spec={"transport": transport}))
    kube.wait_pods(3)
    uid = kube.job("MPIJob", "mpi")["metadata"]["uid"]
    if transport == "SSH":
        wait_for("all objects", lambda: kube.names("services") == ["mpi"])
    else:
        wait_for("all objects", lambda: "mpi-launcher" in kube.names("rolebindings"))
    for resource in ("pods", "services", "configmaps", "secrets", "serviceaccounts", "roles",
                     "rolebindings"):
        for item in kube.items(resource):
            if item["metadata"]["name"] in ("kube-root-ca.crt", "default") or \
                    item.get("type") == "kubernetes.io/service-account-token":
                continue
            refs = item["metadata"].get("ownerReferences")
            assert refs == [{"apiVersion": "kubeflow.org/v1", "kind": "MPIJob", "name": "mpi",
                             "uid": uid, "controller": True, "blockOwnerDeletion": True}], \
                (resource, item["metadata"]["name"])
