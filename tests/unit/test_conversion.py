"""MPIJob between kubeflow.org/v1 and mpi-operator's v2beta1: nothing lost either way, each
version's form holds only its own fields, and the version a job was written in is known."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainop.api import load_job, parse_job
from trainop.api.conversion import (
    WRITTEN_IN,
    ConversionError,
    convert,
    fields_annotation,
    strays,
    written_in,
)
from trainop.api.crd import all_crds
from trainop.api.jobs.mpijob import MPIJob as V1MPIJob
from trainop.api.v2beta1 import MPIJob as V2MPIJob
from trainop.api.validation import InvalidJob
from trainop.cluster.serving.webhook import convert_answer

V1, V2 = "kubeflow.org/v1", "kubeflow.org/v2beta1"
TEMPLATE = {"spec": {"containers": [{"name": "mpi", "image": "mpi:1", "command": ["x"]}]}}

names = st.text("abcdefghij-", min_size=1, max_size=8)
times = st.sampled_from(["2026-01-01T00:00:00Z", "2026-12-02T10:11:12Z"])
shared_run_policy = {
    "cleanPodPolicy": st.sampled_from(["All", "Running", "None"]),
    "ttlSecondsAfterFinished": st.integers(0, 100),
    "activeDeadlineSeconds": st.integers(1, 10**10),
    "backoffLimit": st.integers(0, 6),
    "suspend": st.booleans(),
    "managedBy": st.sampled_from(["kubeflow.org/training-operator",
                                  "kueue.x-k8s.io/multikueue"]),
    "schedulingPolicy": st.fixed_dictionaries({}, optional={
        "minAvailable": st.integers(0, 4), "queue": names, "priorityClass": names,
        "scheduleTimeoutSeconds": st.integers(0, 60),
        "minResources": st.dictionaries(st.sampled_from(["cpu", "memory"]),
                                        st.sampled_from(["1", "2Gi", 3]))}),
}
v1_only_run_policy = {
    "restartScope": st.sampled_from(["Replica", "Job"]),
    "startupDeadlineSeconds": st.integers(1, 600),
    "podFailurePolicy": st.just({"rules": [{"action": "Ignore", "onPodConditions": [
        {"type": "DisruptionTarget", "status": "True"}]}]}),
}
shared_spec = {
    "slotsPerWorker": st.integers(1, 8),
    "launcherCreationPolicy": st.sampled_from(["AtStartup", "WaitForWorkersReady"]),
    "mpiImplementation": st.sampled_from(["OpenMPI", "Intel", "MPICH"]),
    "runLauncherAsWorker": st.booleans(),
    "sshAuthMountPath": st.sampled_from(["/root/.ssh", "/home/mpiuser/.ssh"]),
}
v1_only_spec = {
    "mainContainer": names,
    "cleanPodPolicy": st.sampled_from(["All", "Running", "None"]),
    "transport": st.sampled_from(["KubectlExec", "SSH"]),
    "managedBy": st.sampled_from(["kubeflow.org/training-operator",
                                  "kueue.x-k8s.io/multikueue"]),
}
status = st.fixed_dictionaries({}, optional={
    "conditions": st.lists(st.fixed_dictionaries(
        {"type": st.sampled_from(["Created", "Running", "Failed"]),
         "status": st.sampled_from(["True", "False"])},
        optional={"reason": names, "message": names, "lastUpdateTime": times}),
        max_size=3, unique_by=lambda c: c["type"]),
    "replicaStatuses": st.dictionaries(st.sampled_from(["Launcher", "Worker"]),
                                       st.fixed_dictionaries({}, optional={
                                           "active": st.integers(0, 3),
                                           "restarts": st.integers(0, 3)})),
    "startTime": times, "completionTime": times,
    "lastFailure": st.fixed_dictionaries({"replicaType": st.just("Worker"),
                                          "index": st.integers(0, 3), "pod": names}),
})
metadata = st.fixed_dictionaries({"name": names}, optional={
    "namespace": names, "uid": names, "resourceVersion": st.just("42"),
    "labels": st.dictionaries(names, names, max_size=2),
    # never empty: the API server leaves an empty map out of an object's metadata
    "annotations": st.dictionaries(st.sampled_from(["a", "example.com/b"]), names,
                                   min_size=1)})


@st.composite
def replica_specs(draw: st.DrawFn, v1: bool) -> dict[str, Any]:
    out = {}
    for rtype in draw(st.sets(st.sampled_from(["Launcher", "Worker"]), min_size=1)):
        spec = draw(st.fixed_dictionaries({}, optional={
            "replicas": st.integers(0, 4),
            "restartPolicy": st.sampled_from(["Always", "OnFailure", "Never", "ExitCode"]),
            "template": st.just(TEMPLATE),
            **({"restartLimit": st.integers(0, 5)} if v1 else {})}))
        out[rtype] = spec
    return out


@st.composite
def jobs(draw: st.DrawFn, v1: bool) -> dict[str, Any]:
    run_policy = draw(st.fixed_dictionaries(
        {}, optional={**shared_run_policy, **(v1_only_run_policy if v1 else {})}))
    spec = draw(st.fixed_dictionaries(
        {"mpiReplicaSpecs": replica_specs(v1)},
        optional={**shared_spec, **(v1_only_spec if v1 else {}),
                  "runPolicy": st.just(run_policy)}))
    job = {"apiVersion": V1 if v1 else V2, "kind": "MPIJob",
           "metadata": draw(metadata), "spec": spec}
    if draw(st.booleans()):
        job["status"] = draw(status)
    return job


def body(job: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in job.items() if k in ("spec", "status")}


@settings(max_examples=300, deadline=None)
@given(jobs(v1=True))
def test_v1_to_v2beta1_and_back_is_the_identity(job: dict[str, Any]) -> None:
    there = convert(job, V2)
    assert strays(body(there), V2MPIJob) == []
    assert written_in(there["metadata"].get("annotations"), there["apiVersion"]) == "v1"
    assert convert(there, V1) == job


@settings(max_examples=300, deadline=None)
@given(jobs(v1=False))
def test_v2beta1_to_v1_and_back_is_the_identity(job: dict[str, Any]) -> None:
    there = convert(job, V1)
    assert strays(body(there), V1MPIJob) == []
    assert written_in(there["metadata"].get("annotations"), there["apiVersion"]) == \
        "v2beta1"
    assert there["spec"]["transport"] == "SSH"
    assert convert(there, V2) == job


@settings(max_examples=200, deadline=None)
@given(jobs(v1=False), st.fixed_dictionaries({}, optional=v1_only_spec))
def test_v1_fields_added_to_a_v2beta1_job_survive_its_v2beta1_form(
        job: dict[str, Any], added: dict[str, Any]) -> None:
    # written in v2beta1, then changed through v1 (a v1 client, or the manager's status)
    at_v1 = convert(job, V1)
    at_v1["spec"].update(added)
    again = convert(convert(at_v1, V2), V1)
    assert again == at_v1
    assert written_in(again["metadata"].get("annotations"), again["apiVersion"]) == \
        "v2beta1"


def test_the_forms_of_one_job() -> None:
    v1 = {"apiVersion": V1, "kind": "MPIJob", "metadata": {"name": "pi"},
          "spec": {"mainContainer": "mpi", "runPolicy": {"restartScope": "Job",
                                                          "backoffLimit": 2},
                   "mpiReplicaSpecs": {"Worker": {"replicas": 2, "restartLimit": 3}}}}
    assert convert(v1, V2) == {
        "apiVersion": V2, "kind": "MPIJob",
        "metadata": {"name": "pi", "annotations": {
            WRITTEN_IN: "v1",
            fields_annotation("v1"): json.dumps({"spec": {
                "mainContainer": "mpi", "mpiReplicaSpecs": {"Worker": {"restartLimit": 3}},
                "runPolicy": {"restartScope": "Job"}}}, separators=(",", ":"))}},
        "spec": {"runPolicy": {"backoffLimit": 2},
                 "mpiReplicaSpecs": {"Worker": {"replicas": 2}}}}
    v2 = {"apiVersion": V2, "kind": "MPIJob", "metadata": {"name": "pi"},
          "spec": {"sshAuthMountPath": "/home/u/.ssh", "mpiReplicaSpecs": {}}}
    assert convert(v2, V1) == {
        "apiVersion": V1, "kind": "MPIJob",
        "metadata": {"name": "pi", "annotations": {WRITTEN_IN: "v2beta1"}},
        "spec": {"sshAuthMountPath": "/home/u/.ssh", "mpiReplicaSpecs": {},
                 "transport": "SSH"}}
    assert v1["spec"]["mainContainer"] == "mpi", "the object given is left as it was"


@pytest.mark.parametrize(("job", "to", "message"), [
    ({"apiVersion": V2, "kind": "MPIJob", "metadata": {"annotations": {
        fields_annotation("v1"): "{not json"}}}, V1,
     "annotation trainop.kubeflow.org/v1-fields is not JSON"),
    ({"apiVersion": V2, "kind": "MPIJob", "metadata": {"annotations": {
        fields_annotation("v1"): "[1]"}}}, V1,
     "annotation trainop.kubeflow.org/v1-fields is not a JSON object"),
    ({"apiVersion": V2, "kind": "MPIJob", "metadata": {"annotations": {
        WRITTEN_IN: "v3"}}}, V1,
     "annotation trainop.kubeflow.org/written-in: 'v3' is not a version of MPIJob"),
    ({"apiVersion": V1, "kind": "TFJob"}, "kubeflow.org/v2beta1",
     "the desired apiVersion 'kubeflow.org/v2beta1' is not one of kubeflow.org/v1"),
    ({"apiVersion": "v1", "kind": "Pod"}, V1, "kind 'Pod' is not served by trainop"),
])
def test_what_cannot_be_converted_is_refused(job: dict[str, Any], to: str,
                                             message: str) -> None:
    with pytest.raises(ConversionError, match="^" + message.replace("[", r"\[")):
        convert(job, to)


STORED_V1 = {"apiVersion": V1, "kind": "MPIJob", "metadata": {"name": "pi"},
             "spec": {"mpiReplicaSpecs": {"Launcher": {"replicas": 1}}}}


def annotated(job: dict[str, Any], annotations: dict[str, str]) -> dict[str, Any]:
    return {**job, "metadata": {**job["metadata"], "annotations": annotations}}


@pytest.mark.parametrize(("stash", "message"), [
    ('{"status": {"conditions": [{"type": "Succeeded", "status": "True"}]}}',
     "v1-fields may hold spec fields only, not status"),
    ('{"spec": {}, "metadata": {"labels": {"a": "b"}}}',
     "v1-fields may hold spec fields only, not metadata"),
    ('{"spec": {"runPolicy": {"activeDeadlineSeconds": 5}}}',
     "v1-fields: spec.runPolicy.activeDeadlineSeconds has a place at the job's own version"),
    ('{"spec": {"mpiReplicaSpecs": {"Launcher": {"replicas": 1}}}}',
     "v1-fields: spec.mpiReplicaSpecs.Launcher.replicas has a place at the job's own"),
    ('{"spec": {"mainContainer": 7}}',
     "v1-fields: spec.mainContainer: Input should be a valid string"),
    ('{"spec": {"runPolicy": {"restartScope": "Everything"}}}',
     "v1-fields: spec.runPolicy.restartScope: Input should be 'Replica' or 'Job'"),
    ('{"spec": {"mpiReplicaSpecs": {"Worker": {"restartLimit": "2"}}}}',
     "v1-fields: spec.mpiReplicaSpecs.Worker.restartLimit: Input should be a valid integer"),
])
def test_a_write_at_v2beta1_with_a_stash_v1_cannot_take_is_refused(stash: str,
                                                                     message: str) -> None:
    job = {"apiVersion": V2, "kind": "MPIJob", "metadata": {
        "name": "pi", "annotations": {fields_annotation("v1"): stash}},
        "spec": {"mpiReplicaSpecs": {"Launcher": {"replicas": 1, "template": TEMPLATE}}}}
    with pytest.raises(ConversionError, match="^annotation trainop.kubeflow.org/" +
                       message.replace(".", r"\.").replace("(", r"\(").replace(")", r"\)")):
        convert(job, V1)


def test_a_stash_of_the_jobs_own_version_is_dropped_as_it_is_converted() -> None:
    job = {"apiVersion": V2, "kind": "MPIJob", "metadata": {
        "name": "pi", "annotations": {fields_annotation("v2beta1"): "not-json"}},
        "spec": {"mpiReplicaSpecs": {}}}
    assert convert(job, V1)["metadata"] == {"name": "pi", "annotations": {
        WRITTEN_IN: "v2beta1"}}
    v1 = annotated(STORED_V1, {fields_annotation("v1"): "not-json"})
    assert convert(v1, V2)["metadata"]["annotations"] == {WRITTEN_IN: "v1"}


@pytest.mark.parametrize(("annotations", "said"), [
    ({fields_annotation("v2beta1"): "not-json"},
     "annotation trainop.kubeflow.org/v2beta1-fields is not JSON"),
    # (every field of v2beta1 has a place at v1: a stash of its own holds none)
    ({fields_annotation("v2beta1"): '{"spec": {"slotsPerWorker": "x"}}'},
     "v2beta1-fields: spec.slotsPerWorker has a place at the job's own version"),
    ({fields_annotation("v2beta1"): '{"status": {"startTime": "2026-01-01T00:00:00Z"}}'},
     "v2beta1-fields may hold spec fields only, not status"),
    ({WRITTEN_IN: "v3"}, "written-in: 'v3' is not a version of MPIJob"),
    ({WRITTEN_IN: "v2beta1", fields_annotation("v2beta1"): "[]"}, "is not a JSON object"),
    # past Python's recursion and orjson's depth: refused, not a RecursionError that would
    # fail the whole review
    ({fields_annotation("v2beta1"): '{"spec": ' + '{"a": ' * 5000 + "1" + "}" * 5001},
     "v2beta1-fields is nested more than 100 levels deep"),
    ({fields_annotation("v2beta1"): '{"spec": ' + '{"a": ' * 500 + "1" + "}" * 501},
     "v2beta1-fields is nested more than 100 levels deep"),
])
def test_a_stored_job_reads_at_v2beta1_without_what_it_cannot_take(
        annotations: dict[str, str], said: str) -> None:
    ignored: list[str] = []
    out = convert(annotated(STORED_V1, annotations), V2, ignored)
    assert len(ignored) == 1 and said in ignored[0], ignored
    assert out["apiVersion"] == V2
    assert out["spec"] == STORED_V1["spec"]
    assert "status" not in out
    # read as written at v1: nothing of the stash, nothing of what it claims
    assert out["metadata"].get("annotations") in (None, {WRITTEN_IN: "v1"})


def test_a_review_of_stored_jobs_converts_them_all_whatever_one_says() -> None:
    good = annotated(STORED_V1, {fields_annotation("v2beta1"): '{"spec": {}}'})
    bad = annotated({**STORED_V1, "metadata": {"name": "bad", "namespace": "t"}},
                    {fields_annotation("v2beta1"): "not-json"})
    status, answer = convert_answer(review([bad, good], V2))
    assert status == 200 and answer["response"]["result"] == {"status": "Success"}
    first, second = answer["response"]["convertedObjects"]
    assert first["metadata"]["name"] == "bad" and first["apiVersion"] == V2
    assert second == {**convert(STORED_V1, V2), "apiVersion": V2}


def review(objects: list[Any], desired: str = V1) -> bytes:
    return json.dumps({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                       "request": {"uid": "u-1", "desiredAPIVersion": desired,
                                   "objects": objects}}).encode()


def test_the_webhook_converts_every_object_of_a_review() -> None:
    jobs_ = [{"apiVersion": V2, "kind": "MPIJob", "metadata": {"name": n},
              "spec": {"mpiReplicaSpecs": {}}} for n in ("a", "b")]
    status, answer = convert_answer(review(jobs_))
    assert status == 200
    assert answer["response"]["uid"] == "u-1"
    assert answer["response"]["result"] == {"status": "Success"}
    assert [o["metadata"]["name"] for o in answer["response"]["convertedObjects"]] == ["a", "b"]
    assert {o["apiVersion"] for o in answer["response"]["convertedObjects"]} == {V1}


def test_the_webhook_refuses_a_review_it_cannot_convert() -> None:
    status, answer = convert_answer(review([{"apiVersion": V2, "kind": "MPIJob",
                                             "metadata": {"annotations": {
                                                 WRITTEN_IN: "v9"}}}]))
    assert status == 200
    assert answer["response"]["result"]["status"] == "Failure"
    assert "written-in: 'v9'" in answer["response"]["result"]["message"]
    assert "convertedObjects" not in answer["response"]


@pytest.mark.parametrize("raw", [b"{", b"[]", b'{"request": {"objects": []}}'])
def test_the_webhook_answers_400_to_what_is_not_a_conversion_review(raw: bytes) -> None:
    status, answer = convert_answer(raw)
    assert status == 400
    assert answer["message"].startswith("not a ConversionReview")


def test_a_v2beta1_manifest_is_read_as_the_v1_job_it_is() -> None:
    job = load_job({"apiVersion": V2, "kind": "MPIJob", "metadata": {"name": "pi"},
                    "spec": {"mpiImplementation": "Intel", "mpiReplicaSpecs": {
                        "Launcher": {"template": TEMPLATE},
                        "Worker": {"replicas": 2, "template": TEMPLATE}}}})
    assert job.api_version == V1
    assert job.metadata.annotations == {WRITTEN_IN: "v2beta1"}
    assert job.spec.transport == "SSH"  # type: ignore[attr-defined]
    assert job.spec.mpi_implementation == "Intel"  # type: ignore[attr-defined]


def test_a_v2beta1_manifest_with_v1_fields_is_refused_as_the_api_server_refuses_it() -> None:
    with pytest.raises(InvalidJob) as err:
        parse_job({"apiVersion": V2, "kind": "MPIJob", "metadata": {"name": "pi"},
                   "spec": {"transport": "SSH", "mpiReplicaSpecs": {
                       "Worker": {"restartLimit": 1, "template": TEMPLATE}}}})
    assert [str(p) for p in err.value.problems] == [
        "spec.transport: unknown field in kubeflow.org/v2beta1 MPIJob",
        "spec.mpiReplicaSpecs[Worker].restartLimit: unknown field in kubeflow.org/v2beta1 "
        "MPIJob"]


def test_the_mpijob_crd_serves_v2beta1_converted_by_the_webhook() -> None:
    crd = all_crds()["kubeflow.org_mpijobs.yaml"]["spec"]
    assert [(v["name"], v["served"], v["storage"]) for v in crd["versions"]] == [
        ("v1", True, True), ("v2beta1", True, False)]
    assert crd["conversion"]["strategy"] == "Webhook"
    assert crd["conversion"]["webhook"]["clientConfig"]["service"]["path"] == "/convert"
    others = [c for name, c in all_crds().items() if "mpijobs" not in name]
    assert all(len(c["spec"]["versions"]) == 1 and "conversion" not in c["spec"]
               for c in others)
