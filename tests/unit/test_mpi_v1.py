"""MPIJob's default (KubectlExec) transport makes what training-operator v1.9 makes.

Each expectation cites upstream's file:line at release-1.9 (pkg/controller.v1/mpi/; C is
mpijob_controller.go, M is mpijob.go). The job is shaped like upstream's
examples/mpi/tensorflow-mnist.yaml: a launcher running mpirun, workers with no command.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.jobs import job, manifest
from tests.sim import Cluster
from trainop.api import InvalidJob, load_job
from trainop.engine import EngineConfig
from trainop.frameworks.mpi_exec import kubexec

C = "pkg/controller.v1/mpi/mpijob_controller.go"
M = "pkg/controller.v1/mpi/mpijob.go"
MPIRUN = ["mpirun", "-np", "2", "--allow-run-as-root", "python", "/train.py"]
OWNER = {"apiVersion": "kubeflow.org/v1", "kind": "MPIJob", "name": "job", "uid": "uid-1",
         "controller": True, "blockOwnerDeletion": True}


def mnist(launcher: dict[str, Any] | None = None, worker: dict[str, Any] | None = None,
          workers: int = 2, **spec: Any) -> Cluster:
    """An MPIJob like upstream's Horovod example: limits on both, no worker command."""
    lc = {"name": "mpi", "image": "horovod/horovod:0.28.1", "command": MPIRUN[:1],
          "args": MPIRUN[1:], "resources": {"limits": {"cpu": "1", "memory": "2Gi"}},
          **(launcher or {})}
    wc = {"name": "mpi", "image": "horovod/horovod:0.28.1",
          "resources": {"limits": {"cpu": "2", "memory": "4Gi"}}, **(worker or {})}
    extra = {"Launcher": {"template": {"spec": {"containers": [lc]}}},
             "Worker": {"template": {"spec": {"containers": [wc]}}}}
    return Cluster(job("MPIJob", {"Launcher": 1, "Worker": workers}, uid="uid-1",
                       spec={"slotsPerWorker": 1, **spec}, replica_extra=extra))


def env_of(pod: dict[str, Any]) -> list[tuple[str, str]]:
    return [(e["name"], e["value"]) for e in pod["spec"]["containers"][0].get("env") or []]


def test_launcher_pod() -> None:
    c = mnist()
    c.step()
    pod = c.pod("job-launcher")  # C:1006, M:40 ("-launcher", no index)
    assert pod["metadata"]["labels"] == {  # M:227-243 + C:1011-1014: no replica-index
        "training.kubeflow.org/job-name": "job",
        "training.kubeflow.org/operator-name": "mpijob-controller",
        "training.kubeflow.org/replica-type": "launcher",
        "training.kubeflow.org/job-role": "master",
    }
    assert pod["metadata"]["ownerReferences"] == [OWNER]
    spec = pod["spec"]
    assert spec["serviceAccountName"] == "job-launcher"  # C:1037-1039
    assert spec["restartPolicy"] == "Never"  # C:1148 with the kind's default
    assert spec["initContainers"] == [{  # C:1041-1077, M:34-46
        "name": "kubectl-delivery", "image": "ghcr.io/kubeflow/training-v1/kubectl-delivery:latest",
        "imagePullPolicy": "IfNotPresent",
        "env": [{"name": "TARGET_DIR", "value": "/opt/kube"},
                {"name": "NAMESPACE", "value": "default"}],
        "volumeMounts": [{"name": "mpi-job-kubectl", "mountPath": "/opt/kube"},
                         {"name": "mpi-job-config", "mountPath": "/etc/mpi"}],
        "resources": {
            "limits": {"cpu": "100m", "memory": "512Mi", "ephemeral-storage": "5Gi"},
            "requests": {"cpu": "100m", "memory": "512Mi", "ephemeral-storage": "5Gi"}},
    }]
    assert env_of(pod) == [  # C:1085-1128, in upstream's order
        ("OMPI_MCA_plm_rsh_agent", "/etc/mpi/kubexec.sh"),
        ("OMPI_MCA_orte_default_hostfile", "/etc/mpi/hostfile"),
        ("NVIDIA_VISIBLE_DEVICES", ""), ("NVIDIA_DRIVER_CAPABILITIES", ""),
        ("I_MPI_HYDRA_BOOTSTRAP", "rsh"),
        ("I_MPI_HYDRA_BOOTSTRAP_EXEC", "/etc/mpi/kubexec.sh"),
    ]
    main = spec["containers"][0]
    assert (main["command"], main["args"]) == (MPIRUN[:1], MPIRUN[1:])
    assert main["volumeMounts"] == [  # C:1130-1138
        {"name": "mpi-job-kubectl", "mountPath": "/opt/kube"},
        {"name": "mpi-job-config", "mountPath": "/etc/mpi"}]
    assert spec["volumes"] == [  # C:1150-1185 (0555 = 365, 0444 = 292)
        {"name": "mpi-job-kubectl", "emptyDir": {}},
        {"name": "mpi-job-config", "configMap": {"name": "job-config", "items": [
            {"key": "kubexec.sh", "path": "kubexec.sh", "mode": 365},
            {"key": "hostfile", "path": "hostfile", "mode": 292},
            {"key": "discover_hosts.sh", "path": "discover_hosts.sh", "mode": 365}]}}]
    assert "hostname" not in spec and "subdomain" not in spec


