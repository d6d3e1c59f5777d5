"""Validation: every rule with a passing and a failing case, all problems at once."""

from __future__ import annotations

from typing import Any

import pytest

from tests.jobs import TYPICAL, manifest
from trainop.api import KINDS, InvalidJob, load_job, parse_job


def problems(doc: dict[str, Any]) -> list[str]:
    try:
        load_job(doc)
    except InvalidJob as err:
        return [str(p) for p in err.problems]
    return []


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_typical_job_of_every_kind_is_valid(kind: str) -> None:
    assert problems(manifest(kind, TYPICAL[kind])) == []


@pytest.mark.parametrize("name", ["a", "job-1", "x" * 63])
def test_dns1035_names_pass(name: str) -> None:
    assert problems(manifest("TFJob", {"Worker": 1}, name=name)) == []


@pytest.mark.parametrize("name", ["Job", "1job", "job-", "job_1", "x" * 64, "a.b"],
                         ids=["upper-case", "digit-first", "dash-last", "underscore", "64-chars",
                              "dot"])
def test_non_dns1035_names_fail(name: str) -> None:
    assert any(p.startswith("metadata.name: must be a DNS-1035 label") for p in
               problems(manifest("TFJob", {"Worker": 1}, name=name)))


def test_missing_name_fails() -> None:
    doc = manifest("TFJob", {"Worker": 1})
    del doc["metadata"]["name"]
    assert "metadata.name: is required" in problems(doc)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_replica_specs_must_be_present(kind: str) -> None:
    field = KINDS[kind].replica_specs_field
    assert f"spec.{field}: must name at least one replica type" in problems(manifest(kind, {}))


def test_each_replica_needs_a_container_with_an_image() -> None:
    doc = manifest("TFJob", {"Worker": 1, "PS": 1})
    doc["spec"]["tfReplicaSpecs"]["Worker"]["template"] = {"spec": {"containers": []}}
    del doc["spec"]["tfReplicaSpecs"]["PS"]["template"]["spec"]["containers"][0]["image"]
    found = problems(doc)
    assert "spec.tfReplicaSpecs[Worker].template.spec.containers: must have at least one " \
           "container" in found
    assert "spec.tfReplicaSpecs[PS].template.spec.containers[0].image: is required" in found


@pytest.mark.parametrize("kind", [k for k in sorted(KINDS) if k != "MPIJob"])
def test_default_container_must_exist(kind: str) -> None:
    doc = manifest(kind, TYPICAL[kind])
    rtype = next(iter(TYPICAL[kind]))
    doc["spec"][KINDS[kind].replica_specs_field][rtype]["template"]["spec"]["containers"][0][
        "name"] = "main"
    assert any(f"must have a container named '{KINDS[kind].default_container}'" in p
               for p in problems(doc))


