"""trainop's Workload of a job (trainop/engine/workload.py) beside the one Kueue's own built-in
integration makes for it, and what trainop would add to its pods on admission beside what Kueue
wrote into its templates: for each kind Kueue integrates, on the real Kueue the suite runs.
trainop keeps Workloads itself for the kinds Kueue's configuration lists as external
frameworks; these tests hold its copy of Kueue's rules to Kueue's."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.integration.kube import Kube, wait_for
from tests.kueue.queues import Queues
from tests.kueue.test_kueue import KUEUE_KINDS, mpijob_v2beta1, priority_class, queued
from trainop.api import KINDS, parse_job
from trainop.engine import workload as wl
from trainop.engine.workload import Priority

pytestmark = pytest.mark.kueue

TOLERATION = {"key": "pool", "operator": "Equal", "value": "a", "effect": "NoSchedule"}
FLAVOR = {"nodeLabels": {"pool": "a"}, "tolerations": [TOLERATION]}


def dressed(doc: dict[str, Any], kind: str, high: str) -> dict[str, Any]:
    """`doc` with what Kueue reads besides counts and containers: a priority class on its
    last replica type, a topology request on its first, a maximum execution time, a
    provisioning annotation."""
    doc = copy.deepcopy(doc)
    doc["metadata"]["labels"][wl.MAX_EXEC_TIME_LABEL] = "3600"
    doc["metadata"]["annotations"] = {"provreq.kueue.x-k8s.io/ValidUntilSeconds": "60"}
    specs = doc["spec"][KINDS[kind].replica_specs_field]
    replicas = list(specs.values())
    first, last = replicas[0], replicas[-1]
    last["template"]["spec"]["priorityClassName"] = high
    first["template"].setdefault("metadata", {})["annotations"] = {
        wl.PREFERRED_TOPOLOGY: "kubernetes.io/hostname"}
    return doc


def templates(job: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    """The job's pod templates by pod set name."""
    return {rtype.lower(): rs["template"]
            for rtype, rs in job["spec"][KINDS[kind].replica_specs_field].items()}


def semantic(pod_set: dict[str, Any]) -> dict[str, Any]:
    return {**pod_set, "template": wl._semantic(pod_set["template"])}


@pytest.mark.parametrize("kind", [*KUEUE_KINDS, "MPIJob"])
def test_trainops_workload_is_the_one_kueue_makes(kube: Kube, queues: Queues,
                                                  kind: str) -> None:
    high = f"{kube.ns}-high"
    priority_class(kube, high, 1000)
    queues.create(cpu="1", flavor=FLAVOR)  # too little: it stays queued
    # MPIJob: written at v2beta1, the API Kueue's integration reads it in
    doc = mpijob_v2beta1() if kind == "MPIJob" else queued(kind)
    name = doc["metadata"]["name"]
    kube.apply(dressed(doc, kind, high))
    theirs = queues.wait_workload(kind, name)
    stored = kube.job(kind, name)  # as Kueue's webhook left it: suspended, templates as sent
    job = parse_job(stored)  # as written: Kueue reads the stored templates
    mine = wl.desired(job, Priority("PriorityClass", high, 1000))

    assert theirs["metadata"]["name"] == mine["metadata"]["name"]
    assert theirs["metadata"]["labels"] == mine["metadata"]["labels"]
    assert theirs["metadata"]["finalizers"] == mine["metadata"]["finalizers"]
    assert theirs["metadata"]["annotations"] == mine["metadata"]["annotations"]
    # the same owner, at the version the job was written in (v2beta1 for an MPIJob)
    assert theirs["metadata"]["ownerReferences"] == mine["metadata"]["ownerReferences"]
    spec = theirs["spec"]
    for field in ("queueName", "priorityClassRef", "priority", "maximumExecutionTimeSeconds"):
        assert spec.get(field) == mine["spec"].get(field), field
    assert [semantic(ps) for ps in spec["podSets"]] == [
        semantic(ps) for ps in mine["spec"]["podSets"]]
    assert wl.matches(job, wl.read(theirs))


@pytest.mark.parametrize("kind", ["PyTorchJob", "MPIJob"])
def test_trainop_adds_to_the_pods_what_kueues_admission_writes_into_the_templates(
        kube: Kube, queues: Queues, kind: str) -> None:
    queues.create(cpu="1", flavor=FLAVOR)
    doc = mpijob_v2beta1() if kind == "MPIJob" else queued(kind)
    name = doc["metadata"]["name"]
    kube.apply(doc)
    queues.wait_workload(kind, name)
    stored = kube.job(kind, name)
    queues.create(cpu="8", flavor=FLAVOR)  # now it fits
    theirs = wait_for("the Workload admitted", lambda: (
        lambda w: w if w and wl.read(w).status.admitted else None)(queues.workload(kind, name)))
    infos = wl.admitted(wl.read(theirs), {queues.name: FLAVOR})
    written = wait_for("the templates admitted", lambda: (lambda t: t if all(
        (x.get("spec") or {}).get("nodeSelector") for x in t.values()) else None)(
        templates(kube.job(kind, name), kind)))
    before = templates(stored, kind)
    assert set(infos) == set(before)
    for ps, info in infos.items():
        expected = copy.deepcopy(before[ps])
        wl.apply(expected, info, ps)
        for path in (("metadata", "labels"), ("metadata", "annotations"),
                     ("spec", "nodeSelector"), ("spec", "tolerations"),
                     ("spec", "schedulingGates")):
            assert (written[ps].get(path[0]) or {}).get(path[1]) == \
                (expected.get(path[0]) or {}).get(path[1]), (ps, path)
