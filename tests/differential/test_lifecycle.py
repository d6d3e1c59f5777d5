"""Upstream v1.9.4 and trainop side by side over a job's life: suspend from Pending and with
a deadline, MPI's suspend, TF's success policy, Evaluator and dynamic workers, what a user
deletes or leaves behind, and the webhook's answers to updates."""

from __future__ import annotations

import copy
import time
from typing import Any

import pytest

from tests.differential.peers import Sides, answer_difference
from tests.differential.test_side_by_side import check, job, running, submit
from tests.jobs import manifest

pytestmark = pytest.mark.differential


def suspended(doc: dict[str, Any], value: bool) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    out["spec"].setdefault("runPolicy", {})["suspend"] = value
    return out


@pytest.mark.parametrize("kind", ["PyTorchJob", "MPIJob"])
def test_suspend_while_pending_and_resume(sides: Sides, kind: str) -> None:
    doc = job(kind)
    submit(sides, doc)
    found = sides.compare(kind, "created")
    submit(sides, suspended(doc, True))
    found += sides.compare(kind, "suspended")
    submit(sides, suspended(doc, False))
    found += sides.compare(kind, "resumed")
    sides.set_all("Running")
    found += sides.compare(kind, "running")
    check(sides, found)


def test_a_deadline_does_not_run_while_suspended(sides: Sides) -> None:
    # long enough that the resumed job is compared well inside its new deadline (upstream
    # looks at a resumed job's deadline only when something else wakes it)
    doc = suspended(job("PyTorchJob", spec={"runPolicy": {"activeDeadlineSeconds": 10}}), True)
    submit(sides, doc)
    found = sides.compare("PyTorchJob", "created suspended")
    time.sleep(11)
    found += sides.compare("PyTorchJob", "suspended past the deadline")
    submit(sides, suspended(doc, False))
    found += sides.compare("PyTorchJob", "resumed")
    check(sides, found)


def _tf(replicas: dict[str, int | None], **spec: Any) -> dict[str, Any]:
    doc = manifest("TFJob", replicas, spec=spec or None)
    del doc["metadata"]["uid"], doc["metadata"]["namespace"]
    return doc


def test_tf_all_workers_success_policy(sides: Sides) -> None:
    found = running(sides, _tf({"Worker": 2}, successPolicy="AllWorkers"))
    sides.set_pod("job-worker-0", "Succeeded", exit_code=0)
    found += sides.compare("TFJob", "worker 0 done")
    sides.set_pod("job-worker-1", "Succeeded", exit_code=0)
    found += sides.compare("TFJob", "every worker done")
    check(sides, found)


def test_tf_evaluator_and_dynamic_workers(sides: Sides) -> None:
    submit(sides, _tf({"Chief": 1, "Evaluator": 1, "Worker": 2}, enableDynamicWorker=True))
    found = sides.compare("TFJob", "created")
    sides.set_all("Running")
    found += sides.compare("TFJob", "running")
    sides.set_pod("job-chief-0", "Succeeded", exit_code=0)
    found += sides.compare("TFJob", "chief done")
    check(sides, found)


@pytest.mark.parametrize("resource", ["pod", "service"])
def test_what_a_user_deletes_is_made_again(sides: Sides, resource: str) -> None:
    found = running(sides, job("PyTorchJob"))
    for side in sides.sides:
        side.kube.kubectl("delete", resource, "job-worker-0", "--wait=false")
    found += sides.compare("PyTorchJob", "deleted")
    check(sides, found)


def test_an_orphan_pod_with_the_jobs_labels(sides: Sides) -> None:
    labels = {"training.kubeflow.org/job-name": "job",
              "training.kubeflow.org/operator-name": "pytorchjob-controller",
              "training.kubeflow.org/replica-type": "worker",
              "training.kubeflow.org/replica-index": "0"}
    orphan = {"apiVersion": "v1", "kind": "Pod",
              "metadata": {"name": "job-worker-0", "labels": labels},
              "spec": {"containers": [{"name": "pytorch", "image": "busybox"}]}}
    for side in sides.sides:
        side.submit(orphan)
    submit(sides, job("PyTorchJob"))
    found = sides.compare("PyTorchJob", "created")
    check(sides, found)


def test_the_webhook_answers_updates_as_upstreams(sides: Sides) -> None:
    doc = job("PyTorchJob")
    submit(sides, doc)
    sides.settle("PyTorchJob")
    no_image = copy.deepcopy(doc)
    del no_image["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"][
        "containers"][0]["image"]
    managed = copy.deepcopy(doc)
    managed["spec"].setdefault("runPolicy", {})["managedBy"] = "kueue.x-k8s.io/multikueue"
    deprecated = copy.deepcopy(doc)
    deprecated["spec"]["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": 3,
                                           "nProcPerNode": 2}
    null_spec = copy.deepcopy(doc)
    null_spec["spec"]["pytorchReplicaSpecs"]["Worker"] = None
    found = []
    for name, update in [("no image", no_image), ("managedBy changed", managed),
                         ("deprecated nProcPerNode", deprecated), ("null Worker", null_spec)]:
        up, answers = sides.submit(update)
        for variant, ours in answers.items():
            if (line := answer_difference(name, ours, up)) is not None:
                found += sides.scoped(variant, "update", [line])
    check(sides, found)