def test_workers_sleep_with_the_agent_mounted() -> None:
    c = mnist()
    c.step()
    pod = c.pod("job-worker-1")  # C:873
    assert pod["metadata"]["labels"] == {  # M:237-239, C:888; no job-role on workers
        "training.kubeflow.org/job-name": "job",
        "training.kubeflow.org/operator-name": "mpijob-controller",
        "training.kubeflow.org/replica-type": "worker",
        "training.kubeflow.org/replica-index": "1",
    }
    main = pod["spec"]["containers"][0]
    assert (main["command"], main["args"]) == (["sleep"], ["365d"])  # C:942-945
    assert "env" not in main  # SetClusterSpec does nothing for MPI (C:292-294)
    assert main["volumeMounts"] == [{"name": "mpi-job-config", "mountPath": "/etc/mpi"}]
    assert pod["spec"]["volumes"] == [{"name": "mpi-job-config", "configMap": {  # C:955-972
        "name": "job-config", "items": [{"key": "kubexec.sh", "path": "kubexec.sh",
                                         "mode": 365}]}}]
    assert "serviceAccountName" not in pod["spec"] and "initContainers" not in pod["spec"]


def test_a_worker_command_of_its_own_is_kept() -> None:
    c = mnist(worker={"command": ["/usr/sbin/sshd"], "args": ["-De"]})
    c.step()
    main = c.pod("job-worker-0")["spec"]["containers"][0]
    assert (main["command"], main["args"]) == (["/usr/sbin/sshd"], ["-De"])  # C:942


def test_config_map() -> None:
    c = mnist()
    plan = c.step()
    cm = c.created["ConfigMap/job-config"]  # C:1253 (M:28)
    assert cm["metadata"]["labels"]["app"] == "job"  # C:1255-1257
    assert cm["metadata"]["ownerReferences"] == [OWNER]
    assert cm["data"] == {
        "hostfile": "job-worker-0 slots=1\njob-worker-1 slots=1\n",  # C:1238-1249
        "kubexec.sh": ('#!/bin/sh\nset -x\nPOD_NAME=$1\nshift\n'  # C:1228-1236
                       '/opt/kube/kubectl exec ${POD_NAME} -- /bin/sh -c "$*"'),
        "discover_hosts.sh": "#!/bin/sh",  # C:1281: no worker runs yet
    }
    # made before any pod (C:376-378 before C:390-396)
    kinds = [o["kind"] for o in plan.to_create]
    assert kinds.index("ConfigMap") < kinds.index("Pod")


def test_discover_hosts_follows_the_running_workers() -> None:
    c = mnist(workers=3)
    c.step()
    c.set("job-worker-2", phase="Running")
    c.set("job-worker-0", phase="Running")
    plan = c.step()
    (cm,) = plan.update  # C:714-720: the ConfigMap is updated when its data changes
    # C:1270-1296: running workers only, sorted by name, `echo name:slots`, no newline
    assert cm["data"]["discover_hosts.sh"] == (
        "#!/bin/sh\necho job-worker-0:1\necho job-worker-2:1")


def test_main_container_names_the_exec_target() -> None:
    c = mnist(mainContainer="mpi")
    c.step()
    assert c.created["ConfigMap/job-config"]["data"]["kubexec.sh"].endswith(
        '/opt/kube/kubectl exec ${POD_NAME} --container mpi -- /bin/sh -c "$*"')  # C:1233-1235


