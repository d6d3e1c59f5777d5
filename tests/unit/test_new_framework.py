"""Adding a framework is one module: its kind's facts, its spec and job types, its plugin,
declared by one call. This one, EchoJob (workers that learn their peers from ECHO_PEERS),
runs through the engine and the local runtime without any other file of trainop knowing of
it, and without any table being patched."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import Field

from trainop.api import JOB_MODELS, KINDS, Job, KindInfo, ReplicaSpec, install, load_job
from trainop.api.crd import crd_for
from trainop.api.resolved import resolve
from trainop.api.types import JobSpec
from trainop.engine import Addressing, ClusterAddressing, Counts, Framework, Observed, reconcile
from trainop.frameworks import FRAMEWORKS, declare, withdraw
from trainop.frameworks.common import all_succeeded
from trainop.local.runner import LocalRun, RunOptions

INFO = KindInfo(kind="EchoJob", plural="echojobs", replica_specs_field="echoReplicaSpecs",
                replica_types=("Worker",), default_container="echo",
                default_port_name="echo-port", default_port=7777,
                default_restart_policy="Never", framework="echo", worker0_is_master=True)


class EchoJobSpec(JobSpec):
    replica_specs: dict[str, ReplicaSpec] = Field(default_factory=dict,
                                                  alias="echoReplicaSpecs")


class EchoJob(Job):
    kind: Literal["EchoJob"] = "EchoJob"  # type: ignore[assignment]
    spec: EchoJobSpec
    info = INFO


class Echo(Framework[EchoJobSpec]):
    model = EchoJob
    spec_type = EchoJobSpec

    def env(self, job: Job, rtype: str, index: int, addr: Addressing) -> dict[str, str]:
        peers = [f"{addr.host(job, 'Worker', i)}:{addr.port(job, 'Worker', i)}"
                 for i in range(resolve(job).replicas_of("Worker"))]
        return {"ECHO_RANK": str(index), "ECHO_PEERS": ",".join(peers)}

    def succeeded(self, job: Job, counts: dict[str, Counts]) -> bool:
        return all_succeeded(counts, "Worker")


@pytest.fixture
def echo() -> Iterator[None]:
    declare(Echo())
    yield
    withdraw("EchoJob")
    assert "EchoJob" not in KINDS and "EchoJob" not in JOB_MODELS


def test_one_call_declares_the_kind_everywhere(echo: None) -> None:
    assert KINDS["EchoJob"] is INFO and JOB_MODELS["EchoJob"] is EchoJob
    assert isinstance(FRAMEWORKS["EchoJob"], Echo)
    # its CRD comes from the same declaration
    crd = crd_for(EchoJob)
    assert crd["metadata"]["name"] == "echojobs.kubeflow.org"
    assert "echoReplicaSpecs" in crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"][
        "properties"]["spec"]["properties"]


def test_the_install_lists_it_from_the_same_declaration(echo: None) -> None:
    # its CRD file, its validating webhook and the manager's rights on its jobs
    assert "  - kubeflow.org_echojobs.yaml\n" in install.crd_kustomization()
    hooks = {h["name"]: h for h in install.webhooks()["webhooks"]}
    echo_hook = hooks["validator.echojob.training-operator.kubeflow.org"]
    assert echo_hook["clientConfig"]["service"]["path"] == "/validate-kubeflow-org-v1-echojob"
    assert echo_hook["rules"][0]["resources"] == ["echojobs"]
    granted = {(r, v) for rule in install.job_rules() for r in rule["resources"]
               for v in rule["verbs"]}
    assert {("echojobs", "watch"), ("echojobs/status", "update"),
            ("echojobs/finalizers", "update"), ("echojobs", "patch")} <= granted


def test_a_kind_is_declared_by_one_model_only(echo: None) -> None:
    class Other(EchoJob):
        pass

    with pytest.raises(ValueError, match="EchoJob is declared already"):
        declare(type("Echo2", (Echo,), {"model": Other})())
    assert JOB_MODELS["EchoJob"] is EchoJob


def manifest(workers: int) -> dict[str, Any]:
    script = "import os; print('rank', os.environ['ECHO_RANK'], 'peers', " \
             "os.environ['ECHO_PEERS'])"
    return {"apiVersion": "kubeflow.org/v1", "kind": "EchoJob",
            "metadata": {"name": "e", "namespace": "default", "uid": "u"},
            "spec": {"echoReplicaSpecs": {"worker": {"replicas": workers, "template": {
                "spec": {"containers": [{"name": "echo", "image": "python:3.11",
                                         "command": ["python", "-c", script]}]}}}}}}


def test_the_engine_runs_a_job_of_a_new_kind(echo: None) -> None:
    job = load_job(manifest(2))
    plan = reconcile(job, Observed(), dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
                     FRAMEWORKS["EchoJob"], ClusterAddressing())
    pods = {o["metadata"]["name"]: o for o in plan.create if o["kind"] == "Pod"}
    assert sorted(pods) == ["e-worker-0", "e-worker-1"]
    env = {e["name"]: e["value"] for e in pods["e-worker-1"]["spec"]["containers"][0]["env"]}
    assert env == {"ECHO_RANK": "1", "ECHO_PEERS": "e-worker-0.default.svc:7777,"
                                                   "e-worker-1.default.svc:7777"}
    assert pods["e-worker-0"]["metadata"]["labels"][
        "training.kubeflow.org/operator-name"] == "echojob-controller"
    services = [o for o in plan.create if o["kind"] == "Service"]
    assert [s["spec"]["ports"] for s in services] == [
        [{"name": "echo-port", "port": 7777, "targetPort": 7777}]] * 2


def test_the_local_runtime_runs_it_to_success(echo: None, tmp_path: Path) -> None:
    lines: list[str] = []
    run = LocalRun(load_job(manifest(2)), RunOptions(run_dir=tmp_path),
                   on_line=lambda replica, line: lines.append(f"[{replica}] {line}"))
    result = asyncio.run(run.run())
    assert result.outcome == "Succeeded", lines
    assert any(line.startswith("[e-worker-1] rank 1 peers 127.0.0.1:") for line in lines)
