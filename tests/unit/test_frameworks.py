"""Each framework's environment (exact), success rule and extra objects."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from tests.jobs import TYPICAL, job, manifest
from tests.sim import T0, Cluster
from trainop.api import KINDS, InvalidJob, load_job
from trainop.engine import ClusterAddressing, Counts, Observed, reconcile
from trainop.frameworks import framework_for


def started(kind: str, replicas: dict[str, int | None], **kw: object) -> Cluster:
    c = Cluster(job(kind, replicas, namespace="ns", **kw))  # type: ignore[arg-type]
    c.step()
    return c


# -- TensorFlow -------------------------------------------------------------------------

TFGO = "pkg/controller.v1/tensorflow/tensorflow.go"


def test_tf_config_multi_replica() -> None:
    c = started("TFJob", {"Chief": 1, "PS": 1, "Worker": 2, "Evaluator": 1})
    env = c.env("job-worker-1")
    # every type, the evaluator too, keys in Go's map order (TFGO:157-188, :136-147)
    assert env["TF_CONFIG"] == (
        '{"cluster":{"chief":["job-chief-0.ns.svc:2222"],'
        '"evaluator":["job-evaluator-0.ns.svc:2222"],"ps":["job-ps-0.ns.svc:2222"],'
        '"worker":["job-worker-0.ns.svc:2222","job-worker-1.ns.svc:2222"]},'
        '"task":{"type":"worker","index":1},"environment":"cloud"}')
    assert json.loads(c.env("job-evaluator-0")["TF_CONFIG"])["task"] == {
        "type": "evaluator", "index": 0}
    assert set(env) == {"TF_CONFIG"}


def test_tf_dynamic_workers_get_a_sparse_tf_config() -> None:
    c = started("TFJob", {"PS": 2, "Worker": 3}, spec={"enableDynamicWorker": True})
    # TFGO:74-83, :125-134: a worker knows itself and the PS; a PS itself; no environment
    assert c.env("job-worker-2")["TF_CONFIG"] == (
        '{"cluster":{"worker":{"2":"job-worker-2.ns.svc:2222"},'
        '"ps":["job-ps-0.ns.svc:2222","job-ps-1.ns.svc:2222"]},'
        '"task":{"type":"worker","index":2}}')
    assert c.env("job-ps-1")["TF_CONFIG"] == (
        '{"cluster":{"worker":{},"ps":["job-ps-1.ns.svc:2222"]},"task":{"type":"ps","index":1}}')
    # without PS, a worker's list is Go's lookup of a missing key: null (TFGO:79); the
    # chief's is the empty list it starts with (TFGO:75)
    c = started("TFJob", {"Chief": 1, "Worker": 1}, spec={"enableDynamicWorker": True})
    assert c.env("job-worker-0")["TF_CONFIG"] == (
        '{"cluster":{"worker":{"0":"job-worker-0.ns.svc:2222"},"ps":null},'
        '"task":{"type":"worker","index":0}}')
    assert c.env("job-chief-0")["TF_CONFIG"] == (
        '{"cluster":{"worker":{},"ps":[]},"task":{"type":"chief","index":0}}')


def test_tf_dynamic_workers_may_fail_without_failing_the_job() -> None:
    # pkg/controller.v1/tensorflow/tfjob_controller.go:495-498
    never = {"Worker": {"restartPolicy": "Never"}}
    c = started("TFJob", {"Chief": 1, "Worker": 2}, spec={"enableDynamicWorker": True},
                replica_extra=never)
    c.set("job-worker-1", phase="Failed", exit_code=1)
    c.step()
    assert c.condition("Failed") is None
    plain = started("TFJob", {"Chief": 1, "Worker": 2}, replica_extra=never)
    plain.set("job-worker-1", phase="Failed", exit_code=1)
    plain.step()
    assert plain.condition("Failed") is not None


def test_tf_config_names_a_custom_cluster_domain() -> None:
    j = job("TFJob", {"Worker": 2}, namespace="ns")
    plan = reconcile(j, Observed(), T0, framework_for("TFJob"),
                     ClusterAddressing("cluster.local"))
    pod = next(o for o in plan.create if o["kind"] == "Pod")
    tf_config = json.loads(pod["spec"]["containers"][0]["env"][0]["value"])
    # CUSTOM_CLUSTER_DOMAIN after `svc` (TFGO:174-178)
    assert tf_config["cluster"]["worker"][0] == "job-worker-0.ns.svc.cluster.local:2222"


def test_tf_single_replica_gets_no_tf_config() -> None:
    assert started("TFJob", {"Worker": 1}).env("job-worker-0") == {}


def test_tf_config_only_in_the_tensorflow_container() -> None:
    extra = {"Worker": {"template": {"spec": {"containers": [
        {"name": "sidecar", "image": "s"}, {"name": "tensorflow", "image": "t"}]}}}}
    c = started("TFJob", {"Worker": 2}, replica_extra=extra)
    assert c.env("job-worker-0", 0) == {}
    assert "TF_CONFIG" in c.env("job-worker-0", 1)


def test_tf_uses_the_users_port() -> None:
    extra = {"Worker": {"template": {"spec": {"containers": [{
        "name": "tensorflow", "image": "t",
        "ports": [{"name": "tfjob-port", "containerPort": 5000}]}]}}}}
    c = started("TFJob", {"Worker": 2}, replica_extra=extra)
    cluster = json.loads(c.env("job-worker-0")["TF_CONFIG"])["cluster"]
    assert cluster["worker"] == ["job-worker-0.ns.svc:5000", "job-worker-1.ns.svc:5000"]


def test_user_env_wins_over_the_frameworks() -> None:
    # Difference (README): upstream appends its variables after the user's (the last wins)
    extra = {"Worker": {"template": {"spec": {"containers": [{
        "name": "pytorch", "image": "t", "env": [{"name": "MASTER_PORT", "value": "1"}]}]}}}}
    c = started("PyTorchJob", {"Master": 1, "Worker": 1}, replica_extra=extra)
    env = c.env("job-worker-0")
    assert env["MASTER_PORT"] == "1" and env["MASTER_ADDR"] == "job-master-0"


# -- PyTorch ------------------------------------------------------------------------------

PT = "pkg/controller.v1/pytorch"


def test_pytorch_env_with_master() -> None:
    c = started("PyTorchJob", {"Master": 1, "Worker": 2})

    def expected(rank: int) -> list[tuple[str, str]]:  # upstream's order: envvar.go:49-123
        return [("PYTHONUNBUFFERED", "1"), ("MASTER_PORT", "23456"),
                ("PET_MASTER_PORT", "23456"), ("MASTER_ADDR", "job-master-0"),
                ("PET_MASTER_ADDR", "job-master-0"), ("WORLD_SIZE", "3"),
                ("RANK", str(rank)), ("PET_NODE_RANK", str(rank)),
                ("PET_NPROC_PER_NODE", "auto"), ("PET_NNODES", "3")]
    for rank, pod in enumerate(["job-master-0", "job-worker-0", "job-worker-1"]):
        assert list(c.env(pod).items()) == expected(rank), pod


def test_pytorch_without_a_master_gets_no_master_rank_or_world_size() -> None:
    # envvar.go:66-97: MASTER_*, WORLD_SIZE and RANK only where the job has a Master
    env = started("PyTorchJob", {"Worker": 2}).env("job-worker-1")
    assert list(env.items()) == [("PYTHONUNBUFFERED", "1"), ("PET_NPROC_PER_NODE", "auto"),
                                 ("PET_NNODES", "2")]


@pytest.mark.parametrize(("nproc", "gpus", "world"), [("4", 0, "8"), ("auto", 2, "2"),
                                                      ("gpu", 2, "2")])
def test_pytorch_world_size_counts_an_integer_nproc_only(nproc: str, gpus: int,
                                                         world: str) -> None:
    # envvar.go:62-64, :132-140: auto/cpu/gpu count as 1 (torchrun works the rest out)
    limits = {"resources": {"limits": {"nvidia.com/gpu": gpus}}} if gpus else {}
    extra = {rt: {"template": {"spec": {"containers": [
        {"name": "pytorch", "image": "t", **limits}]}}} for rt in ("Master", "Worker")}
    c = started("PyTorchJob", {"Master": 1, "Worker": 1}, spec={"nprocPerNode": nproc},
                replica_extra=extra)
    env = c.env("job-worker-0")
    assert env["WORLD_SIZE"] == world and env["PET_NPROC_PER_NODE"] == nproc


def test_pytorch_elastic_env() -> None:
    c = started("PyTorchJob", {"Worker": 2}, spec={"elasticPolicy": {
        "minReplicas": 1, "maxReplicas": 4, "maxRestarts": 3, "rdzvId": "abc",
        "rdzvConf": [{"key": "timeout", "value": "900"}, {"key": "x", "value": "y"}]}})
    # elastic.go:79-119, in its order, after envvar.go's
    assert list(c.env("job-worker-1").items()) == [
        ("PYTHONUNBUFFERED", "1"), ("PET_NPROC_PER_NODE", "auto"),
        ("PET_RDZV_ENDPOINT", "job-worker-0:23456"), ("PET_RDZV_BACKEND", "c10d"),
        ("PET_NNODES", "1:4"), ("PET_MAX_RESTARTS", "3"), ("PET_RDZV_ID", "abc"),
        ("PET_RDZV_CONF", "timeout=900,x=y")]


def test_pytorch_elastic_nproc_per_node_is_the_only_one() -> None:
    # pytorch_defaults.go:77-83: no default nprocPerNode beside the elastic one
    c = started("PyTorchJob", {"Worker": 2}, spec={"elasticPolicy": {"nProcPerNode": 4}})
    env = c.env("job-worker-0")
    assert env["PET_NPROC_PER_NODE"] == "4" and env["PET_NNODES"] == "2:2"


def test_pytorch_standalone_is_a_value_torchrun_reads() -> None:
    # Difference (README): upstream writes PET_STANDALONE="" (elastic.go:114-118), which
    # torchrun's check_env reads with int() and fails on.
    c = started("PyTorchJob", {"Worker": 1}, spec={"elasticPolicy": {"standalone": True}})
    assert c.env("job-worker-0")["PET_STANDALONE"] == "1"


def test_pytorch_env_goes_to_every_container() -> None:
    extra = {"Worker": {"template": {"spec": {"containers": [
        {"name": "pytorch", "image": "t"}, {"name": "helper", "image": "h"}]}}}}
    c = started("PyTorchJob", {"Master": 1, "Worker": 2}, replica_extra=extra)
    assert c.env("job-worker-1", 1)["RANK"] == "2"  # envvar.go:49


def test_pytorch_workers_wait_for_the_masters_name() -> None:
    c = started("PyTorchJob", {"Master": 1, "Worker": 2})
    (init,) = c.pod("job-worker-1")["spec"]["initContainers"]
    assert init == {  # initcontainer.go:35-46, 124-133; pkg/config/config.go:29,34
        "name": "init-pytorch", "image": "alpine:3.10", "imagePullPolicy": "IfNotPresent",
        "resources": {"limits": {"cpu": "100m", "memory": "20Mi"},
                      "requests": {"cpu": "50m", "memory": "10Mi"}},
        "command": ["sh", "-c", "err=1;for i in $(seq 100); do if nslookup job-master-0; "
                    "then err=0 && break; fi;echo waiting for master; sleep 2; done; exit $err"]}
    assert "initContainers" not in c.pod("job-master-0")["spec"]
    # initcontainer.go:117-120: no Master, no wait
    solo = started("PyTorchJob", {"Worker": 2})
    assert "initContainers" not in solo.pod("job-worker-0")["spec"]


def test_pytorch_init_container_from_the_flags_and_template_file() -> None:
    from trainop.engine import EngineConfig

    template = ("- name: wait\n  image: {{.InitContainerImage}}\n"
                "  command: [sh, -c, 'until nslookup {{ .MasterAddr }}; do sleep 1; done; "
                "echo {{.MaxTries}}']\n")
    c = Cluster(job("PyTorchJob", {"Master": 1, "Worker": 1}), EngineConfig(
        pytorch_init_image="registry.local/busybox:1", pytorch_init_max_tries=7,
        pytorch_init_template=template))
    c.step()
    assert c.pod("job-worker-0")["spec"]["initContainers"] == [{
        "name": "wait", "image": "registry.local/busybox:1",
        "command": ["sh", "-c", "until nslookup job-master-0; do sleep 1; done; echo 7"]}]


# -- XGBoost, Paddle, JAX, MXNet ------------------------------------------------------------

def test_xgboost_env() -> None:
    c = started("XGBoostJob", {"Master": 1, "Worker": 2})
    common = {"MASTER_ADDR": "job-master-0", "MASTER_PORT": "9999", "WORLD_SIZE": "3",
              "WORKER_PORT": "9999", "WORKER_ADDRS": "job-worker-0,job-worker-1",
              "PYTHONUNBUFFERED": "1"}
    assert c.env("job-master-0") == {**common, "RANK": "0"}
    assert c.env("job-worker-1") == {**common, "RANK": "2"}
    # a Master alone gets no WORKER_* (upstream: pkg/controller.v1/xgboost/xgboost.go:98-109)
    solo = started("XGBoostJob", {"Master": 1}).env("job-master-0")
    assert solo == {"MASTER_PORT": "9999", "MASTER_ADDR": "job-master-0", "WORLD_SIZE": "1",
                    "RANK": "0", "PYTHONUNBUFFERED": "1"}


def wait_command(*names: str) -> list[str]:
    return ["sh", "-c", f"for name in {' '.join(names)}; do err=1; for i in $(seq 100); do "
            'if nslookup "$name"; then err=0 && break; fi; echo "waiting for $name"; '
            "sleep 2; done; if [ $err != 0 ]; then exit $err; fi; done"]


def test_xgboost_workers_wait_for_the_masters_name_only_when_asked() -> None:
    from trainop.engine import EngineConfig

    # as upstream by default: no init container at all
    upstream = started("XGBoostJob", {"Master": 1, "Worker": 2})
    assert not any("initContainers" in upstream.pod(name)["spec"] for name in upstream.pods)
    c = Cluster(job("XGBoostJob", {"Master": 1, "Worker": 2}), EngineConfig(wait_for_dns=True))
    c.step()
    (init,) = c.pod("job-worker-1")["spec"]["initContainers"]
    assert init == {"name": "wait-for-dns", "image": "alpine:3.10",
                    "imagePullPolicy": "IfNotPresent",
                    "resources": {"limits": {"cpu": "100m", "memory": "20Mi"},
                                  "requests": {"cpu": "50m", "memory": "10Mi"}},
                    "command": wait_command("job-master-0")}
    assert "initContainers" not in c.pod("job-master-0")["spec"]


@pytest.mark.parametrize("kind", ["XGBoostJob", "JAXJob"], ids=["xgboost", "jax"])
def test_the_environment_goes_to_every_container(kind: str) -> None:
    # upstream sets it on every container of the pod
    # (pkg/controller.v1/xgboost/xgboost.go:73, pkg/controller.v1/jax/envvar.go:48)
    main = KINDS[kind].default_container
    extra = {rt: {"template": {"spec": {"containers": [
        {"name": main, "image": "i"}, {"name": "sidecar", "image": "s"}]}}}
        for rt in TYPICAL[kind]}
    plan = Cluster(job(kind, TYPICAL[kind], replica_extra=extra)).plan()
    pod = next(o for o in plan.create if o["kind"] == "Pod")
    names = [[e["name"] for e in c.get("env") or []] for c in pod["spec"]["containers"]]
    assert names[0] == names[1] and names[0]


PADDLE = "pkg/controller.v1/paddlepaddle/envvar.go"
POD_IP = {"fieldRef": {"fieldPath": "status.podIP"}}


def test_paddle_collective_env() -> None:
    c = started("PaddleJob", {"Worker": 3})
    # PADDLE:60-99, in its order; rank 0 serves the master on its own IP (:80-92)
    assert list(c.env("job-worker-2").items()) == [
        ("PYTHONUNBUFFERED", "1"), ("PADDLE_JOB_ID", "job"), ("PADDLE_NNODES", "3"),
        ("PADDLE_MASTER", "job-worker-0:36543")]
    assert list(c.env("job-worker-0").items()) == [
        ("PYTHONUNBUFFERED", "1"), ("PADDLE_JOB_ID", "job"), ("PADDLE_NNODES", "3"),
        ("POD_IP_DUMMY", POD_IP), ("PADDLE_MASTER", "$(POD_IP_DUMMY):36543")]


def test_paddle_ps_env() -> None:
    c = started("PaddleJob", {"Master": 2, "Worker": 2})
    # PADDLE:101-140: NNODES over all replicas, one server or trainer per pod
    assert list(c.env("job-worker-0").items()) == [
        ("PYTHONUNBUFFERED", "1"), ("PADDLE_JOB_ID", "job"), ("PADDLE_NNODES", "4"),
        ("PADDLE_MASTER", "job-master-0:36543"), ("PADDLE_TRAINER_NUM", "1")]
    assert list(c.env("job-master-1").items())[-2:] == [
        ("PADDLE_MASTER", "job-master-0:36543"), ("PADDLE_SERVER_NUM", "1")]
    assert c.env("job-master-0")["PADDLE_MASTER"] == "$(POD_IP_DUMMY):36543"


def test_jax_env() -> None:
    c = started("JAXJob", {"Worker": 3})
    assert c.env("job-worker-2") == {"COORDINATOR_ADDRESS": "job-worker-0",
                                      "COORDINATOR_PORT": "6666", "NUM_PROCESSES": "3",
                                      "PROCESS_ID": "2", "PYTHONUNBUFFERED": "1"}
    assert started("JAXJob", {"Worker": 1}).env("job-worker-0")["NUM_PROCESSES"] == "1"


def test_mxnet_env() -> None:
    c = started("MXJob", {"Scheduler": 1, "Server": 1, "Worker": 2})
    env = c.env("job-server-0")
    assert env["DMLC_ROLE"] == "server"
    assert env["DMLC_PS_ROOT_URI"] == "job-scheduler-0.ns.svc"
    assert env["DMLC_PS_ROOT_PORT"] == "9091"
    assert (env["DMLC_NUM_SERVER"], env["DMLC_NUM_WORKER"]) == ("1", "2")
    assert env["DMLC_USE_KUBERNETES"] == "1"
    config = json.loads(env["MX_CONFIG"])
    assert config["task"] == {"type": "server", "index": 0}
    assert config["cluster"]["worker"] == [
        {"url": "job-worker-0.ns.svc", "port": 9091}, {"url": "job-worker-1.ns.svc", "port": 9091}]


# -- MPI, SSH transport (opt-in; the default transport: test_mpi_v1.py) ----------------------

SSH = {"transport": "SSH"}

@pytest.mark.parametrize(("impl", "hostfile"), [
    ("OpenMPI", "job-worker-0.job.ns.svc slots=2\njob-worker-1.job.ns.svc slots=2\n"),
    ("Intel", "job-worker-0.job.ns.svc:2\njob-worker-1.job.ns.svc:2\n"),
    ("MPICH", "job-worker-0.job.ns.svc:2\njob-worker-1.job.ns.svc:2\n"),
])
def test_mpi_hostfile_formats(impl: str, hostfile: str) -> None:
    c = started("MPIJob", {"Launcher": 1, "Worker": 2},
                spec={**SSH, "slotsPerWorker": 2, "mpiImplementation": impl})
    cm = c.created["ConfigMap/job-config"]
    assert cm["data"]["hostfile"] == hostfile
    # discover_hosts.sh: the workers that run, by pod name (mpi-operator's)
    assert cm["data"]["discover_hosts.sh"] == "#!/bin/sh\n"
    c.set("job-worker-1", phase="Running")
    [update] = c.step().update
    assert update["data"]["discover_hosts.sh"] == "#!/bin/sh\necho job-worker-1.job.ns.svc\n"
    assert update["data"]["hostfile"] == hostfile
    c.set("job-worker-0", phase="Running")
    [update] = c.step().update
    assert update["data"]["discover_hosts.sh"] == (
        "#!/bin/sh\necho job-worker-0.job.ns.svc\necho job-worker-1.job.ns.svc\n")


@pytest.mark.parametrize(("impl", "var"), [
    ("OpenMPI", "OMPI_MCA_orte_default_hostfile"), ("Intel", "I_MPI_HYDRA_HOST_FILE"),
    ("MPICH", "HYDRA_HOST_FILE")])
def test_mpi_launcher_env(impl: str, var: str) -> None:
    c = started("MPIJob", {"Launcher": 1, "Worker": 1},
                spec={**SSH, "mpiImplementation": impl})
    env = c.env("job-launcher")
    assert env[var] == "/etc/mpi/hostfile" and env["K_MPI_JOB_ROLE"] == "launcher"
    assert c.env("job-worker-0") == {"K_MPI_JOB_ROLE": "worker"}


def test_mpi_pods_secret_and_service() -> None:
    c = started("MPIJob", {"Launcher": 1, "Worker": 2}, spec=SSH)
    worker = c.pod("job-worker-1")
    assert worker["spec"]["hostname"] == "job-worker-1"
    assert worker["spec"]["subdomain"] == "job"
    assert worker["spec"]["containers"][0]["volumeMounts"] == [
        {"name": "ssh-auth", "mountPath": "/root/.ssh"}]
    launcher = c.pod("job-launcher")
    assert launcher["spec"]["hostname"] == "job-launcher"
    mounts = {m["mountPath"] for m in launcher["spec"]["containers"][0]["volumeMounts"]}
    assert mounts == {"/root/.ssh", "/etc/mpi"}
    secret = c.created["Secret/job-ssh"]
    assert secret["type"] == "kubernetes.io/ssh-auth"
    assert base64.b64decode(secret["data"]["ssh-privatekey"]) == b"PRIVATE"
    assert secret["metadata"]["ownerReferences"][0]["kind"] == "MPIJob"
    svc = c.created["Service/job"]
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["selector"] == {"training.kubeflow.org/job-name": "job",
                                       "training.kubeflow.org/operator-name": "mpijob-controller"}
    assert "kubectl" not in json.dumps(launcher)
    assert not [k for k in c.created if k.split("/")[0] in ("Role", "ServiceAccount")]
    # ssh looks each worker up once: the launcher starts when their names resolve
    (init,) = launcher["spec"]["initContainers"]
    assert init["name"] == "wait-for-dns" and init["command"] == wait_command(
        "job-worker-0.job.ns.svc", "job-worker-1.job.ns.svc")
    assert "initContainers" not in worker["spec"]


@pytest.mark.parametrize(("impl", "launcher_line"), [
    ("OpenMPI", "job-launcher.job.ns.svc slots=2\n"), ("MPICH", "job-launcher.job.ns.svc:2\n")])
def test_a_launcher_that_runs_as_a_worker_comes_first_in_the_hostfile(
        impl: str, launcher_line: str) -> None:
    # mpi-operator's runLauncherAsWorker (newConfigMap, updateDiscoverHostsInConfigMap)
    c = started("MPIJob", {"Launcher": 1, "Worker": 1},
                spec={**SSH, "slotsPerWorker": 2, "mpiImplementation": impl,
                      "runLauncherAsWorker": True})
    cm = c.created["ConfigMap/job-config"]
    assert cm["data"]["hostfile"].startswith(launcher_line)
    assert cm["data"]["hostfile"].count("\n") == 2
    assert cm["data"]["discover_hosts.sh"] == "#!/bin/sh\necho job-launcher.job.ns.svc\n"


def test_the_ssh_key_is_mounted_where_the_job_says() -> None:
    c = started("MPIJob", {"Launcher": 1, "Worker": 1},
                spec={**SSH, "sshAuthMountPath": "/home/mpiuser/.ssh"})
    worker = c.pod("job-worker-0")["spec"]
    assert worker["containers"][0]["volumeMounts"] == [
        {"name": "ssh-auth", "mountPath": "/home/mpiuser/.ssh"}]
    # root's keys are made private (0600); a user's keep the volume's default mode, as
    # mpi-operator's setupSSHOnPod
    (volume,) = [v for v in worker["volumes"] if v["name"] == "ssh-auth"]
    assert "defaultMode" not in volume["secret"]
    root = started("MPIJob", {"Launcher": 1, "Worker": 1}, spec=SSH).pod("job-worker-0")
    (volume,) = [v for v in root["spec"]["volumes"] if v["name"] == "ssh-auth"]
    assert volume["secret"]["defaultMode"] == 0o600


@pytest.mark.parametrize(("spec", "problem"), [
    ({"runLauncherAsWorker": True}, "spec.runLauncherAsWorker: needs transport: SSH"),
    ({"sshAuthMountPath": "/home/u/.ssh"}, "spec.sshAuthMountPath: needs transport: SSH"),
    ({**SSH, "sshAuthMountPath": "home/.ssh"},
     "spec.sshAuthMountPath: must be an absolute path, got 'home/.ssh'"),
])
def test_the_ssh_fields_are_refused_where_they_cannot_hold(spec: dict[str, Any],
                                                           problem: str) -> None:
    with pytest.raises(InvalidJob) as err:
        load_job(manifest("MPIJob", {"Launcher": 1, "Worker": 1}, spec=spec))
    assert any(str(p).startswith(problem) for p in err.value.problems), err.value.problems


def test_mpi_hostfile_follows_worker_scaling() -> None:
    c = started("MPIJob", {"Launcher": 1, "Worker": 1}, spec=SSH)
    c.job.spec.replica_specs["Worker"].replicas = 2
    plan = c.step()
    assert [o["kind"] for o in plan.update] == ["ConfigMap"]
    assert plan.update[0]["data"]["hostfile"].count("slots=1") == 2


def test_mpi_launcher_waits_for_ready_workers() -> None:
    c = Cluster(job("MPIJob", {"Launcher": 1, "Worker": 2},
                    spec={**SSH, "launcherCreationPolicy": "WaitForWorkersReady"}))
    c.step()
    assert "job-launcher" not in c.pods
    c.all("Running", ready=True, rtype="Worker")
    c.set("job-worker-1", ready=False)
    c.step()
    assert "job-launcher" not in c.pods
    c.set("job-worker-1", ready=True)
    c.step()
    assert "job-launcher" in c.pods


def test_mpi_ssh_workers_stop_when_the_launcher_is_done() -> None:
    c = started("MPIJob", {"Launcher": 1, "Worker": 2}, spec=SSH)
    c.all("Running", ready=True)
    c.step()
    c.set("job-launcher", phase="Succeeded")
    plan = c.step()
    assert c.last_condition() == "Succeeded"
    assert sorted(r.name for r in plan.delete if r.kind == "Pod") == [
        "job-worker-0", "job-worker-1"]


# -- success rules ----------------------------------------------------------------------------

def counts(**per_type: tuple[int, set[int]]) -> dict[str, Counts]:
    return {rt: Counts(replicas=n, succeeded=len(done), succeeded_indexes=frozenset(done))
            for rt, (n, done) in per_type.items()}


@pytest.mark.parametrize(("kind", "replicas", "spec", "state", "expected"), [
    ("TFJob", {"Chief": 1, "Worker": 2}, {}, counts(Chief=(1, {0}), Worker=(2, set())), True),
    ("TFJob", {"Chief": 1, "Worker": 2}, {}, counts(Chief=(1, set()), Worker=(2, {0, 1})), False),
    ("TFJob", {"Worker": 2}, {}, counts(Worker=(2, {0})), True),
    ("TFJob", {"Worker": 2}, {}, counts(Worker=(2, {1})), False),
    ("TFJob", {"Worker": 2}, {"successPolicy": "AllWorkers"}, counts(Worker=(2, {0})), False),
    ("TFJob", {"Worker": 2}, {"successPolicy": "AllWorkers"}, counts(Worker=(2, {0, 1})), True),
    ("PyTorchJob", {"Master": 1, "Worker": 2}, {}, counts(Master=(1, {0}), Worker=(2, set())),
     True),
    ("PyTorchJob", {"Worker": 2}, {}, counts(Worker=(2, {0})), False),
    ("PyTorchJob", {"Worker": 2}, {}, counts(Worker=(2, {0, 1})), True),
    ("PyTorchJob", {"Worker": 2}, {"elasticPolicy": {"minReplicas": 1}}, counts(Worker=(2, {1})),
     True),
    ("XGBoostJob", {"Master": 1, "Worker": 2}, {}, counts(Master=(1, {0}), Worker=(2, set())),
     True),
    ("XGBoostJob", {"Master": 1, "Worker": 2}, {}, counts(Master=(1, set()), Worker=(2, {0, 1})),
     False),
    ("PaddleJob", {"Master": 1, "Worker": 2}, {}, counts(Master=(1, {0}), Worker=(2, set())),
     True),
    ("PaddleJob", {"Worker": 2}, {}, counts(Worker=(2, {0})), False),
    ("PaddleJob", {"Worker": 2}, {}, counts(Worker=(2, {0, 1})), True),
    ("JAXJob", {"Worker": 2}, {}, counts(Worker=(2, {0})), False),
    ("JAXJob", {"Worker": 2}, {}, counts(Worker=(2, {0, 1})), True),
    ("MPIJob", {"Launcher": 1, "Worker": 2}, {}, counts(Launcher=(1, {0}), Worker=(2, set())),
     True),
    ("MPIJob", {"Launcher": 1, "Worker": 2}, {}, counts(Launcher=(1, set()), Worker=(2, {0, 1})),
     False),
    ("MXJob", {"Scheduler": 1, "Worker": 2}, {}, counts(Scheduler=(1, {0}), Worker=(2, set())),
     True),
    ("MXJob", {"Worker": 1}, {}, counts(Worker=(1, {0})), True),
], ids=["tf-chief-done", "tf-chief-running", "tf-worker0-done", "tf-worker1-only",
        "tf-allworkers-one", "tf-allworkers-all", "pt-master-done", "pt-one-worker",
        "pt-all-workers", "pt-elastic-any-worker", "xgb-master-done", "xgb-workers-only",
        "paddle-master-done", "paddle-one-worker", "paddle-all-workers", "jax-one-worker",
        "jax-all-workers", "mpi-launcher-done", "mpi-workers-only", "mx-scheduler-done",
        "mx-single-worker"])
def test_success_rules(kind: str, replicas: dict[str, int | None], spec: dict[str, object],
                       state: dict[str, Counts], expected: bool) -> None:
    j = job(kind, replicas, spec=spec)
    assert framework_for(kind).succeeded(j, state) is expected


@pytest.mark.parametrize("transport", ["KubectlExec", "SSH"])
def test_mpi_hostfile_lists_each_host_once_with_all_its_slots(transport: str) -> None:
    from trainop.frameworks import mpi_exec, mpi_ssh
    from trainop.local.addressing import LocalAddressing

    j = job("MPIJob", {"Launcher": 1, "Worker": 3},
            spec={"slotsPerWorker": 2, "transport": transport})
    hostfile = mpi_ssh.hostfile if transport == "SSH" else mpi_exec.hostfile
    assert hostfile(j, LocalAddressing.for_job(j)) == "127.0.0.1 slots=6\n"


class CountingAddressing(ClusterAddressing):
    """The cluster's addressing, counting the lookups a plan makes."""

    def __init__(self) -> None:
        super().__init__()
        self.lookups = 0

    def host(self, job: Any, rtype: str, index: int, *, qualified: bool = True) -> str:
        self.lookups += 1
        return super().host(job, rtype, index, qualified=qualified)


