"""The manager as the README deploys it (tests/node/conftest.py: its image imported, then
`kubectl apply --server-side -k config/default`): the webhook through its Service, only its
own ServiceAccount's rights, and two replicas under leader election."""

from __future__ import annotations

import pytest
import yaml

from testbed.node import TestCluster
from tests.node.conftest import NAMESPACE, manager_logs, wait_for_webhook
from tests.node.kube import Namespace, python_job, wait_for

pytestmark = pytest.mark.node
LEASE = "1ca428e5.training-operator.kubeflow.org"  # upstream's --leader-election-id default
SA = f"system:serviceaccount:{NAMESPACE}:trainop-manager"


def test_the_webhook_judges_jobs_through_its_service(cluster: TestCluster,
                                                     manager: None) -> None:
    with Namespace(cluster, "webhook") as ns:
        bad = python_job("PyTorchJob", "bad", {"Master": 2, "Worker": 1}, "pass")
        out = cluster.kubectl("-n", ns.name, "apply", "-f", "-", input=yaml.safe_dump(bad),
                              check=False)
        assert out.returncode != 0
        # upstream's webhook name and status (403 Forbidden)
        assert out.stderr.startswith("Error from server (Forbidden)"), out.stderr
        assert ('admission webhook "validator.pytorchjob.training-operator.kubeflow.org" '
                "denied the request") in out.stderr, out.stderr
        assert "spec.pytorchReplicaSpecs[Master].replicas: must be 1, got 2" in out.stderr
        # defaults are the manager's (no mutating webhook, as upstream): the job is stored
        # as applied, and its pods get the kind's default restartPolicy and one replica
        ok = python_job("PyTorchJob", "ok", {"Master": 1}, "print('ok')")
        master = ok["spec"]["pytorchReplicaSpecs"]["Master"]
        del master["replicas"], master["restartPolicy"]
        ns.apply(ok)
        stored = ns.get("pytorchjob", "ok")
        assert stored is not None
        assert "replicas" not in stored["spec"]["pytorchReplicaSpecs"]["Master"]
        ns.succeeds("PyTorchJob", "ok", timeout=120)
        pod = ns.get("pod", "ok-master-0")
        assert pod is not None and pod["spec"]["restartPolicy"] == "OnFailure"


def test_the_manager_works_under_its_own_account_only(cluster: TestCluster,
                                                      manager: None) -> None:
    deployment = cluster.get("deployment", "trainop-manager", namespace=NAMESPACE)
    assert deployment is not None
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "trainop-manager"
    for verb, what, allowed in (("create", "pods", "yes"), ("create", "pods/exec", "yes"),
                                ("get", "nodes", "no"), ("create", "namespaces", "no"),
                                ("get", "deployments", "no"), ("delete", "crd", "no")):
        out = cluster.kubectl("auth", "can-i", verb, what, "-A", "--as", SA, check=False)
        assert out.stdout.strip() == allowed, (verb, what, out.stdout)
    # the examples and faults ran under this manager: nothing it did was refused
    assert "Forbidden" not in manager_logs(cluster)


def test_two_replicas_the_standby_takes_over_when_the_leaders_pod_goes(
        cluster: TestCluster, manager: None) -> None:
    deploy = ("-n", NAMESPACE)
    cluster.kubectl(*deploy, "scale", "deployment/trainop-manager", "--replicas=2")
    try:
        cluster.kubectl(*deploy, "rollout", "status", "deployment/trainop-manager",
                        "--timeout=120s", timeout=150)
        wait_for_webhook(cluster)
        with Namespace(cluster, "failover") as ns:
            ns.apply(python_job("JAXJob", "longer", {"Worker": 2},
                                "import time; time.sleep(20); print('done', flush=True)"))
            ns.wait_running(2, 120)
            leader = holder(cluster)
            cluster.kubectl(*deploy, "delete", "pod", leader, "--wait=false")
            new = wait_for("another leader",
                           lambda: h if (h := holder(cluster)) != leader else None, 90)
            assert new.startswith("trainop-manager-"), new
            ns.succeeds("JAXJob", "longer", timeout=180)
    finally:
        cluster.kubectl(*deploy, "scale", "deployment/trainop-manager", "--replicas=1")


def holder(cluster: TestCluster) -> str:
    """The pod whose manager holds the lease (identity: `<pod>_<random>`)."""
    lease = cluster.get("lease", LEASE, namespace=NAMESPACE)
    identity = (lease or {}).get("spec", {}).get("holderIdentity") or ""
    return str(identity).split("_")[0]
