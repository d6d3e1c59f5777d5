"""Pods get nothing beyond their template, in the job's own namespace."""

from __future__ import annotations

import copy

import pytest

from tests.jobs import TYPICAL, job
from tests.sim import Cluster
from trainop.api import KINDS

TEMPLATE_SPEC = {
    "serviceAccountName": "trainer",
    "securityContext": {"runAsNonRoot": True, "runAsUser": 1000},
    "containers": [{"name": "main-placeholder", "image": "i",
                    "securityContext": {"allowPrivilegeEscalation": False,
                                        "capabilities": {"drop": ["ALL"]}}}],
    "volumes": [{"name": "data", "emptyDir": {}}],
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_pod_is_the_template_plus_env_and_restart_policy(kind: str) -> None:
    info = KINDS[kind]
    spec = copy.deepcopy(TEMPLATE_SPEC)
    spec["containers"][0]["name"] = info.default_container
    extra = {rt: {"template": {"metadata": {"namespace": "kube-system"}, "spec": spec}}
             for rt in TYPICAL[kind]}
    c = Cluster(job(kind, namespace="team-a", replica_extra=extra))
    plan = c.step()
    for obj in plan.to_create:
        assert obj["metadata"]["namespace"] == "team-a", obj["metadata"]["name"]
    for obj in (o for o in plan.create if o["kind"] == "Pod"):
        got = copy.deepcopy(obj["spec"])
        assert got.pop("restartPolicy")
        for container in got["containers"]:
            container.pop("env", None)
            container.pop("ports", None)  # the kind's named port, added by defaulting
            mounts = container.pop("volumeMounts", [])
            assert all(m["name"] in ("mpi-job-config", "mpi-job-kubectl") for m in mounts)
            if kind == "MPIJob" and "launcher" not in obj["metadata"]["name"]:
                # a worker without a command sleeps until the launcher execs into it
                assert (container.pop("command"), container.pop("args")) == (
                    ["sleep"], ["365d"])
        if kind == "PyTorchJob" and "worker" in obj["metadata"]["name"]:
            # it waits for the master's name (test_frameworks.py)
            (init,) = got.pop("initContainers")
            assert init["name"] == "init-pytorch" and "securityContext" not in init
        if kind == "MPIJob":
            got["volumes"] = [v for v in got["volumes"] if v["name"] == "data"]
            if "launcher" in obj["metadata"]["name"]:
                # kubectl for mpirun's agent, under a ServiceAccount that may only exec
                # into this job's workers (test_mpi_v1.py)
                assert got["serviceAccountName"] == "trainer"  # the template's own is kept
                (delivery,) = got.pop("initContainers")
                assert delivery["name"] == "kubectl-delivery"
                assert "securityContext" not in delivery
        assert got == spec
        assert "privileged" not in str(got)