def test_a_gpu_launcher_hosts_ranks_and_keeps_its_gpus() -> None:
    c = mnist(launcher={"resources": {"limits": {"nvidia.com/gpu": "1"}}}, slotsPerWorker=2)
    c.step()
    data = c.created["ConfigMap/job-config"]["data"]
    # M:193-205 (a limit named like a GPU); C:1244-1246: the launcher first in the hostfile
    assert data["hostfile"] == (
        "job-launcher slots=2\njob-worker-0 slots=2\njob-worker-1 slots=2\n")
    assert data["discover_hosts.sh"] == "#!/bin/sh\necho job-launcher:2\n"  # C:1282-1284
    names = [n for n, _ in env_of(c.pod("job-launcher"))]
    assert "NVIDIA_VISIBLE_DEVICES" not in names  # C:1096-1109


def test_intel_mpi_bootstrap_is_the_users_where_set() -> None:
    c = mnist(launcher={"env": [{"name": "I_MPI_HYDRA_BOOTSTRAP", "value": "ssh"}]})
    c.step()
    env = env_of(c.pod("job-launcher"))
    # M:211-225, C:1112-1128: only the missing one is added, after the user's
    assert env[0] == ("I_MPI_HYDRA_BOOTSTRAP", "ssh")
    assert [n for n, _ in env].count("I_MPI_HYDRA_BOOTSTRAP") == 1
    assert env[-1] == ("I_MPI_HYDRA_BOOTSTRAP_EXEC", "/etc/mpi/kubexec.sh")


def test_launcher_rbac_objects() -> None:
    c = mnist()
    c.step()
    labels = {"app": "job", "training.kubeflow.org/job-name": "job",
              "training.kubeflow.org/operator-name": "mpijob-controller"}
    sa = c.created["ServiceAccount/job-launcher"]  # C:1301-1320
    assert sa["metadata"]["labels"] == labels and sa["metadata"]["ownerReferences"] == [OWNER]
    role = c.created["Role/job-launcher"]  # C:1325-1355
    assert role["rules"] == [
        {"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["pods"]},
        {"verbs": ["create"], "apiGroups": [""], "resources": ["pods/exec"],
         "resourceNames": ["job-worker-0", "job-worker-1"]}]
    binding = c.created["RoleBinding/job-launcher"]  # C:1360-1392
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "job-launcher", "namespace": "default"}]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": "job-launcher"}
    assert "Service/job" not in c.created  # no services (C:262-269, C:560-562)
    assert not any(k.startswith("Secret/") for k in c.created)


def test_the_launcher_role_follows_the_worker_count() -> None:
    c = mnist()
    c.step()
    c.job.spec.replica_specs["Worker"].replicas = 3
    plan = c.step()
    role = next(o for o in plan.update if o["kind"] == "Role")  # C:784-789
    assert role["rules"][1]["resourceNames"] == ["job-worker-0", "job-worker-1", "job-worker-2"]


def test_a_template_service_account_is_bound_not_made() -> None:
    c = Cluster(job("MPIJob", {"Launcher": 1, "Worker": 1}, replica_extra={
        "Launcher": {"template": {"spec": {"serviceAccountName": "team-mpi", "containers": [
            {"name": "mpi", "image": "i", "command": ["mpirun"]}]}}}}))
    c.step()
    assert c.pod("job-launcher")["spec"]["serviceAccountName"] == "team-mpi"
    binding = c.created["RoleBinding/job-launcher"]
    assert binding["subjects"][0]["name"] == "team-mpi"  # C:1364-1366
    # Difference (README): upstream would also create team-mpi if missing (C:1304-1306);
    # trainop never makes, and so never owns, a ServiceAccount the user named.
    assert not any(k.startswith("ServiceAccount/") for k in c.created)


def test_the_launcher_starts_with_the_workers() -> None:
    c = mnist()
    plan = c.step()
    pods = [o["metadata"]["name"] for o in plan.create if o["kind"] == "Pod"]
    assert sorted(pods) == ["job-launcher", "job-worker-0", "job-worker-1"]  # C:390-403


def test_the_kubectl_delivery_image_is_the_flags() -> None:
    c = mnist()
    c.config = EngineConfig(mpi_kubectl_delivery_image="registry.local/kubectl-delivery:v1")
    c.step()
    assert c.pod("job-launcher")["spec"]["initContainers"][0]["image"] == \
        "registry.local/kubectl-delivery:v1"


