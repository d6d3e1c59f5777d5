"""Defaulting: the contract's rules, per kind."""

from __future__ import annotations

import pytest

from tests.jobs import TYPICAL, manifest
from trainop.api import KINDS, default_job, load_job, parse_job

ALL_KINDS = sorted(KINDS)


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_replicas_default_to_one_and_restart_policy_to_the_kinds(kind: str) -> None:
    layout = {rt: None for rt in TYPICAL[kind]}
    job = default_job(parse_job(manifest(kind, layout)))
    for rtype, rspec in job.spec.replica_specs.items():
        expected = 0 if (kind == "MPIJob" and rtype == "Worker") else 1
        assert rspec.replicas == expected, rtype
        assert rspec.restart_policy == KINDS[kind].default_restart_policy


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_explicit_values_are_kept(kind: str) -> None:
    layout = {rt: 1 for rt in TYPICAL[kind]}
    extra = {rt: {"restartPolicy": "ExitCode"} for rt in layout}
    job = default_job(parse_job(manifest(kind, layout, replica_extra=extra,
                                         spec={"runPolicy": {"cleanPodPolicy": "All"}})))
    assert all(r.restart_policy == "ExitCode" for r in job.spec.replica_specs.values())
    assert job.spec.run_policy.clean_pod_policy == "All"


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_clean_pod_policy_defaults_to_none(kind: str) -> None:
    job = default_job(parse_job(manifest(kind, TYPICAL[kind])))
    assert job.spec.run_policy.clean_pod_policy == "None"
    assert job.spec.run_policy.suspend is False


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_replica_type_keys_are_case_normalised(kind: str) -> None:
    layout = {rt.lower(): n for rt, n in TYPICAL[kind].items()}
    job = default_job(parse_job(manifest(kind, layout)))
    assert set(job.spec.replica_specs) == set(TYPICAL[kind])


@pytest.mark.parametrize("kind", [k for k in ALL_KINDS if k != "MPIJob"])
def test_default_port_is_appended_to_the_default_container(kind: str) -> None:
    info = KINDS[kind]
    job = default_job(parse_job(manifest(kind, TYPICAL[kind])))
    for rspec in job.spec.replica_specs.values():
        ports = rspec.template["spec"]["containers"][0]["ports"]  # type: ignore[index]
        assert {"name": info.default_port_name, "containerPort": info.default_port} in ports


def test_default_port_is_not_added_twice_nor_over_a_users_port() -> None:
    extra = {"Worker": {"template": {"spec": {"containers": [{
        "name": "pytorch", "image": "i",
        "ports": [{"name": "pytorchjob-port", "containerPort": 3000}]}]}}}}
    job = default_job(default_job(parse_job(manifest("PyTorchJob", {"Worker": 2},
                                                     replica_extra=extra))))
    ports = job.spec.replica_specs["Worker"].template["spec"]["containers"][0]["ports"]  # type: ignore[index]
    assert ports == [{"name": "pytorchjob-port", "containerPort": 3000}]


def test_mpi_gets_no_port_and_slots_default_to_one() -> None:
    job = default_job(parse_job(manifest("MPIJob", {"Launcher": 1, "Worker": 2})))
    assert "ports" not in job.spec.replica_specs["Worker"].template["spec"]["containers"][0]  # type: ignore[index]
    assert job.spec.slots_per_worker == 1  # type: ignore[attr-defined]
    assert job.spec.mpi_implementation == "OpenMPI"  # type: ignore[attr-defined]


def test_mpi_deprecated_clean_pod_policy_moves_into_run_policy() -> None:
    job = default_job(parse_job(manifest("MPIJob", {"Launcher": 1, "Worker": 1},
                                         spec={"cleanPodPolicy": "Running"})))
    assert job.spec.run_policy.clean_pod_policy == "Running"


@pytest.mark.parametrize(("given", "expected"), [
    ({}, (4, 4)),
    ({"minReplicas": 2}, (2, 2)),
    ({"maxReplicas": 6}, (6, 6)),
    ({"minReplicas": 1, "maxReplicas": 3}, (1, 3)),
], ids=["none-given", "min-only", "max-only", "both"])
def test_pytorch_elastic_min_max(given: dict[str, int], expected: tuple[int, int]) -> None:
    job = default_job(parse_job(manifest("PyTorchJob", {"Worker": 4},
                                         spec={"elasticPolicy": given})))
    policy = job.spec.elastic_policy  # type: ignore[attr-defined]
    assert (policy.min_replicas, policy.max_replicas) == expected


def test_pytorch_nproc_per_node_defaults_to_auto() -> None:
    job = default_job(parse_job(manifest("PyTorchJob", {"Worker": 1})))
    assert job.spec.nproc_per_node == "auto"  # type: ignore[attr-defined]


def test_mxjob_mode_defaults_to_train() -> None:
    job = default_job(parse_job(manifest("MXJob", {"Scheduler": 1, "Worker": 1})))
    assert job.spec.job_mode == "MXTrain"  # type: ignore[attr-defined]


def test_defaulting_does_not_touch_its_input_and_is_idempotent() -> None:
    parsed = parse_job(manifest("TFJob", {"worker": None}))
    before = parsed.to_dict()
    once = default_job(parsed)
    assert parsed.to_dict() == before
    assert default_job(once).to_dict() == once.to_dict()


def test_load_job_defaults() -> None:
    job = load_job(manifest("JAXJob", {"worker": None}))
    assert job.spec.replica_specs["Worker"].replicas == 1