@pytest.mark.parametrize(("kind", "types"), [
    ("TFJob", {"Chief": 1, "PS": 2, "Worker": 400}),
    ("MXJob", {"Scheduler": 1, "Server": 2, "Worker": 400}),
    ("XGBoostJob", {"Master": 1, "Worker": 400}),
], ids=["tf-config", "mx-config", "xgboost-worker-addrs"])
def test_a_big_jobs_environment_costs_linear_work(kind: str, types: dict[str, int]) -> None:
    # Every pod's environment lists every replica; the list is built once per plan, so a
    # job of n replicas makes O(n) address lookups, not n * n (a hostile TFJob of thousands
    # of workers must not hold the manager for minutes).
    addr = CountingAddressing()
    c = Cluster(job(kind, types), addr=addr)
    while c.step().create:
        pass
    pods = [o for k, o in c.created.items() if k.startswith("Pod/")]
    assert len(pods) == sum(types.values())
    # (the list once per plan: a plan makes at most PLAN_OBJECTS pods and services)
    assert addr.lookups <= 3 * len(pods) + len(pods) * (len(c.plans) - 1), addr.lookups
    # and each pod still gets its own task in the shared text
    if kind == "TFJob":
        configs = [json.loads(_env(p)["TF_CONFIG"]) for p in pods]
        assert {(c["task"]["type"], c["task"]["index"]) for c in configs} == {
            (rt.lower(), i) for rt, n in types.items() for i in range(n)}
        assert all(len(c["cluster"]["worker"]) == 400 for c in configs)


