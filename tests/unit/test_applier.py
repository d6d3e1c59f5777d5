"""The plan applier against an in-memory API: what goes first, what a refusal or a passing
error does to the job, and which pods the next decision still waits for. (The same
behaviours run against the real API server in tests/integration; here they can be read
in one screen.)"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
from typing import Any

import pytest

from tests.jobs import job
from trainop.cluster.acting.applier import PlanApplier
from trainop.cluster.reading.caches import job_informer
from trainop.cluster.reading.client import MAX_IN_FLIGHT, APIError
from trainop.engine import (
    ClusterAddressing,
    EngineConfig,
    Event,
    Observed,
    OwnedObject,
    Plan,
    PodState,
    SSHKeyPair,
    reconcile,
)
from trainop.engine import conditions as cond
from trainop.frameworks import framework_for

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


class MemoryAPI:
    """Just enough of the API server: creates are recorded in order; `refuse` maps an
    object (`Kind/name`) to the status the server answers its create with; `taken` maps a
    name to the controller UID of an object already there."""

    def __init__(self, refuse: dict[str, int] | None = None,
                 taken: dict[str, str] | None = None, conflicts: int = 0,
                 taken_by: tuple[str, str] | None = ("X", "x"), deleting: bool = False,
                 labelled: bool = True, gone: tuple[str, ...] = ()):
        self.refuse = refuse or {}
        self.gone = gone
        """Names whose deletion the server answers 404 (someone deleted them first)."""
        self.taken = taken or {}
        self.labelled = labelled
        """Whether what holds a name carries the labels its create asked for (else it was
        made by another operator: mpi-operator's launcher Job)."""
        self.asked: dict[str, dict[str, str]] = {}
        self.patched: list[tuple[str, dict[str, Any] | list[dict[str, Any]]]] = []
        self.kinds: list[str] = []
        self.taken_by, self.deleting = taken_by, deleting
        """The kind and name of the holders' controller; whether they are being deleted."""
        self.conflicts = conflicts
        """Status writes answered 409 (someone changed the job) before one goes through."""
        self.created: list[tuple[str, str]] = []
        self.lists = 0
        self.deleted: list[str] = []
        self.status: dict[str, Any] | None = None
        self.in_flight = self.most_in_flight = 0
        """Patches under way, and the most at once."""

    async def create(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        name = obj["metadata"]["name"]
        if name in self.taken:
            self.asked[name] = obj["metadata"].get("labels") or {}
            raise APIError(409, {"reason": "AlreadyExists", "message": f"{name} exists"})
        if f"{obj['kind']}/{name}" in self.refuse:
            raise APIError(self.refuse[f"{obj['kind']}/{name}"],
                           {"reason": "Invalid", "message": "no"})
        self.created.append((obj["kind"], name))
        return obj

    async def get(self, path: str, params: dict[str, str] | None = None) -> dict[str, Any]:
        self.lists += 1
        name = (params or {})["fieldSelector"].split("=", 1)[1]
        if name not in self.taken:
            return {"items": []}
        meta: dict[str, Any] = {"name": name}
        if self.taken_by is not None:
            meta["ownerReferences"] = [{
                "controller": True, "uid": self.taken[name], "kind": self.taken_by[0],
                "name": self.taken_by[1], "apiVersion": "kubeflow.org/v1"}]
        if self.deleting:
            meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        if self.labelled:
            meta["labels"] = self.asked.get(name, {})
        return {"items": [{"metadata": meta}]}

    async def patch(self, path: str, patch: dict[str, Any] | list[dict[str, Any]],
                    kind: str = "application/merge-patch+json") -> dict[str, Any]:
        self.patched.append((path, patch))
        self.kinds.append(kind)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        await asyncio.sleep(0)  # as a request would: the others go on meanwhile
        self.in_flight -= 1
        return {}

    async def delete(self, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        name = path.rsplit("/", 1)[1]
        if name in self.gone:
            raise APIError(404, {"reason": "NotFound", "message": f"{name} not found"})
        self.deleted.append(name)
        return {}

    async def replace(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        if self.conflicts:
            self.conflicts -= 1
            raise APIError(409, {"reason": "Conflict", "message": "the object has been "
                                 "modified; please apply your changes to the latest version"})
        self.status = obj["status"]
        return {**obj, "metadata": {**obj["metadata"], "resourceVersion": "2"}}


class Told:
    def __init__(self) -> None:
        self.events: list[Event] = []

    def record(self, job: dict[str, Any], event: Event) -> None:
        self.events.append(event)


def plan_for(kind: str, replicas: dict[str, int], **spec: Any) -> tuple[Plan, dict[str, Any]]:
    j = job(kind, replicas, uid="u1", spec=spec)
    key = SSHKeyPair("private", "public")
    plan = reconcile(j, Observed(ssh_key=key), T0, framework_for(kind), ClusterAddressing())
    head = {"apiVersion": "kubeflow.org/v1", "kind": kind, "metadata": {
        "name": "job", "namespace": "default", "uid": "u1", "resourceVersion": "1"}}
    return plan, head


def seen(a: PlanApplier, api: MemoryAPI) -> None:
    """The cache shows the services `api` made (as the controller's handler tells it)."""
    for kind, name in api.created:
        if kind == "Service":
            a.expectations.observed_add("default/job", f"Service/{name}")


def applier(api: MemoryAPI, told: Told, kind: str) -> PlanApplier:
    jobs = job_informer(api, kind, None)  # type: ignore[arg-type]
    return PlanApplier(kind, "f", api, jobs, told)  # type: ignore[arg-type]


@pytest.mark.parametrize(("transport", "first"), [
    ("KubectlExec", {"ConfigMap", "ServiceAccount", "Role", "RoleBinding"}),
    ("SSH", {"ConfigMap", "Secret", "Service"})])
def test_what_pods_mount_is_made_before_any_pod(transport: str, first: set[str]) -> None:
    api, told = MemoryAPI(), Told()
    plan, head = plan_for("MPIJob", {"Launcher": 1, "Worker": 2}, transport=transport)
    asyncio.run(applier(api, told, "MPIJob").apply("default/job", head, plan))
    kinds = [k for k, _ in api.created]
    first_pod = kinds.index("Pod")
    assert set(kinds[:first_pod]) == first
    assert kinds.count("Pod") == 3
    # upstream v1.9 tells no event for the Created condition; one per pod
    assert [e.reason for e in told.events] == ["SuccessfulCreatePod"] * 3


def test_a_refused_template_fails_the_job_once_and_claims_no_pod() -> None:
    api, told = MemoryAPI(refuse={"Pod/job-worker-0": 422}), Told()
    plan, head = plan_for("JAXJob", {"Worker": 3})
    a = applier(api, told, "JAXJob")
    asyncio.run(a.apply("default/job", head, plan))
    assert ("Pod", "job-worker-1") not in api.created  # the first refusal stops the rest
    assert [e.reason for e in told.events] == ["CreateFailed"]
    assert api.status is not None
    failed = next(c for c in api.status["conditions"] if c["type"] == cond.FAILED)
    assert failed["reason"] == "CreateFailed" and "Pod job-worker-0 was rejected" in \
        failed["message"]
    seen(a, api)  # the services made before the refusal reach the cache
    assert a.expectations.satisfied("default/job")  # no pod left to wait for


def test_a_passing_refusal_shows_created_and_retries() -> None:
    api, told = MemoryAPI(refuse={"Pod/job-worker-0": 403}), Told()  # a quota, say
    plan, head = plan_for("JAXJob", {"Worker": 1})
    a = applier(api, told, "JAXJob")
    with pytest.raises(APIError):
        asyncio.run(a.apply("default/job", head, plan))
    assert [e.reason for e in told.events] == ["FailedCreatePod"]
    assert api.status is not None
    assert [c["type"] for c in api.status["conditions"]] == [cond.CREATED]
    assert "startTime" not in api.status  # the rest of the status waits for the pods
    seen(a, api)
    assert a.expectations.satisfied("default/job")


def test_a_conflict_on_the_status_write_tells_each_event_once() -> None:
    api, told = MemoryAPI(conflicts=1), Told()
    plan, head = plan_for("JAXJob", {"Worker": 2}, runPolicy={"suspend": True})
    a = applier(api, told, "JAXJob")
    with pytest.raises(APIError):
        asyncio.run(a.apply("default/job", head, plan))
    # the Suspended transition was not stored: not told
    assert told.events == []
    assert api.status is None
    # the retry decides again from the fresh job: the transition is told once it is stored
    asyncio.run(a.apply("default/job", head, plan))
    assert [e.reason for e in told.events] == ["JAXJobSuspended"]
    assert api.status is not None
    assert cond.SUSPENDED in [c["type"] for c in api.status["conditions"]]


def test_deletions_are_told_once_whatever_the_status_write_meets() -> None:
    # suspending a running job deletes its pods: those deletions happened even when the
    # status write after them meets a conflict, and the retry (which finds the pods
    # terminating) neither deletes nor tells them again
    api, told = MemoryAPI(conflicts=1), Told()
    j = job("JAXJob", {"Worker": 2}, uid="u1", spec={"runPolicy": {"suspend": True}})
    running = tuple(PodState(f"job-worker-{i}", "Worker", i, phase="Running")
                    for i in range(2))
    head = {"apiVersion": "kubeflow.org/v1", "kind": "JAXJob", "metadata": {
        "name": "job", "namespace": "default", "uid": "u1", "resourceVersion": "1"}}
    a = applier(api, told, "JAXJob")
    plan = reconcile(j, Observed(pods=running), T0, framework_for("JAXJob"), ClusterAddressing())
    with pytest.raises(APIError):
        asyncio.run(a.apply("default/job", head, plan))
    assert sorted(api.deleted) == ["job-worker-0", "job-worker-1"]
    assert [e.reason for e in told.events] == ["SuccessfulDeletePod"] * 2
    going = tuple(dataclasses.replace(p, terminating=True) for p in running)
    plan = reconcile(j, Observed(pods=going), T0, framework_for("JAXJob"), ClusterAddressing())
    asyncio.run(a.apply("default/job", head, plan))
    assert sorted(api.deleted) == ["job-worker-0", "job-worker-1"]
    assert [e.reason for e in told.events] == ["SuccessfulDeletePod"] * 2 + ["JAXJobSuspended"]


def test_an_object_someone_else_made_under_the_jobs_name_is_not_adopted() -> None:
    api, told = MemoryAPI(taken={"job-config": "someone-else"}), Told()
    plan, head = plan_for("MPIJob", {"Launcher": 1, "Worker": 1})
    asyncio.run(applier(api, told, "MPIJob").apply("default/job", head, plan))
    assert [k for k, _ in api.created if k == "Pod"] == []
    assert told.events[-1].reason == "CreateFailed"
    assert "ConfigMap job-config already exists and is not controlled by this job" in \
        told.events[-1].message


def test_our_own_object_found_after_a_409_is_used() -> None:
    api, told = MemoryAPI(taken={"job-config": "u1"}), Told()  # made by an earlier round
    plan, head = plan_for("MPIJob", {"Launcher": 1, "Worker": 1})
    asyncio.run(applier(api, told, "MPIJob").apply("default/job", head, plan))
    assert [k for k, _ in api.created].count("Pod") == 2
    assert "CreateFailed" not in [e.reason for e in told.events]


def test_our_own_object_another_operator_made_is_labelled_for_the_caches() -> None:
    # mpi-operator made the job's ConfigMap (a v2beta1 MPIJob it ran before): labelled
    # `app` only, so trainop's caches, which select on job-name, never show it
    api, told = MemoryAPI(taken={"job-config": "u1"}, labelled=False), Told()
    plan, head = plan_for("MPIJob", {"Launcher": 1, "Worker": 1})
    asyncio.run(applier(api, told, "MPIJob").apply("default/job", head, plan))
    assert api.patched == [("/api/v1/namespaces/default/configmaps/job-config", {
        "metadata": {"labels": {"app": "job", "training.kubeflow.org/job-name": "job",
                                "training.kubeflow.org/operator-name": "mpijob-controller"}}})]
    assert "CreateFailed" not in [e.reason for e in told.events]
    # one of a kind the manager may not change is left alone
    api = MemoryAPI(taken={"job-ssh": "u1"}, labelled=False)
    plan, head = plan_for("MPIJob", {"Launcher": 1, "Worker": 1}, transport="SSH")
    asyncio.run(applier(api, Told(), "MPIJob").apply("default/job", head, plan))
    assert [k for k, _ in api.created].count("Pod") == 2 and api.patched == []


@pytest.mark.parametrize(("taken_by", "deleting"), [(("MPIJob", "job"), False),
                                                     (("TFJob", "other"), True)],
                         ids=["an-earlier-job-of-the-name", "being-deleted"])
def test_a_name_still_held_by_what_is_going_is_tried_again_not_failed(
        taken_by: tuple[str, str], deleting: bool) -> None:
    api = MemoryAPI(taken={"job-config": "old-uid"}, taken_by=taken_by, deleting=deleting)
    told = Told()
    plan, head = plan_for("MPIJob", {"Launcher": 1, "Worker": 1})
    a = applier(api, told, "MPIJob")
    again = asyncio.run(a.apply("default/job", head, plan))
    assert again == 0.0  # decided again at once, with the holder shown to the engine
    held = a.holders.held("default/job")
    assert [(h.kind, h.name, h.owner_kind) for h in held] == [
        ("ConfigMap", "job-config", taken_by[0])]
    assert 0 < held[0].look_again <= 1.0
    assert [k for k, _ in api.created if k == "Pod"] == []
    assert "CreateFailed" not in [e.reason for e in told.events]
    # a new job shows Created meanwhile, and nothing else
    assert api.status is not None
    assert [c["type"] for c in api.status["conditions"]] == ["Created"]


def test_a_holder_the_caches_do_not_show_is_looked_at_with_back_off(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A bare pod of the user's kept by its finalizer after its deletion holds a replica's
    name: one request a look, the looks twice as far apart each time up to a minute, none
    between them; once it is gone the name is tried again."""
    from trainop.cluster.acting import holders

    clock = [100.0]
    monkeypatch.setattr(holders.time, "monotonic", lambda: clock[0])
    api = MemoryAPI(taken={"job-worker-0": ""}, taken_by=None, deleting=True)
    plan, head = plan_for("JAXJob", {"Worker": 1})
    a = applier(api, Told(), "JAXJob")
    asyncio.run(a.apply("default/job", head, plan))
    assert [(h.name, h.owner_kind, h.deleting) for h in a.holders.held("default/job")] == [
        ("job-worker-0", None, True)]
    lists = api.lists
    asyncio.run(a.holders.look_again("default/job", "default"))  # not due yet: no request
    assert api.lists == lists
    waits = []
    for _ in range(8):
        clock[0] += a.holders.held("default/job")[0].look_again
        asyncio.run(a.holders.look_again("default/job", "default"))
        waits.append(a.holders.held("default/job")[0].look_again)
    assert waits == [2, 4, 8, 16, 32, 60, 60, 60] and api.lists == lists + 8
    del api.taken["job-worker-0"]
    clock[0] += 60
    asyncio.run(a.holders.look_again("default/job", "default"))
    assert a.holders.held("default/job") == ()


def test_the_next_decision_waits_for_the_services_made_as_for_the_pods() -> None:
    # a decision made before the cache shows the services would make them, and tell
    # their SuccessfulCreateService, a second time
    api, told = MemoryAPI(), Told()
    plan, head = plan_for("PyTorchJob", {"Master": 1, "Worker": 1})
    a = applier(api, told, "PyTorchJob")
    asyncio.run(a.apply("default/job", head, plan))
    assert sorted(k for k, _ in api.created) == ["Pod", "Pod", "Service", "Service"]
    for pod in ("job-master-0", "job-worker-0"):
        a.expectations.observed_add("default/job", pod)
    assert not a.expectations.satisfied("default/job")
    for svc in ("job-master-0", "job-worker-0"):
        a.expectations.observed_add("default/job", f"Service/{svc}")
    assert a.expectations.satisfied("default/job")


def suspending(api: MemoryAPI) -> tuple[PlanApplier, str]:
    """A running PyTorchJob suspended: its pods and services deleted as planned; the key
    under which the applier expects to see them go."""
    j = job("PyTorchJob", {"Master": 1, "Worker": 1}, uid="u1",
            spec={"runPolicy": {"suspend": True}})
    names = ("job-master-0", "job-worker-0")
    observed = Observed(
        pods=tuple(PodState(n, n.split("-")[1].title(), 0, phase="Running") for n in names),
        objects=tuple(OwnedObject("Service", n) for n in names))
    head = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {
        "name": "job", "namespace": "default", "uid": "u1", "resourceVersion": "1"}}
    a = applier(api, Told(), "PyTorchJob")
    plan = reconcile(j, observed, T0, framework_for("PyTorchJob"), ClusterAddressing())
    asyncio.run(a.apply("default/job", head, plan))
    return a, "default/job"


def test_the_next_decision_waits_for_the_services_deleted_as_for_the_pods() -> None:
    # a decision made before the cache shows the services gone would delete them, and
    # tell their SuccessfulDeleteService, a second time
    api = MemoryAPI()
    a, key = suspending(api)
    assert sorted(api.deleted) == ["job-master-0", "job-master-0", "job-worker-0",
                                   "job-worker-0"]
    for pod in ("job-master-0", "job-worker-0"):
        a.expectations.observed_delete(key, pod)
    assert not a.expectations.satisfied(key)
    for svc in ("job-master-0", "job-worker-0"):
        a.expectations.observed_delete(key, f"Service/{svc}")
    assert a.expectations.satisfied(key)


def test_a_service_someone_deleted_first_is_not_waited_for() -> None:
    api = MemoryAPI(gone=("job-worker-0",))  # its pod's deletion answers 404 too
    a, key = suspending(api)
    a.expectations.observed_delete(key, "job-master-0")
    a.expectations.observed_delete(key, "Service/job-master-0")
    assert a.expectations.satisfied(key)


def test_a_service_whose_create_failed_is_not_waited_for() -> None:
    api, told = MemoryAPI(taken={"job-worker-0": "u1"}), Told()  # ours already: a 409
    plan, head = plan_for("PyTorchJob", {"Worker": 1})
    a = applier(api, told, "PyTorchJob")
    asyncio.run(a.apply("default/job", head, plan))
    a.expectations.observed_add("default/job", "job-worker-0")
    assert a.expectations.satisfied("default/job")


def test_the_updates_of_a_plan_go_out_side_by_side() -> None:
    # a restart in place tells every pod of the job its attempt at once: one patch after
    # another took seconds for a job of 32 pods
    api, told = MemoryAPI(), Told()
    plan, head = plan_for("JAXJob", {"Worker": 1})
    plan.update = [{"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": f"job-worker-{i}", "annotations": {"trainop.kubeflow.org/attempt": "1"}}}
        for i in range(40)]
    asyncio.run(applier(api, told, "JAXJob").apply("default/job", head, plan))
    assert sorted(path for path, _ in api.patched) == sorted(
        f"/api/v1/namespaces/default/pods/job-worker-{i}" for i in range(40))
    # the first alone (a patch the API server refuses fails once), then at most
    # MAX_IN_FLIGHT at once
    assert api.most_in_flight == MAX_IN_FLIGHT


def test_a_pod_group_is_updated_by_a_json_patch_the_rest_by_merge_patches() -> None:
    # a merge patch would merge minResources key by key: a resource no longer asked for
    # would stay in the gang's minimum
    api, told = MemoryAPI(), Told()
    plan, head = plan_for("JAXJob", {"Worker": 1})
    plan.update = [
        {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
         "metadata": {"name": "job"}, "spec": {"minMember": 1, "minResources": {"cpu": "1"}}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {}}]
    asyncio.run(applier(api, told, "JAXJob").apply("default/job", head, plan))
    by_path = dict(zip((p for p, _ in api.patched), api.kinds, strict=True))
    assert by_path == {
        "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups/job":
            "application/json-patch+json",
        "/api/v1/namespaces/default/configmaps/c": "application/merge-patch+json"}
    assert dict(api.patched)[
        "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups/job"][1] == {
        "op": "add", "path": "/spec/minResources", "value": {"cpu": "1"}}


def test_a_pod_group_another_operator_made_is_labelled_for_the_caches() -> None:
    # mpi-operator's PodGroup carries no label: trainop, running the job now, would never
    # see it and try to make it for ever
    api, told = MemoryAPI(taken={"job": "u1"}, labelled=False), Told()
    j = job("PyTorchJob", {"Worker": 1}, uid="u1")
    plan = reconcile(j, Observed(), T0, framework_for("PyTorchJob"), ClusterAddressing(),
                     EngineConfig(gang_scheduler="volcano"))
    head = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {
        "name": "job", "namespace": "default", "uid": "u1", "resourceVersion": "1"}}
    asyncio.run(applier(api, told, "PyTorchJob").apply("default/job", head, plan))
    assert api.patched == [(
        "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups/job",
        {"metadata": {"labels": {"training.kubeflow.org/job-name": "job",
                                 "training.kubeflow.org/operator-name": "pytorchjob-controller"}}})]
    assert "CreateFailed" not in [e.reason for e in told.events]