def test_mpi_container_names_are_free() -> None:
    doc = manifest("MPIJob", {"Launcher": 1, "Worker": 1})
    doc["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["name"] = \
        "mpi-launcher"
    assert problems(doc) == []


@pytest.mark.parametrize(("layout", "ok"), [
    ({"Chief": 2, "Worker": 1}, True), ({"Master": 2, "Worker": 1}, True),
    ({"Chief": 1, "Master": 1}, False),
], ids=["two-chiefs", "two-masters", "chief-and-master"])
def test_tf_one_chief_or_master_role(layout: dict[str, int], ok: bool) -> None:
    # upstream counts roles, not replicas (pkg/webhooks/tensorflow/tfjob_webhook.go:97-125)
    found = problems(manifest("TFJob", layout))
    assert found == ([] if ok else ["spec.tfReplicaSpecs: must not have more than 1 Chief or "
                                    "Master role"])


def test_tf_one_chief_passes() -> None:
    assert problems(manifest("TFJob", {"Chief": 1, "Worker": 4, "PS": 2, "Evaluator": 1})) == []


def test_pytorch_only_master_and_worker() -> None:
    found = problems(manifest("PyTorchJob", {"Master": 1, "PS": 1}))
    assert "spec.pytorchReplicaSpecs[PS]: unknown replica type; PyTorchJob has Master, " \
           "Worker" in found


def test_pytorch_master_must_be_one() -> None:
    assert "spec.pytorchReplicaSpecs[Master].replicas: must be 1, got 2" in problems(
        manifest("PyTorchJob", {"Master": 2, "Worker": 1}))
    assert problems(manifest("PyTorchJob", {"Worker": 4})) == []


@pytest.mark.parametrize(("layout", "message"), [
    ({"Worker": 2}, "spec.xgbReplicaSpecs[Master]: is required"),
    ({"Master": 2, "Worker": 2}, "spec.xgbReplicaSpecs[Master].replicas: must be 1, got 2"),
], ids=["missing", "two"])
def test_xgboost_master_required_and_single(layout: dict[str, int], message: str) -> None:
    assert message in problems(manifest("XGBoostJob", layout))


def test_jax_worker_only() -> None:
    assert "spec.jaxReplicaSpecs[Master]: unknown replica type; JAXJob has Worker" in problems(
        manifest("JAXJob", {"Master": 1, "Worker": 1}))
    assert problems(manifest("JAXJob", {"Worker": 2})) == []


@pytest.mark.parametrize(("layout", "message"), [
    ({"Worker": 2}, "spec.mpiReplicaSpecs[Launcher]: is required"),
    ({"Launcher": 2, "Worker": 1}, "spec.mpiReplicaSpecs[Launcher].replicas: must be 1, got 2"),
], ids=["missing", "two"])
def test_mpi_one_launcher(layout: dict[str, int], message: str) -> None:
    assert message in problems(manifest("MPIJob", layout))


def test_paddle_masters_and_a_single_mxnet_scheduler() -> None:
    # several Masters: Paddle's parameter-server mode (pkg/webhooks/paddlepaddle/ has no rule)
    assert problems(manifest("PaddleJob", {"Master": 2, "Worker": 1})) == []
    assert "spec.mxReplicaSpecs[Scheduler].replicas: must be at most 1, got 2" in problems(
        manifest("MXJob", {"Scheduler": 2, "Worker": 1}))


@pytest.mark.parametrize(("field", "value", "message"), [
    ("backoffLimit", -1, "spec.runPolicy.backoffLimit: must be 0 or more, got -1"),
    ("activeDeadlineSeconds", -5, "spec.runPolicy.activeDeadlineSeconds: must be 0 or more, "
                                  "got -5"),
    ("ttlSecondsAfterFinished", -1, "spec.runPolicy.ttlSecondsAfterFinished: must be 0 or "
                                    "more, got -1"),
    ("cleanPodPolicy", "Sometimes", "spec.runPolicy.cleanPodPolicy: must be one of 'All', "
                                    "'Running', 'None', got 'Sometimes'"),
    ("suspend", "yes", "spec.runPolicy.suspend: must be a boolean, got a string \"yes\""),
    ("restartScope", "Pod", "spec.runPolicy.restartScope: must be one of 'Replica', 'Job', "
                            "got 'Pod'"),
])
def test_run_policy_rules(field: str, value: Any, message: str) -> None:
    assert message in problems(manifest("TFJob", {"Worker": 1}, spec={"runPolicy": {field: value}}))


def test_run_policy_good_values_pass() -> None:
    rp = {"backoffLimit": 0, "activeDeadlineSeconds": 10, "ttlSecondsAfterFinished": 0,
          "cleanPodPolicy": "Running", "suspend": True, "restartScope": "Job",
          "managedBy": "kueue.x-k8s.io/multikueue",
          "schedulingPolicy": {"minAvailable": 1, "queue": "q", "minResources": {"cpu": "2"},
                               "priorityClass": "high", "scheduleTimeoutSeconds": 30}}
    assert problems(manifest("TFJob", {"Worker": 1}, spec={"runPolicy": rp})) == []


def test_replica_rules() -> None:
    found = problems(manifest("TFJob", {"Worker": -1}, replica_extra={
        "Worker": {"restartPolicy": "Sometimes", "restartLimit": -2}}))
    assert "spec.tfReplicaSpecs[Worker].replicas: must be 0 or more, got -1" in found
    assert "spec.tfReplicaSpecs[Worker].restartLimit: must be 0 or more, got -2" in found
    assert any(p.startswith("spec.tfReplicaSpecs[Worker].restartPolicy: must be one of")
               for p in found)


@pytest.mark.parametrize(("policy", "ok"), [
    ({"minReplicas": 1, "maxReplicas": 3}, True),
    ({"minReplicas": 3, "maxReplicas": 2}, False),
    ({"minReplicas": 0}, False),
], ids=["ok", "max-below-min", "min-zero"])
def test_elastic_policy(policy: dict[str, int], ok: bool) -> None:
    assert (problems(manifest("PyTorchJob", {"Worker": 2}, spec={"elasticPolicy": policy}))
            == []) is ok


@pytest.mark.parametrize(("nproc", "ok"), [("auto", True), ("cpu", True), ("gpu", True),
                                           ("4", True), ("0", False), ("many", False)])
def test_nproc_per_node(nproc: str, ok: bool) -> None:
    assert (problems(manifest("PyTorchJob", {"Worker": 1}, spec={"nprocPerNode": nproc}))
            == []) is ok


@pytest.mark.parametrize(("kind", "spec", "ok"), [
    ("TFJob", {"successPolicy": "AllWorkers"}, True),
    ("TFJob", {"successPolicy": "Any"}, False),
    ("MXJob", {"jobMode": "MXTune"}, True),
    ("MXJob", {"jobMode": "Train"}, False),
    ("MPIJob", {"slotsPerWorker": 4}, True),
    ("MPIJob", {"slotsPerWorker": 0}, False),
    ("MPIJob", {"mpiImplementation": "MPICH", "transport": "SSH"}, True),
    ("MPIJob", {"mpiImplementation": "MPICH"}, False),
    ("MPIJob", {"mpiImplementation": "LAM", "transport": "SSH"}, False),
    ("MPIJob", {"transport": "RSH"}, False),
], ids=["tf-allworkers", "tf-bad-policy", "mx-tune", "mx-bad-mode", "mpi-slots",
        "mpi-zero-slots", "mpi-ssh-mpich", "mpi-exec-mpich", "mpi-bad-impl",
        "mpi-bad-transport"])
def test_kind_specific_fields(kind: str, spec: dict[str, Any], ok: bool) -> None:
    assert (problems(manifest(kind, TYPICAL[kind], spec=spec)) == []) is ok


def test_every_problem_is_reported_at_once() -> None:
    doc = manifest("PyTorchJob", {"Master": 2, "Worker": None}, name="Bad_Name")
    doc["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = "two"
    found = problems(doc)
    assert 'spec.pytorchReplicaSpecs[Worker].replicas: must be an integer, got a string "two"' \
        in found
    assert any(p.startswith("metadata.name:") for p in found)
    assert "spec.pytorchReplicaSpecs[Master].replicas: must be 1, got 2" in found


@pytest.mark.parametrize(("doc", "message"), [
    ({"apiVersion": "kubeflow.org/v1", "kind": "Deployment"},
     "kind: must be one of TFJob, PyTorchJob, MPIJob, XGBoostJob, PaddleJob, JAXJob, MXJob, "
     "got 'Deployment'"),
    ({"apiVersion": "kubeflow.org/v2", "kind": "TFJob", "metadata": {"name": "a"},
      "spec": {}}, "apiVersion: must be kubeflow.org/v1, got 'kubeflow.org/v2'"),
], ids=["deployment", "v2"])
def test_not_a_job(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidJob) as err:
        parse_job(doc)
    assert message in [str(p) for p in err.value.problems]


@pytest.mark.parametrize(("where", "message"), [
    ("specs", "spec.pytorchReplicaSpecs: must be an object, got null"),
    ("one spec", "spec.pytorchReplicaSpecs[Worker]: must be an object, got null"),
])
def test_a_null_is_told_as_json_says_it(where: str, message: str) -> None:
    doc = manifest("PyTorchJob", {"Master": 1, "Worker": 1})
    if where == "specs":
        doc["spec"]["pytorchReplicaSpecs"] = None
    else:
        doc["spec"]["pytorchReplicaSpecs"]["Worker"] = None
    found = problems(doc)
    assert message in found
    assert not any("None" in p for p in found), found


def test_strict_types_no_string_for_int() -> None:
    doc = manifest("TFJob", {"Worker": 1}, spec={"runPolicy": {"backoffLimit": "3"}})
    assert "spec.runPolicy.backoffLimit: must be an integer, got a string \"3\"" in problems(doc)


@pytest.mark.parametrize(("kind", "layout", "message"), [
    ("JAXJob", {"Worker": 0}, "spec.jaxReplicaSpecs: must ask for at least one replica"),
    ("TFJob", {"PS": 2, "Worker": 0}, "spec.tfReplicaSpecs: needs a Chief, a Master or at least "
                                      "one Worker"),
    ("MXJob", {"Server": 1, "Worker": 2}, "spec.mxReplicaSpecs: needs a Scheduler (MXTrain)"),
], ids=["jax-all-zero", "tf-ps-only", "mx-no-scheduler"])
def test_a_job_must_have_a_replica_that_decides_its_end(kind: str, layout: dict[str, int],
                                                        message: str) -> None:
    assert any(p.startswith(message) for p in problems(manifest(kind, layout)))


@pytest.mark.parametrize(("kind", "layout"), [
    ("TFJob", {"Chief": 1, "PS": 1}), ("MXJob", {"Worker": 1}),
    ("MXJob", {"Tuner": 1, "TunerServer": 1}), ("MPIJob", {"Launcher": 1, "Worker": 0}),
], ids=["tf-chief", "mx-single-worker", "mx-tuner", "mpi-launcher-alone"])
def test_layouts_with_a_deciding_replica_pass(kind: str, layout: dict[str, int]) -> None:
    assert problems(manifest(kind, layout)) == []


def test_a_job_with_thousands_of_problems_gets_a_short_answer() -> None:
    doc = manifest("JAXJob", {"Worker": 1})
    template = doc["spec"]["jaxReplicaSpecs"]["Worker"]
    for i in range(5000):
        doc["spec"]["jaxReplicaSpecs"][f"Bogus{i}"] = template
    with pytest.raises(InvalidJob) as err:
        load_job(doc)
    lines = [str(p) for p in err.value.problems]
    assert len(lines) == 21
    assert lines[0] == "spec.jaxReplicaSpecs[Bogus0]: unknown replica type; JAXJob has Worker"
    assert lines[-1] == "(job): 4980 more problems not listed"


PT_HOOK = "pkg/webhooks/pytorch/pytorchjob_webhook.go"


@pytest.mark.parametrize(("replicas", "spec", "message"), [
    ({"Master": 1, "Worker": 0}, {},
     "spec.pytorchReplicaSpecs[Worker].replicas: must be at least 1"),
    ({"Master": 1}, {"elasticPolicy": {"minReplicas": 1, "maxReplicas": 2}},
     "spec.pytorchReplicaSpecs[Worker]: must be configured if elastic policy is used"),
    ({"Worker": 2}, {"nprocPerNode": "2", "elasticPolicy": {"nProcPerNode": 2}},
     "spec.elasticPolicy.nProcPerNode: must not be used with spec.nprocPerNode"),
], ids=["zero-workers", "elastic-without-workers", "two-nproc"])
def test_pytorch_webhook_decisions(replicas: dict[str, int], spec: dict[str, Any],
                                   message: str) -> None:
    # PT_HOOK:156-158, :96-101, :102-108
    assert message in problems(manifest("PyTorchJob", replicas, spec=spec))


@pytest.mark.parametrize("key", ["rack\n", "a b", "rack²", "-rack", "x" * 64,
                                 "Example.com/rack", "a/b/c", "x" * 254 + "/rack"])
def test_a_topology_key_that_is_no_label_key_is_refused(key: str) -> None:
    assert problems(manifest("TFJob", {"Worker": 1}, spec={"runPolicy": {"schedulingPolicy": {
        "topologyKey": key}}})) == [
        "spec.runPolicy.schedulingPolicy.topologyKey: must be a node label's key (a qualified "
        f"name: [prefix/]name, the name at most 63 characters), got {key!r}"]


@pytest.mark.parametrize("key", ["rack", "topology.kubernetes.io/zone", "kubernetes.io/hostname",
                                 "example.com/block_1.a", "x" * 253 + "/rack"])
def test_a_label_key_is_taken_as_a_topology_key(key: str) -> None:
    assert problems(manifest("TFJob", {"Worker": 1}, spec={"runPolicy": {"schedulingPolicy": {
        "topologyKey": key}}})) == []


def test_a_name_or_condition_type_with_a_trailing_newline_is_refused() -> None:
    # a regular expression's `$` takes a trailing newline: the whole text must match
    assert any(p.startswith("metadata.name: must be a DNS-1035 label") for p in
               problems(manifest("TFJob", {"Worker": 1}, name="job\n")))
    doc = manifest("TFJob", {"Worker": 1}, spec={"runPolicy": {"podFailurePolicy": {"rules": [
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget\n"}]}]}}})
    assert problems(doc) == ["spec.runPolicy.podFailurePolicy.rules[0].onPodConditions[0]"
                             ".type: must be a condition type, got 'DisruptionTarget\\n'"]