def _env(pod: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in pod["spec"]["containers"][0].get("env") or []
            if "value" in e}


@pytest.mark.parametrize(("kind", "label", "expected"), [
    ("TFJob", "ps", "PS"), ("TFJob", "chief", "Chief"), ("MXJob", "tunertracker", None),
    ("MPIJob", "launcher", "Launcher"), ("JAXJob", "master", None),
], ids=["tf-ps", "tf-chief", "mx-type-not-in-spec", "mpi-launcher", "jax-unknown"])
def test_a_replica_type_label_maps_back_to_the_spec_key(kind: str, label: str,
                                                        expected: str | None) -> None:
    from tests.jobs import TYPICAL
    from trainop.engine.labels import replica_type_of

    assert replica_type_of(job(kind, TYPICAL[kind]), label) == expected


def test_no_runtime_or_engine_module_names_a_job_kind() -> None:
    # A kind's behaviour lives in its framework plugin, its facts (api/kinds.py) and its
    # spec type's rules (api/types.py): the engine, both runtimes, defaulting and
    # validation never branch on a kind's name.
    from pathlib import Path

    from trainop.api import KINDS

    root = Path(__file__).resolve().parents[2] / "trainop"
    files = [*(root / "engine").glob("*.py"), *(root / "cluster").glob("*.py"),
             *(root / "local").glob("*.py"), root / "api" / "defaults.py",
             root / "api" / "validation.py"]
    named = [(f.name, kind) for f in files for kind in KINDS
             if f'"{kind}"' in f.read_text()]
    assert named == []


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_local_plan_binds_nothing_and_gives_each_replica_its_own_port(
        kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    from trainop.engine import EngineConfig
    from trainop.local.addressing import LocalAddressing

    j = job(kind, replica_extra={rt: {"template": {"spec": {"containers": [{
        "name": KINDS[kind].default_container, "image": "example.com/train:1",
        "ports": [{"name": "metrics", "containerPort": 9100}]}]}}}
        for rt in TYPICAL[kind]})
    addr = LocalAddressing.for_job(j)  # the runtime's I/O, before the first reconcile

    def closed(*a: object, **kw: object) -> None:
        raise AssertionError("a reconcile opened a socket")
    monkeypatch.setattr(socket, "socket", closed)
    plan = reconcile(j, Observed(), T0, framework_for(kind), addr, EngineConfig())
    assert [o for o in plan.create if o["kind"] == "Pod"]
    ports = [addr.port(j, rt, i, name) for rt, n in TYPICAL[kind].items()
             for i in range(n or 0) for name in (None, "metrics")]
    assert len(set(ports)) == len(ports)
    with pytest.raises(LookupError, match="no port 'other' on Worker replica 0"):
        addr.port(j, "Worker", 0, "other")