def test_running_and_success_are_the_launchers() -> None:
    c = mnist()
    c.step()
    c.set("job-launcher", phase="Running")
    c.step()
    running = c.condition("Running")
    # C:581-585: Running once the launcher runs, whatever the workers do; the name only
    assert running.status == "True" and running.reason == "MPIJobRunning"
    assert running.message == "MPIJob job is running."
    c.all("Running", rtype="Worker")
    c.step()
    c.set("job-launcher", phase="Succeeded")
    c.step()
    done = c.condition("Succeeded")
    assert (done.reason, done.message) == (  # C:587-597
        "MPIJobSucceeded", "MPIJob job is successfully completed.")
    assert c.job.status is not None and c.job.status.completion_time is not None


@pytest.mark.parametrize("pod", ["job-launcher", "job-worker-1"])
def test_a_failed_replica_fails_the_job_with_upstreams_doubled_reason(pod: str) -> None:
    c = Cluster(job("MPIJob", {"Launcher": 1, "Worker": 2}, replica_extra={
        rt: {"restartPolicy": "Never"} for rt in ("Launcher", "Worker")}))
    c.step()
    c.all("Running")
    c.step()
    c.set(pod, phase="Failed", exit_code=3)
    c.step()
    failed = c.condition("Failed")
    rtype = "Launcher" if pod == "job-launcher" else "Worker"
    # C:608-613: the event's reason is MPIJobFailed, the condition's NewReason twice
    assert failed.reason == "MPIJobMPIJobFailed"
    assert failed.message.startswith(f"MPIJob job is failed because 1 {rtype} replica(s) failed.")
    told = [(e.type, e.reason, e.message) for e in c.plans[-1].events if "Failed" in e.reason]
    assert told == [("Normal", "MPIJobFailed",
                     f"MPIJob job is failed because 1 {rtype} replica(s) failed.")]


@pytest.mark.parametrize(("policy", "deleted"), [
    ("None", []), ("Running", ["job-worker-0", "job-worker-1"])])
def test_workers_are_cleaned_up_by_the_clean_pod_policy_alone(policy: str,
                                                              deleted: list[str]) -> None:
    # upstream deletes no worker of its own accord (C:359-404): with cleanPodPolicy None
    # (the MPI default, pkg/apis/kubeflow.org/v1/mpi_defaults.go:26-30) sleepers stay
    c = mnist(runPolicy={"cleanPodPolicy": policy})
    c.step()
    c.all("Running")
    c.step()
    c.set("job-launcher", phase="Succeeded")
    plan = c.step()
    assert c.last_condition() == "Succeeded"
    assert sorted(r.name for r in plan.delete if r.kind == "Pod") == deleted


@pytest.mark.parametrize("end", ["Succeeded", "Failed"])
def test_a_finished_job_keeps_no_exec_grant(end: str) -> None:
    # Difference (README): upstream keeps the launcher's Role and RoleBinding until the job
    # is deleted; once it has finished, the pod names they grant exec into may be another
    # workload's (cleanPodPolicy deleted them), or never were the job's (it failed on them)
    c = mnist(runPolicy={"cleanPodPolicy": "Running"})
    c.step()
    c.all("Running")
    c.step()
    c.set("job-launcher", phase=end, exit_code=0 if end == "Succeeded" else 1)
    plan = c.step()
    assert c.last_condition() == end
    assert sorted((r.kind, r.name) for r in plan.delete if r.kind != "Pod") == [
        ("Role", "job-launcher"), ("RoleBinding", "job-launcher")]
    assert sorted(c.objects) == [("ConfigMap", "job-config"),
                                 ("ServiceAccount", "job-launcher")]
    assert not [r for r in c.step().delete if r.kind != "Pod"]  # deleted once


def test_the_exec_target_is_a_container_name_and_quoted() -> None:
    doc = manifest("MPIJob", {"Launcher": 1, "Worker": 1}, spec={"mainContainer": "x;id"})
    with pytest.raises(InvalidJob, match=r"spec.mainContainer: must be a container name .*"
                                         r"got 'x;id'"):
        load_job(doc)
    parsed = job("MPIJob", {"Launcher": 1, "Worker": 1})
    parsed.spec.main_container = "x;id"  # past validation all the same: one word
    assert "--container 'x;id' -- " in kubexec(parsed)
