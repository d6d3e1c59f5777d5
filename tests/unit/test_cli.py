"""The command line, run as a user runs it: one readable line and a non-zero exit on bad
input, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.jobs import manifest

REPO = Path(__file__).resolve().parents[2]


def trainop(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trainop.cli", *args], input=stdin,
                          capture_output=True, text=True, timeout=60)


def test_help_lists_the_commands() -> None:
    out = trainop("--help")
    assert out.returncode == 0
    for command in ("crds", "validate", "run"):
        assert f"  {command} " in out.stdout


@pytest.mark.parametrize(("args", "stdin", "message"), [
    (["validate", "/no/such/job.yaml"], None, "trainop: /no/such/job.yaml: no such file"),
    (["validate", "-"], "a: [\n", "trainop: stdin: line 2: not valid YAML"),
    (["validate", "-"], "- 1\n- 2\n", "trainop: stdin: document 1 is not a Kubernetes object"),
    (["validate", "-"], "", "trainop: stdin: holds no document"),
    (["validate", "-"], "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n",
     "Pod/a: kind: must be one of TFJob, PyTorchJob"),
    # hostile YAML: refused in one line, in bounded time and memory, exit 2
    (["validate", "-"], "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n"
        for i in range(8)), "trainop: stdin: expands to more than 1,000,000 values"),
    (["validate", "-"], "a: !!binary aGVsbG8=\n", "trainop: stdin: line 1: the YAML tag "
     "tag:yaml.org,2002:binary has no JSON form"),
    (["validate", "-"], "a: !!set {x}\n", "trainop: stdin: line 1: the YAML tag "
     "tag:yaml.org,2002:set has no JSON form"),
    (["run", "--dry-run", "-"], "a: " + "9" * 5000 + "\n",
     "trainop: stdin: line 1: a number of 5000 digits (at most 100)"),
    (["run", "--dry-run", "-"], "a: " + "[" * 5000 + "]" * 5000 + "\n",
     "trainop: stdin: is nested more than 100 levels deep"),
    (["validate", "-"], "a: .inf\n", "trainop: stdin: holds the number inf, which JSON cannot"),
], ids=["missing-file", "bad-yaml", "not-an-object", "empty", "not-a-job", "alias-bomb",
        "binary", "set", "huge-integer", "deep-nesting", "infinity"])
def test_bad_input_gives_one_line_and_nonzero_exit(args: list[str], stdin: str | None,
                                                   message: str) -> None:
    out = trainop(*args, stdin=stdin)
    assert out.returncode != 0
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), out.stderr


def test_validate_reports_every_problem_with_its_path() -> None:
    doc = manifest("PyTorchJob", {"Master": 2, "Worker": 1}, name="Bad")
    out = trainop("validate", "-", stdin=yaml.safe_dump(doc))
    assert out.returncode == 1
    assert "PyTorchJob/Bad: spec.pytorchReplicaSpecs[Master].replicas: must be 1, got 2" in \
        out.stderr
    assert "PyTorchJob/Bad: metadata.name: must be a DNS-1035 label" in out.stderr


def test_validate_shows_defaults() -> None:
    out = trainop("validate", "--show-defaults", "-",
                  stdin=yaml.safe_dump(manifest("TFJob", {"worker": None})))
    assert out.returncode == 0, out.stderr
    job = yaml.safe_load(out.stdout)
    assert job["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] == 1
    assert job["spec"]["runPolicy"]["cleanPodPolicy"] == "None"


def test_crds_to_a_folder(tmp_path: Path) -> None:
    out = trainop("crds", "-o", str(tmp_path))
    assert out.returncode == 0
    assert len(list(tmp_path.glob("kubeflow.org_*.yaml"))) == 7
    printed = list(yaml.safe_load_all(trainop("crds").stdout))
    assert {c["spec"]["names"]["kind"] for c in printed} == {
        "TFJob", "PyTorchJob", "MPIJob", "XGBoostJob", "PaddleJob", "JAXJob", "MXJob"}


def test_run_reports_a_malformed_job_without_a_traceback() -> None:
    out = trainop("run", "--dry-run", "-",
                  stdin="apiVersion: kubeflow.org/v1\nkind: JAXJob\nmetadata: true\n")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "trainop: stdin: metadata: must be an object, got a boolean true" in out.stderr


def test_a_date_in_annotations_stays_the_text_it_was() -> None:
    doc = manifest("JAXJob", {"Worker": 1})
    text = yaml.safe_dump(doc) .replace("metadata:\n", "metadata:\n  annotations:\n"
                                                      "    released: 2020-01-01\n", 1)
    out = trainop("validate", "--show-defaults", "-", stdin=text)
    assert out.returncode == 0, out.stderr
    assert yaml.safe_load(out.stdout)["metadata"]["annotations"] == {"released": "2020-01-01"}


def test_validate_an_update_as_the_webhook_would(tmp_path: Path) -> None:
    stored = manifest("PyTorchJob", {"Worker": 1})
    (tmp_path / "stored.yaml").write_text(yaml.safe_dump(stored))
    changed = manifest("PyTorchJob", {"Worker": 2},
                       spec={"runPolicy": {"managedBy": "kueue.x-k8s.io/multikueue"}})
    out = trainop("validate", "--old", str(tmp_path / "stored.yaml"), "-",
                  stdin=yaml.safe_dump(changed))
    assert out.returncode == 1
    assert "PyTorchJob/job: spec.runPolicy.managedBy: is immutable" in out.stderr
    scaled = manifest("PyTorchJob", {"Worker": 2})
    out = trainop("validate", "--old", str(tmp_path / "stored.yaml"), "-",
                  stdin=yaml.safe_dump(scaled))
    assert out.returncode == 0 and out.stdout.strip() == "PyTorchJob/job: valid", out.stderr


def test_validate_says_how_a_job_restarting_as_a_whole_restarts() -> None:
    commanded = {"template": {"spec": {"containers": [
        {"name": "pytorch", "image": "t", "command": ["python", "train.py"]}]}}}
    doc = manifest("PyTorchJob", {"Master": 1, "Worker": 2},
                   spec={"runPolicy": {"restartScope": "Job"}},
                   replica_extra={"Master": commanded})
    text = yaml.safe_dump(doc)
    assert trainop("validate", "-", stdin=text).stdout.splitlines()[1:] == [
        "  Master restarts with the job: pods made again; the manager restarts no job in "
        "place (its --restart-in-place is off)",
        "  Worker restarts with the job: pods made again; the manager restarts no job in "
        "place (its --restart-in-place is off)"]
    out = trainop("validate", "--restart-in-place", "--rank-supervisor-image", "trainop:1",
                  "-", stdin=text)
    assert out.stdout.splitlines() == [
        "PyTorchJob/job: valid",
        "  Master restarts with the job: processes in place; container 'pytorch' names its "
        "command, which runs as the rank supervisor's child (containers in place where the "
        "manager cannot reach the supervisor on port 29611)",
        "  Worker restarts with the job: containers in place; no rank supervisor: container "
        "'pytorch' names no command, so its image's ENTRYPOINT runs, which the pod does not "
        "show"]
    # a job whose pods restart each on its own is not told of whole-job restarts
    single = yaml.safe_dump(manifest("PyTorchJob", {"Worker": 1}))
    assert trainop("validate", "-", stdin=single).stdout == "PyTorchJob/job: valid\n"


def test_validate_says_how_the_managers_gang_gangs_the_job() -> None:
    text = yaml.safe_dump(manifest("PyTorchJob", {"Master": 1, "Worker": 2}, spec={
        "runPolicy": {"schedulingPolicy": {"topologyKey": "example.com/rack"}}}))
    out = trainop("validate", "--gang-scheduler-name", "workload-api", "-", stdin=text)
    assert out.stdout.splitlines() == [
        "PyTorchJob/job: valid",
        "  gang: Kubernetes' own: Workload and PodGroup job (scheduling.k8s.io/v1beta1), "
        "minCount 3, every pod in one domain of node label example.com/rack; the cluster must "
        "serve them: Kubernetes 1.37+ with the GenericWorkload feature gate on kube-apiserver "
        "and kube-scheduler and --runtime-config=scheduling.k8s.io/v1beta1=true on "
        "kube-apiserver, and TopologyAwareWorkloadScheduling on both"]
    out = trainop("validate", "--gang-scheduler-name", "volcano", "-", stdin=text)
    assert out.stdout.splitlines()[1:] == [
        "  gang: Volcano: PodGroup job (scheduling.volcano.sh/v1beta1), minMember 3"]
    assert trainop("validate", "-", stdin=text).stdout == "PyTorchJob/job: valid\n"


def test_the_manager_takes_upstreams_flags() -> None:
    # the flags of upstream's binary (cmd/training-operator.v1/main.go:88-118 at release-1.9),
    # with upstream's defaults where trainop has the same setting
    from trainop.cli import manager

    upstream = ["--metrics-bind-address", ":8080", "--health-probe-bind-address", ":8081",
                "--leader-elect", "--leader-election-id", "x", "--enable-scheme", "tfjob",
                "--enable-scheme", "PyTorchJob", "--gang-scheduler-name", "volcano",
                "--namespace", "ns", "--controller-threads", "2", "--kube-api-qps", "20",
                "--kube-api-burst", "30", "--webhook-server-port", "9443",
                "--webhook-service-name", "training-operator",
                "--webhook-secret-name", "training-operator-webhook-cert",
                "--pytorch-init-container-image", "alpine:3.10",
                "--pytorch-init-container-template-file", "/etc/config/initContainer.yaml",
                "--pytorch-init-container-max-tries", "100",
                "--mpi-kubectl-delivery-image",
                "ghcr.io/kubeflow/training-v1/kubectl-delivery:latest"]
    ctx = manager.make_context("manager", upstream)
    assert ctx.params["webhook_port"] == 9443 and ctx.params["schemes"] == ("tfjob",
                                                                            "PyTorchJob")
    defaults = manager.make_context("manager", []).params
    assert defaults["leader_election_id"] == "1ca428e5.training-operator.kubeflow.org"  # :93
    assert defaults["webhook_service_name"] == "training-operator"  # :117
    assert defaults["webhook_secret_name"] == "training-operator-webhook-cert"  # :118
    assert (defaults["metrics_bind_address"], defaults["health_probe_bind_address"]) == (
        ":8080", ":8081")  # :88-89
    # :104-113 with pkg/config/config.go:26-35
    assert defaults["pytorch_init_container_image"] == "alpine:3.10"
    assert defaults["pytorch_init_container_max_tries"] == 100
    assert str(defaults["pytorch_init_container_template_file"]) == \
        "/etc/config/initContainer.yaml"
    assert defaults["mpi_kubectl_delivery_image"] == \
        "ghcr.io/kubeflow/training-v1/kubectl-delivery:latest"
    assert defaults["wait_for_dns"] is False  # trainop's own, off: pods as upstream's
    assert defaults["aggregate_events"] is False  # trainop's own, off: events as upstream's


def test_each_manager_flag_fills_its_option() -> None:
    from trainop.cli import manager
    from trainop.manager_flags import FLAGS, manager_options

    args = ["--gang-scheduler-name", "volcano", "--namespace", "ns", "--lease-duration", "20",
            "--retry-period", "3", "--webhook-port", "9555", "--kube-api-qps", "0",
            "--pytorch-init-container-max-tries", "7", "--aggregate-events", "--leader-elect"]
    opts = manager_options(manager.make_context("manager", args).params, kinds=["TFJob"])
    assert opts.engine.gang_scheduler == "volcano" and opts.namespace == "ns"
    assert (opts.lease.lease_duration, opts.lease.renew_deadline, opts.lease.retry_period) == (
        20, 10, 3)
    assert opts.webhook is not None and opts.webhook.port == 9555
    assert (opts.qps, opts.engine.pytorch_init_max_tries) == (0, 7)
    assert opts.engine.aggregate_events and not opts.engine.wait_for_dns
    assert opts.leader_elect and opts.kinds == ["TFJob"]
    assert opts.engine.lost_node_grace is None
    grace = manager_options(manager.make_context("manager", ["--lost-node-grace", "40"]).params)
    assert grace.engine.lost_node_grace == 40
    # port 0: no webhook at all
    off = manager_options(manager.make_context("manager", ["--webhook-port", "0"]).params)
    assert off.webhook is None
    # every flag's default is its option's default: nothing set, nothing changed
    from trainop.cluster.options import ManagerOptions
    assert manager_options(manager.make_context("manager", []).params) == ManagerOptions()
    assert len({f.field for f in FLAGS}) == len(FLAGS)


def test_a_flag_of_trainops_own_says_truly_whether_the_shipped_deployment_turns_it_on(
        ) -> None:
    from trainop.manager_flags import FLAGS

    deployment = yaml.safe_load((REPO / "config/manager/deployment.yaml").read_text())
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    on = {f.names[0] for f in FLAGS if "the shipped Deployment turns it on" in f.help}
    off = {f.names[0] for f in FLAGS if "off in the shipped Deployment" in f.help}
    assert "--restart-in-place" in on
    assert on <= set(args) and not off & {a.split("=")[0] for a in args}


@pytest.mark.parametrize(("template", "message"), [
    ("- name: [x\n", "while parsing a flow sequence"),
    ("a: 1\n", "must be a YAML list of containers, each with a name")])
def test_an_init_container_template_that_cannot_render_stops_the_manager(
        tmp_path: Path, template: str, message: str) -> None:
    path = tmp_path / "initContainer.yaml"
    path.write_text(template)
    out = trainop("manager", "--pytorch-init-container-template-file", str(path))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith(f"trainop: --pytorch-init-container-template-file {path}: ")
    assert message in line


def test_the_namespace_comes_from_kubeflow_namespace(monkeypatch: pytest.MonkeyPatch) -> None:
    from trainop.cli import manager

    monkeypatch.setenv("KUBEFLOW_NAMESPACE", "team-a")  # main.go:98
    assert manager.make_context("manager", []).params["namespace"] == "team-a"


def test_kueue_workloads_all_leaves_mpijob_to_kueues_own_integration() -> None:
    from trainop.cli import queued_kinds_of

    assert queued_kinds_of(("all",)) == [
        "TFJob", "PyTorchJob", "XGBoostJob", "PaddleJob", "JAXJob", "MXJob"]
    assert queued_kinds_of(("MPIJob", "mpijob", "tfjob")) == ["MPIJob", "TFJob"]
