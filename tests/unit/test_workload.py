"""A job's Kueue Workload and what its admission adds to the pods (trainop/engine/workload.py),
against the rules of Kueue v0.19.2's job framework. tests/kueue/test_workload_parity.py holds
the same functions against the Workloads a real Kueue makes."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from tests.jobs import TYPICAL, manifest
from trainop.api import KINDS, Job, parse_job
from trainop.engine import workload as wl
from trainop.engine.workload import PodSetInfo, Priority, WorkloadError


def job(kind: str, replicas: dict[str, int | None] | None = None, **kw: Any) -> Job:
    """A job of `kind` as stored (not defaulted: what the Workload is built from)."""
    return parse_job(manifest(kind, replicas or TYPICAL[kind], **kw))


def test_the_name_is_kueues_kind_name_and_hash() -> None:
    # Kueue's own vectors (pkg/controller/jobframework/workload_names_test.go)
    assert wl.owned_name("Job", "batch", "name", "uid") == "job-name-ef3a1"
    long = ("marketing-campaign-autumn-2024-region-north-america-department-digital-strategy-"
            "sub-department-social-media-engagement-tracker-and-analytics-dashboard-v2-final-"
            "revision-by-engineering-team-lead-senior-architect-validation-checked-approved-"
            "by-legal-and-ops-dept")
    assert wl.owned_name("Job", "batch", long, "uid") == (
        "job-" + long[:long.index("legal") + 1] + "-218b8")  # 253 characters
    # a job made again under its name gets another Workload
    assert wl.name(job("PyTorchJob", uid="a")) != wl.name(job("PyTorchJob", uid="b"))
    assert wl.name(job("PyTorchJob", name="train")).startswith("pytorchjob-train-")


@pytest.mark.parametrize("kind,expected", [
    ("TFJob", [("chief", 1), ("ps", 1), ("worker", 2)]),
    ("PyTorchJob", [("master", 1), ("worker", 2)]),
    ("MPIJob", [("launcher", 1), ("worker", 2)]),
    ("XGBoostJob", [("master", 1), ("worker", 2)]),
    ("PaddleJob", [("worker", 3)]),
    ("JAXJob", [("worker", 3)]),
    ("MXJob", [("scheduler", 1), ("server", 1), ("worker", 2)]),
])
def test_one_pod_set_per_replica_type_in_the_kinds_order(kind: str,
                                                         expected: list[Any]) -> None:
    # written in reverse: the order is the kind's, not the manifest's
    replicas = dict(reversed(list(TYPICAL[kind].items())))
    sets = wl.pod_sets(job(kind, replicas))
    assert [(s["name"], s["count"]) for s in sets] == expected
    for s in sets:
        assert s["topologyRequest"] == {"podIndexLabel": "training.kubeflow.org/replica-index"}
        assert s["template"]["spec"]["containers"][0]["image"] == "example.com/train:1"


def test_tf_order_puts_chief_master_ps_worker_evaluator() -> None:
    sets = wl.pod_sets(job("TFJob", {"Evaluator": 1, "Worker": 1, "PS": 1, "Master": 1}))
    assert [s["name"] for s in sets] == ["master", "ps", "worker", "evaluator"]


def annotated(annotations: dict[str, str]) -> dict[str, Any]:
    extra = {"template": {"metadata": {"annotations": annotations},
                          "spec": {"containers": [{"name": "pytorch", "image": "i"}]}}}
    request: dict[str, Any] = wl.pod_sets(job("PyTorchJob", replica_extra={"Worker": extra}))[
        1]["topologyRequest"]
    return request


def test_topology_request_reads_the_annotations_in_kueues_order() -> None:
    rack = "cloud.provider.com/rack"
    assert annotated({wl.REQUIRED_TOPOLOGY: rack, wl.PREFERRED_TOPOLOGY: "x",
                      wl.PODSET_GROUP: "g"}) == {
        "required": rack, "podSetGroupName": "g", "podIndexLabel": wl.REPLICA_INDEX_LABEL}
    assert annotated({wl.PREFERRED_TOPOLOGY: rack}) == {
        "preferred": rack, "podIndexLabel": wl.REPLICA_INDEX_LABEL}
    # a group name only goes with required or preferred
    assert annotated({wl.UNCONSTRAINED_TOPOLOGY: "t", wl.PODSET_GROUP: "g"}) == {
        "unconstrained": True, "podIndexLabel": wl.REPLICA_INDEX_LABEL}
    assert annotated({wl.SLICE_REQUIRED_TOPOLOGY: rack, wl.SLICE_SIZE: "4"}) == {
        "podSetSliceRequiredTopology": rack, "podSetSliceSize": 4,
        "podIndexLabel": wl.REPLICA_INDEX_LABEL}
    # the slice size alone is no slice layer
    assert annotated({wl.SLICE_SIZE: "4"}) == {"podIndexLabel": wl.REPLICA_INDEX_LABEL}
    layers = [{"topology": rack, "size": 2}]
    assert annotated({wl.SLICE_CONSTRAINTS: json.dumps(layers)}) == {
        "podsetSliceRequiredTopologyConstraints": layers,
        "podIndexLabel": wl.REPLICA_INDEX_LABEL}


@pytest.mark.parametrize("annotations,said", [
    ({wl.UNCONSTRAINED_TOPOLOGY: "yes"}, "is not a boolean"),
    ({wl.SLICE_REQUIRED_TOPOLOGY: "r", wl.SLICE_SIZE: "four"}, "is not an int32"),
    # Kueue's strconv refuses what Python's int() takes
    ({wl.SLICE_REQUIRED_TOPOLOGY: "r", wl.SLICE_SIZE: " 4"}, "is not an int32"),
    ({wl.SLICE_REQUIRED_TOPOLOGY: "r", wl.SLICE_SIZE: "٤"}, "is not an int32"),
    ({wl.SLICE_REQUIRED_TOPOLOGY: "r", wl.SLICE_SIZE: "2147483648"}, "is not an int32"),
    ({wl.SLICE_CONSTRAINTS: "[{"}, "not JSON"),
    ({wl.SLICE_CONSTRAINTS: "[]"}, "1 to 3 layers"),
    ({wl.SLICE_CONSTRAINTS: "[1, 2]"}, "1 to 3 layers"),
    ({wl.SLICE_CONSTRAINTS: "[" * 100_000 + "]" * 100_000}, "not JSON"),
])
def test_an_annotation_kueue_cannot_parse_is_refused(annotations: dict[str, str],
                                                     said: str) -> None:
    with pytest.raises(WorkloadError, match=said):
        annotated(annotations)


def with_priority(run_policy: dict[str, Any] | None = None,
                  master: str | None = None, worker: str | None = None) -> str:
    extra = {rtype: {"template": {"spec": {"priorityClassName": pc, "containers": [
        {"name": "pytorch", "image": "i"}]}}} for rtype, pc in
        (("Master", master), ("Worker", worker)) if pc}
    spec = {"runPolicy": run_policy} if run_policy else None
    return wl.priority_class_name(job("PyTorchJob", spec=spec, replica_extra=extra))


def test_the_priority_class_is_the_run_policys_then_the_first_replica_types() -> None:
    assert with_priority() == ""
    assert with_priority(worker="low") == "low"
    assert with_priority(master="high", worker="low") == "high"
    assert with_priority({"schedulingPolicy": {"priorityClass": "top"}},
                         master="high") == "top"


def test_the_workload_is_owned_by_the_job_and_held_by_kueues_finalizer() -> None:
    doc = manifest("PyTorchJob", TYPICAL["PyTorchJob"], namespace="team", uid="u-1")
    doc["metadata"]["labels"] = {wl.QUEUE_LABEL: "q", wl.MAX_EXEC_TIME_LABEL: "600"}
    doc["metadata"]["annotations"] = {"provreq.kueue.x-k8s.io/ValidUntilSeconds": "60",
                                      wl.ADMISSION_GATED_BY: "example.com/gate",
                                      "other": "not copied"}
    made = wl.desired(parse_job(doc), Priority("PriorityClass", "high", 1000))
    meta, spec = made["metadata"], made["spec"]
    assert (made["apiVersion"], made["kind"]) == ("kueue.x-k8s.io/v1beta2", "Workload")
    assert meta["namespace"] == "team" and meta["name"].startswith("pytorchjob-job-")
    assert meta["labels"] == {"kueue.x-k8s.io/job-uid": "u-1"}
    assert meta["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]
    assert meta["ownerReferences"] == [{
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "job", "uid": "u-1",
        "controller": True, "blockOwnerDeletion": True}]
    assert meta["annotations"] == {"provreq.kueue.x-k8s.io/ValidUntilSeconds": "60",
                                   wl.ADMISSION_GATED_BY: "example.com/gate"}
    assert spec["queueName"] == "q"
    assert spec["maximumExecutionTimeSeconds"] == 600
    assert spec["priorityClassRef"] == {"group": "scheduling.k8s.io",
                                        "kind": "PriorityClass", "name": "high"}
    assert spec["priority"] == 1000
    assert [s["name"] for s in spec["podSets"]] == ["master", "worker"]


def test_priority_fields() -> None:
    assert Priority().fields() == {"priority": 0}
    assert Priority("WorkloadPriorityClass", "batch", 5).fields() == {
        "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass",
                             "name": "batch"}, "priority": 5}


def labelled(labels: dict[str, str], policy: dict[str, Any] | None = None) -> Job:
    doc = manifest("PyTorchJob", TYPICAL["PyTorchJob"],
                   spec={"runPolicy": {"schedulingPolicy": policy}} if policy else {})
    doc["metadata"]["labels"] = labels
    return parse_job(doc)


CLASSES = wl.PriorityClasses(workload={"batch": 5},
                             pod={"high": 1000, "low": 10, "base": 1, "also": 1},
                             global_default={"low": 10, "base": 1, "also": 1})


def test_the_priority_is_found_among_the_classes_the_caches_show() -> None:
    # ExtractPriority: the WorkloadPriorityClass label first, then the PriorityClass
    wpc = {wl.PRIORITY_CLASS_LABEL: "batch"}
    assert wl.priority(labelled(wpc, {"priorityClass": "high"}), CLASSES) == Priority(
        "WorkloadPriorityClass", "batch", 5)
    assert wl.priority(labelled({}, {"priorityClass": "high"}), CLASSES) == Priority(
        "PriorityClass", "high", 1000)
    # none named: the lowest global default, by name where two are as low
    assert wl.priority(labelled({}), CLASSES) == Priority("PriorityClass", "also", 1)
    assert wl.priority(labelled({}), wl.PriorityClasses()) == Priority()


@pytest.mark.parametrize(("labels", "policy", "told"), [
    ({wl.PRIORITY_CLASS_LABEL: "gone"}, None,
     'priority class: workloadpriorityclasses.kueue.x-k8s.io "gone" not found'),
    ({}, {"priorityClass": "gone"},
     'priority class: priorityclasses.scheduling.k8s.io "gone" not found'),
    ({}, {"priorityClass": "../../api/v1/secrets"},
     "priority class '../../api/v1/secrets' is not a valid name"),
])
def test_a_priority_class_not_there_is_said(labels: dict[str, str], policy: dict[str, Any] |
                                            None, told: str) -> None:
    with pytest.raises(WorkloadError) as err:
        wl.priority(labelled(labels, policy), CLASSES)
    assert str(err.value) == told


def test_a_workload_of_any_shape_is_read_without_failing_the_reader() -> None:
    odd = wl.read({"metadata": {"name": "w", "namespace": "t", "finalizers": "kueue",
                                "ownerReferences": ["x", {"uid": 3, "controller": "yes"}],
                                "generation": "2"},
                   "spec": {"podSets": {"a": 1}, "maximumExecutionTimeSeconds": True},
                   "status": {"conditions": [None, {"type": "Admitted", "status": "True"}],
                              "admission": [], "reclaimablePods": [{"count": "1"}, 7]}})
    assert (odd.key, odd.finalizers, odd.generation, odd.pod_sets) == ("t/w", (), 0, ())
    assert odd.controller is None and odd.owners[0].uid == ""
    assert odd.max_execution_seconds is None and odd.status.admission is None
    assert odd.status.admitted and not odd.status.has_quota and odd.status.reclaimable_pods == ()
    assert wl.read({}) == wl.read({"metadata": None, "spec": 1, "status": "x"})


@pytest.mark.parametrize("value", ["0", "-3", "ten", "2147483648", "1_0", "٣", "9" * 5000])
def test_a_bad_maximum_execution_time_is_refused(value: str) -> None:
    doc = manifest("PyTorchJob", TYPICAL["PyTorchJob"])
    doc["metadata"]["labels"] = {wl.MAX_EXEC_TIME_LABEL: value}
    with pytest.raises(WorkloadError, match="max-exec-time-seconds"):
        wl.desired(parse_job(doc), Priority())


def made_for(kind: str = "PyTorchJob", **kw: Any) -> tuple[Any, dict[str, Any]]:
    j = job(kind, **kw)
    return j, wl.desired(j, Priority())


def test_a_workload_matches_its_job_until_counts_or_containers_change() -> None:
    j, made = made_for()
    assert wl.matches(j, wl.read(made))
    # Kubernetes' semantic equality: quantities by amount, empty as missing
    container = made["spec"]["podSets"][1]["template"]["spec"]["containers"][0]
    for form in ("1", "1000m"):
        other = copy.deepcopy(made)
        other["spec"]["podSets"][1]["template"]["spec"]["containers"][0]["resources"] = {
            "requests": {"cpu": form}}
        k = job("PyTorchJob", replica_extra={"Worker": {"template": {"spec": {
            "containers": [{**container, "resources": {"requests": {"cpu": "1"}}}]}}}})
        assert wl.matches(k, wl.read(other))
    other = copy.deepcopy(made)
    other["spec"]["podSets"][1]["template"]["spec"]["containers"][0]["env"] = []
    assert wl.matches(j, wl.read(other))
    # not the job's: another count, image, owner, UID or maximum execution time
    assert not wl.matches(job("PyTorchJob", {"Master": 1, "Worker": 3}), wl.read(made))
    other = copy.deepcopy(made)
    other["spec"]["podSets"][1]["template"]["spec"]["containers"][0]["image"] = "x"
    assert not wl.matches(j, wl.read(other))
    assert not wl.matches(job("PyTorchJob", name="another"), wl.read(made))
    assert not wl.matches(job("PyTorchJob", uid="uid-2"), wl.read(made))
    other = copy.deepcopy(made)
    other["spec"]["maximumExecutionTimeSeconds"] = 60
    assert not wl.matches(j, wl.read(other))


def test_tolerations_count_only_until_admission() -> None:
    j, made = made_for()
    other = copy.deepcopy(made)
    other["spec"]["podSets"][0]["template"]["spec"]["tolerations"] = [{"key": "k"}]
    assert not wl.matches(j, wl.read(other))
    other["status"] = {"conditions": [{"type": "Admitted", "status": "True"}]}
    assert wl.matches(j, wl.read(other))


FLAVORS: dict[str, dict[str, Any]] = {"spot": {"nodeLabels": {"pool": "spot"}, "tolerations": [
    {"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]},
           "gpu": {"nodeLabels": {"gpu": "a100"}}}


def admitted_workload(**assignment: Any) -> dict[str, Any]:
    _, made = made_for()
    made["metadata"]["name"] = "wl"
    made["spec"]["queueName"] = "team-q"
    made["status"] = {"admission": {"clusterQueue": "cq", "podSetAssignments": [
        {"name": "master", "flavors": {"cpu": "spot"}, **assignment},
        {"name": "worker", "flavors": {"cpu": "spot", "memory": "spot",
                                        "nvidia.com/gpu": "gpu"}}]}}
    return made


def test_admission_gives_each_pod_set_its_flavors_and_kueues_labels() -> None:
    infos = wl.admitted(wl.read(admitted_workload()), FLAVORS)
    master, worker = infos["master"], infos["worker"]
    assert master.node_selector == {"pool": "spot"}
    assert worker.node_selector == {"pool": "spot", "gpu": "a100"}
    assert worker.tolerations == FLAVORS["spot"]["tolerations"]  # each flavor once
    assert master.labels == {"kueue.x-k8s.io/podset": "master",
                             "kueue.x-k8s.io/local-queue-name": "team-q",
                             "kueue.x-k8s.io/cluster-queue-name": "cq"}
    assert master.annotations == {"kueue.x-k8s.io/workload": "wl"}
    assert master.scheduling_gates == []


def test_topology_assignment_gates_the_pods() -> None:
    infos = wl.admitted(wl.read(admitted_workload(topologyAssignment={"levels": ["rack"]})),
                        FLAVORS)
    assert infos["master"].scheduling_gates == [{"name": "kueue.x-k8s.io/topology"}]
    # no topology asked for: Kueue places the pods unconstrained
    assert infos["master"].annotations[wl.UNCONSTRAINED_TOPOLOGY] == "true"
    assert infos["worker"].scheduling_gates == []


@pytest.mark.parametrize("name", ["Team.Queue", "queue²", "équipe", "-q", "q" * 64])
def test_a_cluster_queue_name_no_label_can_hold_is_not_a_label(name: str) -> None:
    made = admitted_workload()
    made["status"]["admission"]["clusterQueue"] = name
    assert wl.CLUSTER_QUEUE_LABEL not in wl.admitted(wl.read(made), FLAVORS)["master"].labels


@pytest.mark.parametrize(("name", "valid"), [
    ("high", True), ("team-a.high", True), ("a" * 63, True), ("..", False),
    ("../../api/v1/secrets", False), ("x?watch=true", False), ("high²", False),
    ("High", False), ("", False), ("a." * 127 + "a", False)])
def test_dns_subdomains(name: str, valid: bool) -> None:
    assert wl.dns_subdomain(name) is valid


def test_a_workload_from_multikueue_marks_its_pods() -> None:
    made = admitted_workload()
    made["metadata"]["labels"][wl.MULTIKUEUE_ORIGIN_LABEL] = "manager"
    assert wl.admitted(wl.read(made), FLAVORS)["master"].labels[wl.MULTIKUEUE_POD_LABEL] == "true"


def test_admission_checks_add_their_updates() -> None:
    made = admitted_workload()
    made["status"]["admissionChecks"] = [{"name": "prov", "podSetUpdates": [
        {"name": "worker", "nodeSelector": {"zone": "z1"}, "annotations": {"a": "b"}}]}]
    infos = wl.admitted(wl.read(made), FLAVORS)
    assert infos["worker"].node_selector == {"pool": "spot", "gpu": "a100", "zone": "z1"}
    assert infos["worker"].annotations["a"] == "b"
    made["status"]["admissionChecks"][0]["podSetUpdates"][0]["nodeSelector"] = {
        "pool": "other"}
    with pytest.raises(WorkloadError, match="admission check prov: conflicting nodeSelector"):
        wl.admitted(wl.read(made), FLAVORS)


def test_a_missing_flavor_is_an_error() -> None:
    with pytest.raises(WorkloadError, match="ResourceFlavor gpu not found"):
        wl.admitted(wl.read(admitted_workload()), {"spot": FLAVORS["spot"]})


def test_not_admitted_adds_nothing() -> None:
    _, made = made_for()
    assert wl.admitted(wl.read(made), FLAVORS) == {}


def test_apply_merges_into_a_pod_and_refuses_a_clash() -> None:
    pod: dict[str, Any] = {"metadata": {"labels": {"app": "x"}}, "spec": {
        "nodeSelector": {"disk": "ssd"}, "tolerations": [{"key": "t"}],
        "containers": []}}
    info = PodSetInfo(labels={"kueue.x-k8s.io/podset": "worker"},
                      node_selector={"pool": "spot"}, tolerations=[{"key": "t"}, {"key": "u"}],
                      scheduling_gates=[{"name": wl.TOPOLOGY_GATE}])
    wl.apply(pod, info, "worker")
    assert pod["metadata"]["labels"] == {"app": "x", "kueue.x-k8s.io/podset": "worker"}
    assert pod["spec"]["nodeSelector"] == {"disk": "ssd", "pool": "spot"}
    assert pod["spec"]["tolerations"] == [{"key": "t"}, {"key": "u"}]
    assert pod["spec"]["schedulingGates"] == [{"name": wl.TOPOLOGY_GATE}]
    assert "annotations" not in pod["metadata"]  # nothing to add: not written
    with pytest.raises(WorkloadError, match="worker: conflicting nodeSelector disk"):
        wl.apply(pod, PodSetInfo(node_selector={"disk": "hdd"}), "worker")


def test_every_kind_has_a_workload() -> None:
    for kind in KINDS:
        j, made = made_for(kind)
        assert wl.matches(j, wl.read(made))
        assert [s["name"] for s in made["spec"]["podSets"]] == [
            r.lower() for r in KINDS[kind].replica_types if r in TYPICAL[kind]]


def test_a_workload_of_another_minimum_is_not_the_elastic_jobs() -> None:
    # a waiting elastic job whose minReplicas changed: its Workload is made again
    elastic = job("PyTorchJob", {"Worker": 4},
                  spec={"elasticPolicy": {"minReplicas": 2, "maxReplicas": 4}})
    made = wl.desired(elastic, Priority())
    assert wl.matches(elastic, wl.read(made))
    made["spec"]["podSets"][0]["minCount"] = 3
    assert not wl.matches(elastic, wl.read(made))
    del made["spec"]["podSets"][0]["minCount"]  # every replica or none
    assert not wl.matches(elastic, wl.read(made))


def test_an_elastic_jobs_workers_may_be_admitted_partly() -> None:
    elastic = job("PyTorchJob", {"Worker": 4},
                  spec={"elasticPolicy": {"minReplicas": 2, "maxReplicas": 4}})
    (workers,) = wl.pod_sets(elastic)
    assert (workers["count"], workers["minCount"]) == (4, 2)
    paddle = job("PaddleJob", {"Worker": 3},
                 spec={"elasticPolicy": {"minReplicas": 1, "maxReplicas": 3}})
    assert wl.pod_sets(paddle)[0]["minCount"] == 1
    # not elastic, or asking for no more than the least: every replica or none
    assert all("minCount" not in ps for ps in wl.pod_sets(job("PyTorchJob")))
    full = job("PyTorchJob", {"Worker": 2},
               spec={"elasticPolicy": {"minReplicas": 2, "maxReplicas": 4}})
    assert "minCount" not in wl.pod_sets(full)[0]
    # the admission's count is what the pods are made for
    made = wl.desired(elastic, Priority())
    made["status"] = {"admission": {"clusterQueue": "cq", "podSetAssignments": [
        {"name": "worker", "flavors": {}, "count": 3}]}}
    assert wl.admitted(wl.read(made), {})["worker"].count == 3


def test_a_workload_of_a_template_with_an_uncountable_quantity_compares_as_written() -> None:
    huge = {"Worker": {"template": {"spec": {"containers": [{
        "name": "pytorch", "image": "i", "resources": {"requests": {"cpu": "1e999999999"}}}]}}}}
    j = job("PyTorchJob", replica_extra=huge)
    made = wl.desired(j, Priority())
    assert wl.matches(j, wl.read(made))
    made["spec"]["podSets"][-1]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "1e999999998"}}
    assert not wl.matches(j, wl.read(made))


def test_the_cache_keeps_a_workload_without_its_templates() -> None:
    huge = {"Worker": {"template": {"spec": {"containers": [{
        "name": "pytorch", "image": "i", "env": [{"name": f"V{i}", "value": "x" * 1000}
                                                  for i in range(1300)]}]}}}}
    j = job("PyTorchJob", replica_extra=huge)
    made = wl.desired(j, Priority())
    made["metadata"]["managedFields"] = [{"manager": "kueue", "fieldsV1": {"f:spec": {}}}]
    kept = wl.read(made)
    assert len(repr(kept)) < 5_000 < 1_300_000 < len(json.dumps(made))
    assert [sorted(ps) for ps in kept.pod_sets] == [
        sorted([k for k in ps if k != "template"] + [wl.DIGESTS])
        for ps in made["spec"]["podSets"]]
    assert made["spec"]["podSets"][0]["template"]  # the Workload given is left as it was
