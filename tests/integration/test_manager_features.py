"""Gang scheduling, elastic HPA, leader election, flags, bad jobs, scale and steady state."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from testbed.apiserver import TestAPIServer
from tests.integration.kube import Kube, Manager, wait_for
from tests.jobs import manifest

pytestmark = pytest.mark.integration
CRDS = Path(__file__).parent / "crds"


@pytest.fixture(scope="module")
def podgroup_crds(apiserver: TestAPIServer) -> None:
    apiserver.kubectl("apply", "--server-side", "-f", str(CRDS / "podgroups.yaml"))
    apiserver.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                      "crd/podgroups.scheduling.volcano.sh", "crd/podgroups.scheduling.x-k8s.io")


def test_volcano_gang(kube: Kube, start_manager: Callable[..., Manager],
                      podgroup_crds: None) -> None:
    start_manager("--gang-scheduler-name", "volcano")
    resources = {"template": {"spec": {"containers": [{"name": "pytorch", "image": "i",
                 "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}}
    kube.apply(manifest("PyTorchJob", {"Master": 1, "Worker": 2}, name="pt",
                        replica_extra={"Master": resources, "Worker": resources},
                        spec={"runPolicy": {"schedulingPolicy": {"queue": "q1"}}}))
    pg = wait_for("podgroup", lambda: kube.get("podgroups.scheduling.volcano.sh", "pt"))
    assert pg["spec"] == {"minMember": 3, "queue": "q1",
                          "minResources": {"cpu": "3", "memory": str(3 * 2**30)}}
    time.sleep(1)
    assert kube.names("pods") == []  # held until Volcano admits the group
    kube.kubectl("patch", "podgroups.scheduling.volcano.sh", "pt", "--subresource=status",
                 "--type=merge", "-p", json.dumps({"status": {"phase": "Inqueue"}}))
    kube.wait_pods(3)
    pod = kube.get("pod", "pt-worker-0")
    assert pod["spec"]["schedulerName"] == "volcano"
    assert pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "pt"
    assert pod["metadata"]["annotations"]["volcano.sh/task-spec"] == "worker"


def test_scheduler_plugins_gang(kube: Kube, start_manager: Callable[..., Manager],
                                podgroup_crds: None) -> None:
    start_manager("--gang-scheduler-name", "scheduler-plugins-scheduler")
    kube.apply(manifest("JAXJob", {"Worker": 2}, name="jx", spec={"runPolicy": {
        "schedulingPolicy": {"minAvailable": 2, "scheduleTimeoutSeconds": 60}}}))
    kube.wait_pods(2)
    pg = kube.get("podgroups.scheduling.x-k8s.io", "jx")
    assert pg["spec"]["minMember"] == 2 and pg["spec"]["scheduleTimeoutSeconds"] == 60
    pod = kube.get("pod", "jx-worker-1")
    assert pod["spec"]["schedulerName"] == "scheduler-plugins-scheduler"
    assert pod["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "jx"


def test_elastic_pytorch_hpa(kube: Kube, start_manager: Callable[..., Manager]) -> None:
    start_manager()
    metrics = [{"type": "Resource", "resource": {"name": "cpu", "target": {
        "type": "Utilization", "averageUtilization": 80}}}]
    kube.apply(manifest("PyTorchJob", {"Worker": 2}, name="el", spec={"elasticPolicy": {
        "minReplicas": 1, "maxReplicas": 4, "metrics": metrics}}))
    hpa = wait_for("hpa", lambda: kube.get("hpa.v2.autoscaling", "el"))
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "kubeflow.org/v1",
                                             "kind": "PyTorchJob", "name": "el"}
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (1, 4)
    env = kube.get("pod", "el-worker-0")["spec"]["containers"][0]["env"]
    assert {"name": "PET_NNODES", "value": "1:4"} in env
    # the HPA scales through the job's scale subresource; the manager follows
    kube.kubectl("scale", "pytorchjob", "el", "--replicas=3")
    kube.wait_pods(3)


def test_enable_scheme_and_namespace_are_honoured(apiserver: TestAPIServer, kube: Kube,
                                                  start_manager: Callable[..., Manager]) -> None:
    m = start_manager("--enable-scheme", "jaxjob")
    other = Kube(apiserver)
    kube.apply(manifest("JAXJob", {"Worker": 1}, name="jx"))
    kube.apply(manifest("TFJob", {"Worker": 1}, name="tf"))
    other.apply(manifest("JAXJob", {"Worker": 1}, name="jx"))
    kube.wait_pods(1)
    time.sleep(2)
    assert kube.names("pods") == ["jx-worker-0"]
    assert other.names("pods") == []
    assert "tfjobs" not in m.log()


def test_invalid_job_fails_once_without_a_hot_loop(kube: Kube, manager: Manager) -> None:
    kube.apply(manifest("PyTorchJob", {"Master": 2, "Worker": 1}, name="bad"))
    failed = kube.wait_condition("PyTorchJob", "bad", "Failed")
    assert failed["reason"] == "InvalidSpec"
    assert "spec.pytorchReplicaSpecs[Master].replicas: must be 1, got 2" in failed["message"]
    writes = manager.writes()
    time.sleep(3)
    assert manager.writes() == writes
    assert kube.names("pods") == []
    events = [e for e in kube.items("events") if e["reason"] == "InvalidSpec"]
    assert len(events) == 1 and events[0]["type"] == "Warning"


def test_template_the_api_server_rejects_fails_the_job(kube: Kube, manager: Manager) -> None:
    bad = {"template": {"spec": {"containers": [{"name": "jax", "image": "i", "resources": {
        "limits": {"cpu": "1"}, "requests": {"cpu": "2"}}}]}}}  # requests above limits
    # (the manager's start posts a pod with dryRun: what it sees of restarts in place)
    started = manager.metric("trainop_api_requests_total", verb="post", resource="pods")
    kube.apply(manifest("JAXJob", {"Worker": 4}, name="rej", replica_extra={"Worker": bad}))
    failed = kube.wait_condition("JAXJob", "rej", "Failed")
    assert failed["reason"] == "CreateFailed"
    assert "Pod rej-worker-0 was rejected by the API server" in failed["message"]
    posts = manager.metric("trainop_api_requests_total", verb="post", resource="pods")
    time.sleep(3)
    assert manager.metric("trainop_api_requests_total", verb="post", resource="pods") == posts
    assert posts - started <= 1  # slow start: the first pod's rejection stopped the rest


def test_job_held_back_by_a_quota_starts_when_the_quota_allows(kube: Kube,
                                                               manager: Manager) -> None:
    kube.kubectl("create", "quota", "no-pods", "--hard=pods=0")
    # The test server runs no quota controller: give the quota the status it would write.
    kube.kubectl("patch", "quota", "no-pods", "--subresource=status", "--type=merge", "-p",
                 json.dumps({"status": {"hard": {"pods": "0"}, "used": {"pods": "0"}}}))
    kube.apply(manifest("JAXJob", {"Worker": 3}, name="held"))
    warning = wait_for("a FailedCreatePod event", lambda: next(
        (e for e in kube.items("events") if e["reason"] == "FailedCreatePod"), None))
    assert warning["type"] == "Warning" and "forbidden" in warning["message"]
    assert manager.metric("trainop_events_total", outcome="sent") >= 1  # the warning itself
    assert kube.names("pods") == []
    assert kube.condition("JAXJob", "held", "Failed") is None  # a quota is not a failure
    created_condition = wait_for("Created", lambda: kube.condition("JAXJob", "held", "Created"))
    assert created_condition["status"] == "True"  # what `kubectl get` shows meanwhile

    def created() -> list[str]:
        return [e["message"] for e in kube.items("events") if e["reason"] == "SuccessfulCreatePod"]
    assert created() == []
    kube.kubectl("delete", "resourcequota", "no-pods")
    # every pod of the job, although the first refusal stopped the others being sent
    assert kube.wait_pods(3) == ["held-worker-0", "held-worker-1", "held-worker-2"]
    assert sorted(wait_for("a SuccessfulCreatePod event per pod",
                           lambda: (lambda c: c if len(c) == 3 else None)(created()))) == [
        "Created pod: held-worker-0", "Created pod: held-worker-1", "Created pod: held-worker-2"]
    # no event for Created, as upstream v1.9; counted once, however often it was retried
    assert [e for e in kube.items("events") if e["reason"] == "JAXJobCreated"] == []
    assert manager.metric("training_operator_jobs_created_total", job_namespace=kube.ns) == 1


def test_hundred_replicas_and_a_steady_state_without_writes(kube: Kube,
                                                            manager: Manager) -> None:
    kube.apply(manifest("PyTorchJob", {"Master": 1, "Worker": 99}, name="big"))
    pods = kube.wait_pods(100, timeout=60)
    assert len(set(pods)) == 100
    wait_for("100 services", lambda: len(kube.names("services")) == 100, 60)
    for name in pods:
        kube.set_pod(name, "Running")
    kube.wait_condition("PyTorchJob", "big", "Running", timeout=60)
    time.sleep(2)
    before = manager.writes()
    time.sleep(5)
    assert manager.writes() == before, "a steady job must cost no API writes"
    assert len(kube.names("pods")) == 100


def test_leader_election_hands_over(kube: Kube, start_manager: Callable[..., Manager]) -> None:
    args = ("--leader-elect", "--leader-election-namespace", kube.ns, "--lease-duration", "4",
            "--renew-deadline", "3", "--retry-period", "0.5")
    first = start_manager(*args)
    wait_for("first leads", lambda: "became leader" in first.log())
    second = start_manager(*args)
    started = second.writes()  # its dryRun probe of restarts in place, which stores nothing
    kube.apply(manifest("JAXJob", {"Worker": 1}, name="one"))
    kube.wait_pods(1)
    time.sleep(1)
    assert "became leader" not in second.log()
    assert second.writes() == started  # only the leader writes
    first.proc.kill()  # no clean release: the lease must expire
    first.proc.wait()
    killed = time.monotonic()
    wait_for("second leads", lambda: "became leader" in second.log(), 15)
    assert time.monotonic() - killed < 4 + 0.5 + 2  # lease duration + retry period (+ slack)
    kube.apply(manifest("JAXJob", {"Worker": 1}, name="two"))
    kube.wait_pods(2)


def test_a_manager_waiting_for_the_lease_stops_at_once_when_told(
        kube: Kube, start_manager: Callable[..., Manager]) -> None:
    args = ("--leader-elect", "--leader-election-namespace", kube.ns)
    first = start_manager(*args)
    wait_for("first leads", lambda: "became leader" in first.log())
    second = start_manager(*args)
    wait_for("second waits", lambda: "waiting for the lease" in second.log())
    told = time.monotonic()
    second.proc.terminate()
    assert second.proc.wait(10) == 0
    assert time.monotonic() - told < 5
    assert "became leader" not in second.log()


OWN_PORTS = ("--metrics-bind-address", "127.0.0.1:0", "--health-probe-bind-address",
             "127.0.0.1:0", "--webhook-port", "0")
"""No port another suite's process may hold (mpi-operator's health port is always 8080)."""


def test_startup_errors_are_one_line(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "x",
        "clusters": [{"name": "x", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "x", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x"}}]}))
    out = subprocess.run([sys.executable, "-m", "trainop.cli", "manager", "--kubeconfig",
                          str(kubeconfig), *OWN_PORTS], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 1
    assert out.stderr.strip().splitlines()[-1].startswith(
        "trainop: cannot reach the API server at https://127.0.0.1:1")
    assert "Traceback" not in out.stderr


def test_missing_crd_is_one_line(tmp_path: Path) -> None:
    with TestAPIServer() as bare:
        out = subprocess.run([sys.executable, "-m", "trainop.cli", "manager", "--kubeconfig",
                              str(bare.kubeconfig), "--enable-scheme", "tfjob", *OWN_PORTS],
                             capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert out.stderr.strip().splitlines()[-1] == (
        "trainop: the CRD tfjobs.kubeflow.org is not installed: install the CRDs (trainop crds "
        "| kubectl apply --server-side -f -) or leave TFJob out of --enable-scheme")


def test_without_kueue_queued_jobs_run_and_that_is_said_once(
        apiserver: TestAPIServer, kube: Kube, tmp_path: Path) -> None:
    # --kueue-workloads where Kueue's Workload API is not served: jobs run as they would
    # without Kueue, and the manager says so once
    from testbed.manager import ManagerProcess

    log = tmp_path / "manager.log"
    m = ManagerProcess(apiserver.kubeconfig, "--namespace", kube.ns, "--enable-scheme",
                       "tfjob", "--kueue-workloads", "tfjob", log_path=log)
    try:
        m.wait_ready()
        doc = manifest("TFJob", {"Worker": 2}, name="tf")
        doc["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "queue"}
        kube.apply(doc)
        kube.wait_pods(2)
    finally:
        m.stop()
    said = [line for line in log.read_text().splitlines() if "not queued" in line]
    assert len(said) == 1 and said[0].endswith(
        "Kueue's Workload API (kueue.x-k8s.io/v1beta2) is not served: jobs of TFJob are not "
        "queued (--kueue-workloads)")


@pytest.mark.parametrize("level", [(), ("--log-level", "warning")], ids=["info", "warning"])
def test_each_server_says_the_port_it_bound(apiserver: TestAPIServer, kube: Kube,
                                            tmp_path: Path, level: tuple[str, ...]) -> None:
    # port 0: the kernel picks, and the manager says what it got (at info); a manager
    # that logs warnings only is given its ports by the test bed
    from testbed.manager import ManagerProcess

    log = tmp_path / "manager.log"
    m = ManagerProcess(apiserver.kubeconfig, "--namespace", kube.ns, "--enable-scheme",
                       "jaxjob", *level, log_path=log)
    try:
        m.wait_ready()
        assert m.metric("controller_runtime_max_concurrent_reconciles",
                        controller="jaxjob-controller") == 1
        said = re.findall(r"trainop\.listener: (\w+) serving on 127\.0\.0\.1:(\d+)$",
                          log.read_text(), re.M)
        if level:
            assert said == []
        else:
            assert dict(said) == {"metrics": str(m.metrics_port),
                                  "probes": str(m.health_port)}
    finally:
        m.stop()


def test_an_unknown_kind_to_queue_is_one_line() -> None:
    out = subprocess.run([sys.executable, "-m", "trainop.cli", "manager", "--kueue-workloads",
                          "rayjob"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines()[-1] == (
        "trainop: --kueue-workloads rayjob: unknown; choose from tfjob, pytorchjob, mpijob, "
        "xgboostjob, paddlejob, jaxjob, mxjob")


def test_the_cluster_domain_comes_from_the_managers_environment(
        apiserver: TestAPIServer, kube: Kube, tmp_path: Path) -> None:
    # upstream reads CUSTOM_CLUSTER_DOMAIN from its own environment into TF_CONFIG's names
    # (pkg/controller.v1/tensorflow/tensorflow.go:32, :175-178)
    from testbed.manager import ManagerProcess

    m = ManagerProcess(apiserver.kubeconfig, "--namespace", kube.ns, "--enable-scheme",
                       "tfjob", log_path=tmp_path / "manager.log",
                       wrapper=["env", "CUSTOM_CLUSTER_DOMAIN=cluster.local"])
    try:
        m.wait_ready()
        kube.apply(manifest("TFJob", {"Worker": 2}, name="tf"))
        kube.wait_pods(2)
        env = kube.get("pod", "tf-worker-1")["spec"]["containers"][0]["env"]
        tf_config = json.loads(next(e["value"] for e in env if e["name"] == "TF_CONFIG"))
        assert tf_config["cluster"]["worker"] == [
            f"tf-worker-0.{kube.ns}.svc.cluster.local:2222",
            f"tf-worker-1.{kube.ns}.svc.cluster.local:2222"]
    finally:
        m.stop()
    assert m.api_warnings() == []
