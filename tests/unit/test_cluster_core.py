"""The manager's own machinery without a server: work queue, expectations, slim records."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from tests.jobs import job
from trainop.cluster.acting.expectations import Expectations
from trainop.cluster.acting.workqueue import WorkQueue
from trainop.cluster.reading.client import throttle_delay, warning_texts
from trainop.cluster.reading.records import (
    job_record,
    node_record,
    object_record,
    owner_key,
    pod_record,
)
from trainop.engine import BatchJob, Ended
from trainop.engine.objects import content_of


def run(coro: object) -> object:
    return asyncio.run(coro)  # type: ignore[arg-type]


def test_queue_deduplicates_and_never_hands_a_key_out_twice() -> None:
    async def scenario() -> list[str]:
        q = WorkQueue("t")
        q.add("a")
        q.add("a")
        q.add("b")
        first = await q.get()
        q.add(first)  # changed while being worked on: queued again only after done()
        second = await q.get()
        assert len(q) == 0
        q.done(first)
        third = await asyncio.wait_for(q.get(), 1)
        return [first, second, third]
    assert run(scenario()) == ["a", "b", "a"]


def test_queue_add_after_waits() -> None:
    async def scenario() -> float:
        q = WorkQueue("t")
        start = time.monotonic()
        q.add_after("a", 0.2)
        assert await q.get() == "a"
        return time.monotonic() - start
    assert 0.15 < run(scenario()) < 2  # type: ignore[operator]


def test_a_key_asked_for_later_again_and_again_waits_once_for_the_earliest() -> None:
    async def scenario() -> None:
        q = WorkQueue("t")
        for i in range(10_000):  # a sync asking for a look later, each time its job changes
            q.add_after("a", 60 + i)
        q.add_after("a", 0.1)
        q.add_after("a", 30)
        assert len(q.delays.later) == 2  # held: the first time asked, and the earliest
        assert await asyncio.wait_for(q.get(), 5) == "a"
        q.done("a")
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(q.get(), 0.5)  # once: the later times went with it
    run(scenario())


def test_queue_retries_back_off_exponentially_and_forget_resets() -> None:
    async def scenario() -> list[float]:
        q = WorkQueue("t", base_delay=0.05)
        delays = []
        for _ in range(3):
            start = time.monotonic()
            q.add_rate_limited("a")
            key = await q.get()
            delays.append(time.monotonic() - start)
            q.done(key)
        q.forget("a")
        start = time.monotonic()
        q.add_rate_limited("a")
        await q.get()
        delays.append(time.monotonic() - start)
        return delays
    d = run(scenario())
    assert d[0] < d[1] < d[2] and d[2] >= 0.19 and d[3] < 0.15, d  # type: ignore[index,operator]


def test_queue_retry_rate_of_a_namespace_is_bounded() -> None:
    async def scenario() -> float:
        q = WorkQueue("t", base_delay=0.0, qps=20, burst=5)
        start = time.monotonic()
        for i in range(15):
            q.add_rate_limited(f"ns/k{i}")
        for _ in range(15):
            await q.get()
        return time.monotonic() - start
    assert run(scenario()) >= 0.4  # type: ignore[operator]  # 10 past the burst at 20/s


def test_one_namespaces_failing_keys_do_not_hold_back_anothers_retry() -> None:
    async def scenario() -> list[str]:
        q = WorkQueue("t", base_delay=0.0, qps=10, burst=5)
        for i in range(1000):  # 100 s of retries at 10/s, were the bucket shared
            q.add_rate_limited(f"storm/j{i}")
        q.add_rate_limited("quiet/j")
        return [await asyncio.wait_for(q.get(), 2) for _ in range(2)]
    assert "quiet/j" in run(scenario())  # type: ignore[operator]


def test_the_retry_buckets_of_namespaces_kept_are_bounded() -> None:
    from trainop.cluster.acting.workqueue import BUCKETS_KEPT

    async def scenario() -> int:
        q = WorkQueue("t", base_delay=0.0, qps=10, burst=5)
        for i in range(BUCKETS_KEPT):
            q.add_rate_limited(f"ns{i}/j")
        await asyncio.sleep(0.3)  # each refilled its one token
        q.add_rate_limited("one-more/j")
        return len(q.limiter.buckets)
    assert run(scenario()) == 1


def test_plain_adds_are_not_rate_limited() -> None:
    async def scenario() -> float:
        q = WorkQueue("t", qps=1, burst=1)
        start = time.monotonic()
        for i in range(200):
            q.add(f"k{i}")
        for _ in range(200):
            q.done(await q.get())
        return time.monotonic() - start
    assert run(scenario()) < 1  # type: ignore[operator]


def test_expectations() -> None:
    e = Expectations(ttl=60)
    assert e.satisfied("j")
    e.expect("j", adds=["p0", "p1"], deletes=["p2"])
    assert not e.satisfied("j")
    e.observed_add("j", "p0")
    e.observed_delete("j", "p2")
    assert not e.satisfied("j")
    e.lower("j", adds=["p1"])  # its create failed: it will never be seen
    assert e.satisfied("j")


def test_expectations_expire() -> None:
    e = Expectations(ttl=0.0)
    e.expect("j", adds=["p0"], deletes=[])
    time.sleep(0.01)
    assert e.satisfied("j")


POD = {
    "metadata": {"name": "j-worker-1", "namespace": "ns", "uid": "u", "resourceVersion": "7",
                 "labels": {"training.kubeflow.org/replica-type": "worker",
                            "training.kubeflow.org/replica-index": "1"},
                 "ownerReferences": [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                                      "name": "j", "uid": "ju", "controller": True}]},
    "status": {"phase": "Failed", "containerStatuses": [
        {"name": "sidecar", "restartCount": 1, "ready": False,
         "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
        {"name": "pytorch", "restartCount": 2, "ready": False,
         "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}]},
}


@pytest.mark.parametrize("retry_after,attempt,low,high", [
    ("", 0, 1.0, 1.5),        # no Retry-After: a second
    ("2", 0, 2.0, 3.0),       # as the server says, up to half again at random
    ("2", 4, 4.0, 6.0),       # longer each attempt
    ("3600", 0, 10.0, 15.0),  # never more than 10s before jitter
    ("soon", 0, 1.0, 1.5),    # a header that is not a number
])
def test_throttled_requests_wait_as_told_with_jitter(retry_after: str, attempt: int,
                                                     low: float, high: float) -> None:
    waits = {throttle_delay(retry_after, attempt) for _ in range(200)}
    assert all(low <= w <= high for w in waits)
    assert len(waits) > 100  # spread out, so refused requests do not return together


def test_pod_record_keeps_what_the_engine_reads() -> None:
    rec = pod_record(POD)
    assert rec is not None
    assert (rec.meta.owner_uid, rec.meta.owner_kind, rec.replica_type, rec.index) == (
        "ju", "PyTorchJob", "worker", 1)
    assert (rec.phase, rec.restarts, rec.ready) == ("Failed", 3, False)
    assert rec.exit_code("pytorch") == 137
    assert rec.exit_code("missing") == 0  # falls back to the first terminated container


@pytest.mark.parametrize(("status", "cause"), [
    ({"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                      "message": "0/1 nodes are available: 1 Insufficient cpu."}]},
     ("Unschedulable", "0/1 nodes are available: 1 Insufficient cpu.",
      "Error pod j-worker-1 condition message: 0/1 nodes are available: 1 Insufficient cpu.")),
    ({"initContainerStatuses": [{"name": "init-pytorch", "state": {"waiting": {
        "reason": "ErrImagePull", "message": "failed to pull image \"nope:1\""}}}],
      "containerStatuses": [{"name": "pytorch", "state": {"waiting": {
          "reason": "PodInitializing"}}}]},
     ("ErrImagePull", 'init container init-pytorch: failed to pull image "nope:1"',
      'Error pod j-worker-1 container init-pytorch waiting message: failed to pull image '
      '"nope:1"')),
    ({"containerStatuses": [{"name": "pytorch", "state": {"waiting": {
        "reason": "CreateContainerConfigError", "message": 'configmap "cfg" not found'}}}]},
     ("CreateContainerConfigError", 'container pytorch: configmap "cfg" not found',
      'Error pod j-worker-1 container pytorch waiting message: configmap "cfg" not found')),
    ({"containerStatuses": [{"name": "pytorch", "state": {"waiting": {
        "reason": "ContainerCreating"}}}]}, None),  # on its way
    ({}, None),
], ids=["unschedulable", "init-image", "config", "creating", "nothing-yet"])
def test_a_pending_pod_says_why_it_does_not_start(status: dict[str, Any],
                                                   cause: tuple[str, str, str] | None
                                                   ) -> None:
    pod = {**POD, "metadata": {**POD["metadata"], "creationTimestamp": "2026-01-01T00:00:00Z"},
           "status": {"phase": "Pending", **status}}
    rec = pod_record(pod)
    assert rec is not None and rec.waiting == cause
    assert rec.created == "2026-01-01T00:00:00Z"
    started = pod_record({**pod, "status": {**pod["status"], "phase": "Running"}})
    assert started is not None and (started.waiting, started.created) == (None, None)


def _owned(namespace: str, api_version: str, controller: bool = True,
           kind: str = "PyTorchJob") -> str | None:
    pod = json.loads(json.dumps(POD))
    pod["metadata"]["namespace"] = namespace
    ref = pod["metadata"]["ownerReferences"][0]
    ref["apiVersion"], ref["controller"], ref["kind"] = api_version, controller, kind
    rec = pod_record(pod)
    assert rec is not None
    return rec.meta.owner_key


def test_owner_is_the_kind_and_uid_in_the_pods_own_namespace() -> None:
    assert _owned("ns", "kubeflow.org/v1") == owner_key("ns", "PyTorchJob", "ju")
    # a job of namespace "ns" never counts a pod of namespace "other" naming its UID
    assert _owned("other", "kubeflow.org/v1") != owner_key("ns", "PyTorchJob", "ju")
    assert _owned("ns", "example.com/v1") is None  # another API's PyTorchJob
    assert _owned("ns", "kubeflow.org/v1", controller=False) is None
    # a kind served at another version: mpi-operator's pods name their MPIJob at v2beta1
    assert _owned("ns", "kubeflow.org/v2beta1", kind="MPIJob") == owner_key(
        "ns", "MPIJob", "ju")
    assert _owned("ns", "kubeflow.org/v2beta1") is None  # no PyTorchJob is served there


@pytest.mark.parametrize("phase,code", [("Failed", 2), ("Running", None)])
def test_last_exit_counts_only_for_a_failed_pod(phase: str, code: int | None) -> None:
    waiting = {"name": "pytorch", "restartCount": 1, "ready": False,
               "state": {"waiting": {"reason": "CrashLoopBackOff"}},
               "lastState": {"terminated": {"exitCode": 2, "reason": "Error"}}}
    rec = pod_record({**POD, "status": {"phase": phase, "containerStatuses": [waiting]}})
    assert rec is not None and rec.exit_code("pytorch") == code  # Running: still retrying


@pytest.mark.parametrize("labels", [{}, {"training.kubeflow.org/replica-index": "0"},
                                    {"training.kubeflow.org/replica-type": "worker",
                                     "training.kubeflow.org/replica-index": "x"}],
                         ids=["no-labels", "no-type", "index-not-a-number"])
def test_pods_without_replica_labels_are_not_ours(labels: dict[str, str]) -> None:
    assert pod_record({"metadata": {"name": "p", "labels": labels}}) is None


def test_a_pod_without_an_index_is_its_types_only_replica() -> None:
    # MPI's launcher: upstream labels it without replica-index (mpi/mpijob.go:227-243)
    rec = pod_record({"metadata": {"name": "job-launcher", "labels": {
        "training.kubeflow.org/replica-type": "launcher"}}})
    assert rec is not None and (rec.replica_type, rec.index) == ("launcher", 0)


def test_pod_record_of_a_pod_with_no_status_yet() -> None:
    rec = pod_record({"metadata": {**POD["metadata"], "deletionTimestamp": "x"}})  # type: ignore[dict-item]
    assert rec is not None and rec.phase == "Pending" and rec.terminating
    assert rec.exit_code("pytorch") is None and not rec.ready


def test_secret_data_is_never_kept_configmap_data_is_as_a_digest() -> None:
    meta = {"name": "s", "namespace": "ns"}
    assert object_record("Secret", {"metadata": meta, "data": {"k": "c2VjcmV0"}}).content is None
    # a megabyte of a ConfigMap costs the cache 64 characters; the same data, in any key
    # order, the same digest; other data, another
    big = object_record("ConfigMap", {"metadata": meta, "data": {"k": "v" * 2**20, "a": "b"}})
    assert isinstance(big.content, str) and len(big.content) == 64
    assert big.content == content_of("ConfigMap", {"data": {"a": "b", "k": "v" * 2**20}})
    assert big.content != content_of("ConfigMap", {"data": {"a": "b", "k": "v"}})
    assert object_record("PodGroup", {"metadata": meta, "status": {"phase": "Inqueue"}}
                         ).phase == "Inqueue"


def test_job_record_drops_managed_fields() -> None:
    job = {"metadata": {"name": "j", "managedFields": [{"manager": "kubectl"}]}, "spec": {}}
    assert "managedFields" not in job_record(job).object()["metadata"]
    assert "managedFields" in job["metadata"]  # the input is not changed


def test_job_record_keeps_the_job_compact_and_whole() -> None:
    env = [{"name": f"VAR_{i}", "value": "x" * 40} for i in range(5000)]
    job = {"apiVersion": "kubeflow.org/v1", "kind": "JAXJob",
           "metadata": {"name": "j", "namespace": "ns", "uid": "u", "resourceVersion": "7"},
           "spec": {"jaxReplicaSpecs": {"Worker": {"template": {"spec": {"containers": [
               {"name": "jax", "env": env}]}}}}},
           "status": {"conditions": [{"type": "Created", "status": "True"}]}}
    rec = job_record(job)
    assert rec.object() == job
    assert isinstance(rec.raw, bytes) and len(rec.raw) < len(json.dumps(job))
    assert rec.head() == {"apiVersion": "kubeflow.org/v1", "kind": "JAXJob", "metadata": {
        "name": "j", "namespace": "ns", "uid": "u", "resourceVersion": "7"},
        "status": job["status"]}


def test_the_caches_keep_only_what_a_job_controls() -> None:
    # Labels are anyone's to set: 20,000 pods with trainop's labels but no job as their
    # controller must cost the cache nothing.
    from trainop.cluster.reading.caches import build
    from trainop.cluster.reading.client import Client
    from trainop.cluster.reading.config import ClusterConfig

    caches = build(Client(ClusterConfig(server="http://127.0.0.1:1")), ["MPIJob"], None, {})
    assert caches.pods is not None
    assert caches.pods.decode(POD) is not None
    stranger = json.loads(json.dumps(POD))
    stranger["metadata"]["ownerReferences"][0].update(apiVersion="apps/v1", kind="ReplicaSet")
    assert caches.pods.decode(stranger) is None
    del stranger["metadata"]["ownerReferences"]
    assert caches.pods.decode(stranger) is None
    config_map = {"metadata": {**POD["metadata"], "name": "j-config"}, "data": {"a": "b"}}
    assert caches.objects["ConfigMap"].decode(config_map) is not None
    assert caches.objects["ConfigMap"].decode({"metadata": {"name": "x"}}) is None


def test_a_launcher_jobs_status_is_read_as_the_engine_needs_it() -> None:
    meta = {"name": "j-launcher", "namespace": "ns"}
    rec = object_record("Job", {"metadata": meta, "spec": {"suspend": True}, "status": {
        "startTime": "t0", "failed": 2, "completionTime": None, "conditions": [
            {"type": "FailureTarget", "status": "True", "reason": "BackoffLimitExceeded"},
            {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
             "message": "Job has reached the specified backoff limit"}]}})
    assert rec.job == BatchJob(suspended=True, started=True, finished="Failed",
                               reason="BackoffLimitExceeded",
                               message="Job has reached the specified backoff limit", failed=2)
    done = object_record("Job", {"metadata": meta, "spec": {}, "status": {
        "completionTime": "t1", "conditions": [{"type": "Complete", "status": "True"}]}})
    assert done.job == BatchJob(finished="Complete", completion_time="t1")
    # kept current: whether it is suspended (the API server writes `suspend: false`)
    assert done.content == object_record("Job", {"metadata": meta, "spec": {
        "suspend": False}}).content != rec.content
    assert object_record("ConfigMap", {"metadata": meta}).job is None


def test_a_launcher_jobs_pods_are_kept_under_the_job_and_count_for_its_owner() -> None:
    from trainop.cluster.acting.controller import ControllerConfig, JobController, ParsedJobs
    from trainop.cluster.reading.caches import build
    from trainop.cluster.reading.client import Client
    from trainop.cluster.reading.config import ClusterConfig
    from trainop.engine import EngineConfig

    caches = build(Client(ClusterConfig(server="http://127.0.0.1:1")), ["MPIJob"], None, {})
    assert caches.pods is not None
    launcher = {"metadata": {"name": "j-launcher", "namespace": "ns", "uid": "bj",
                             "labels": {"training.kubeflow.org/job-name": "j"},
                             "ownerReferences": [{"apiVersion": "kubeflow.org/v1",
                                                  "kind": "MPIJob", "name": "j",
                                                  "uid": "ju", "controller": True}]},
                "spec": {}, "status": {"failed": 1}}
    caches.objects["Job"].put_newer(launcher)

    def pod(name: str, phase: str, created: str, reason: str = "") -> dict[str, Any]:
        return {"metadata": {"name": name, "namespace": "ns", "uid": name,
                             "creationTimestamp": created, "labels": {
                                 "training.kubeflow.org/job-name": "j",
                                 "training.kubeflow.org/operator-name": "mpi-operator",
                                 "training.kubeflow.org/job-role": "launcher"},
                             "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
                                                  "name": "j-launcher", "uid": "bj",
                                                  "controller": True}]},
                "status": {"phase": phase, "reason": reason, "message": f"{name} ended"}}
    for p in (pod("j-launcher-a", "Failed", "2026-01-01T00:00:01Z", "Old"),
              pod("j-launcher-b", "Failed", "2026-01-01T00:00:02Z", "Evicted"),
              pod("j-launcher-c", "Running", "2026-01-01T00:00:03Z")):
        assert caches.pods.decode(p) is not None
        caches.pods.put_newer(p)
    controller = JobController("MPIJob", Client(ClusterConfig(server="http://127.0.0.1:1")),
                               caches, ControllerConfig(EngineConfig()), None,  # type: ignore[arg-type]
                               lambda: True, ParsedJobs())
    rec = caches.objects["Job"].get("ns/j-launcher")
    assert rec is not None
    assert controller.observer.batch_job(rec) == BatchJob(failed=1, running=1,
                                                 last_failed=("Evicted", "j-launcher-b ended"))
    # a change of its pod wakes the MPIJob
    pod_rec = caches.pods.get("ns/j-launcher-c")
    assert pod_rec is not None and controller.watches.job_of(pod_rec) == "ns/j"


def test_a_container_restarted_in_place_keeps_its_last_run() -> None:
    # what a kubelet reports under OnFailure: Running, restartCount, lastState.terminated
    running = {"name": "pytorch", "restartCount": 2, "ready": True,
               "state": {"running": {}},
               "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}
    rec = pod_record({**POD, "status": {"phase": "Running", "containerStatuses": [running]}})
    assert rec is not None and rec.exit_code("pytorch") is None  # not ended
    assert rec.last_run("pytorch") == (137, "OOMKilled") and rec.restarts == 2
    # between a run's end and the restart (seen on a real kubelet): the run that just
    # ended is in state.terminated, the one before it in lastState; the last is the former
    ended = {**running, "state": {"terminated": {"exitCode": 1, "reason": "Error"}},
             "ready": False}
    rec = pod_record({**POD, "status": {"phase": "Running", "containerStatuses": [ended]}})
    assert rec is not None and rec.last_run("pytorch") == (1, "Error")


def test_warning_headers_are_read_as_rfc_7234_says() -> None:
    assert warning_texts(['299 - "v1 Endpoints is deprecated in v1.33+"',
                          '299 - "a \\"quoted\\" name"', "not a warning value"]) == [
        "v1 Endpoints is deprecated in v1.33+", 'a "quoted" name', "not a warning value"]


def test_parsed_jobs_stay_within_their_budget_least_recently_used_first() -> None:
    from trainop.cluster.acting.controller import ParsedJobs

    parsed = ParsedJobs(budget=10)
    a, b, c = (job("JAXJob", {"Worker": 1}, name=n) for n in ("a", "b", "c"))
    parsed.put(("JAXJob", "ns/a"), "1", a, 4)
    parsed.put(("JAXJob", "ns/b"), "1", b, 4)
    assert parsed.get(("JAXJob", "ns/a"), "1") is a  # a is now the most recently used
    assert parsed.get(("JAXJob", "ns/a"), "2") is None  # another version: parsed again
    parsed.put(("JAXJob", "ns/c"), "1", c, 4)  # 12 > 10: b goes
    assert parsed.get(("JAXJob", "ns/b"), "1") is None
    assert parsed.get(("JAXJob", "ns/c"), "1") is c
    assert (len(parsed), parsed.used) == (2, 8)
    parsed.put(("JAXJob", "ns/a"), "2", a, 11)  # too big to keep; its old version goes too
    assert parsed.get(("JAXJob", "ns/a"), "1") is None and (len(parsed), parsed.used) == (1, 4)
    parsed.pop(("JAXJob", "ns/c"))
    assert (len(parsed), parsed.used) == (0, 0)


def test_every_kind_shares_one_budget_of_parsed_jobs() -> None:
    """Seven controllers, one store: the manager's parsed jobs stay within one budget
    whatever the kinds, and jobs of two kinds with one name are two entries."""
    from trainop.cluster.acting.controller import ParsedJobs

    parsed = ParsedJobs(budget=10)
    tf, pt = job("TFJob", name="same"), job("PyTorchJob", name="same")
    parsed.put(("TFJob", "ns/same"), "1", tf, 4)
    parsed.put(("PyTorchJob", "ns/same"), "1", pt, 4)
    assert parsed.get(("TFJob", "ns/same"), "1") is tf
    assert parsed.get(("PyTorchJob", "ns/same"), "1") is pt
    parsed.put(("MXJob", "ns/other"), "1", job("MXJob"), 4)  # 12 > 10: the oldest goes
    assert parsed.get(("TFJob", "ns/same"), "1") is None and parsed.used == 8


def test_a_pods_replica_is_read_from_its_labels_in_one_place() -> None:
    from trainop.engine.labels import (
        JOB_ROLE,
        OPERATOR_NAME,
        REPLICA_INDEX,
        REPLICA_TYPE,
        replica_of,
    )

    assert replica_of({REPLICA_TYPE: "worker", REPLICA_INDEX: "3"}, "j-worker-3") == (
        "worker", 3)
    # MPI's only launcher (v1's is also job-role master)
    assert replica_of({REPLICA_TYPE: "launcher", JOB_ROLE: "master"}, "j-launcher") == (
        "launcher", 0)
    assert replica_of({REPLICA_TYPE: "worker", REPLICA_INDEX: "x"}, "j-worker-x") is None
    assert replica_of({REPLICA_INDEX: "1"}, "j-worker-1") is None
    assert replica_of({}, "j-worker-1") is None
    # mpi-operator's labels: the type in job-role, a worker's index from its name (its
    # label is one more where the launcher is rank 0)
    mpi = {OPERATOR_NAME: "mpi-operator"}
    assert replica_of({**mpi, JOB_ROLE: "worker", REPLICA_INDEX: "3"}, "j-worker-2") == (
        "worker", 2)
    assert replica_of({**mpi, JOB_ROLE: "launcher", REPLICA_INDEX: "0"}, "j-launcher") == (
        "launcher", 0)
    assert replica_of({**mpi, JOB_ROLE: "master"}, "j-launcher") is None
    assert replica_of({JOB_ROLE: "worker"}, "j-worker-2") is None  # not mpi-operator's


def test_a_failed_pod_keeps_what_the_pod_failure_policy_reads() -> None:
    pod = json.loads(json.dumps(POD))
    pod["spec"] = {"nodeName": "node-1"}
    pod["status"]["containerStatuses"][1]["state"]["terminated"].update(
        finishedAt="2026-01-01T00:01:00Z", message="CUDA error: out of memory")
    pod["status"]["initContainerStatuses"] = [
        {"name": "fetch", "state": {"terminated": {"exitCode": 0}}}]
    pod["status"]["conditions"] = [
        {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"},
        {"type": "Ready", "status": "False"}]
    rec = pod_record(pod)
    assert rec is not None and rec.failure is not None
    assert rec.failure.exit_codes == (("sidecar", 0), ("pytorch", 137), ("fetch", 0))
    assert rec.failure.conditions == (("DisruptionTarget", "True"), ("Ready", "False"))
    # what status.lastFailure names: each container that failed, as it ended
    assert rec.failure.ended == (Ended("pytorch", "2026-01-01T00:01:00Z", "CUDA error: out of"
                                       " memory"),)
    assert rec.node == "node-1"
    running = pod_record({**pod, "status": {**pod["status"], "phase": "Running"}})
    assert running is not None and running.failure is None  # nothing kept for the living


def test_the_managers_components_stop_in_the_reverse_of_their_start() -> None:
    """controller-runtime's order: what started last (the controllers) stops first, before
    the lease they act under, the informers and the clients; one that fails to stop holds
    up none of the rest."""
    from trainop.cluster.manager import Components

    stopped: list[str] = []

    async def scenario() -> list[str]:
        components = Components()

        def stop_of(name: str, fails: bool = False) -> Any:
            async def stop() -> None:
                stopped.append(name)
                if fails:
                    raise RuntimeError(f"{name} would not stop")
            return stop
        components.started("clients", stop_of("clients"))
        components.started("informers", stop_of("informers", fails=True))
        components.started("lease", stop_of("lease"))
        forever = components.task("controller", asyncio.Event().wait())
        await asyncio.sleep(0)
        await components.stop()
        assert forever.cancelled()
        return stopped
    assert run(scenario()) == ["lease", "informers", "clients"]


def test_node_record_says_a_node_is_lost_only_where_it_reports_not_ready() -> None:
    from trainop.engine.observed import NodeState

    def node(ready: str | None, taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
        conditions = [{"type": "MemoryPressure", "status": "False"}] + (
            [{"type": "Ready", "status": ready, "lastTransitionTime": "2026-01-01T00:00:00Z"}]
            if ready else [])
        return {"metadata": {"name": "n1", "labels": {"big": "x" * 1000}},
                "spec": {"taints": taints or []},
                "status": {"conditions": conditions, "images": [{"names": ["i"] * 50}]}}

    assert node_record(node("True")).lost() is None
    assert node_record(node(None)).lost() is None  # registering: nothing runs there yet
    assert node_record(node("Unknown")).lost() == NodeState(
        "n1", "Unknown", "2026-01-01T00:00:00Z", False)
    down = node_record(node("False", [
        {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"},
        {"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown",
         "effect": "NoExecute"}]))
    assert down.lost() == NodeState("n1", "False", "2026-01-01T00:00:00Z", True)
    # a heartbeat changes nothing the record holds: the handler drops it
    assert node_record(node("True")) == node_record(node("True"))


def test_a_services_deletion_is_seen_when_its_cache_drops_it() -> None:
    """The applier waits for the services it deleted as for the pods: the Service
    informer's DELETED satisfies that wait (else the job would wait out the TTL)."""
    from trainop.cluster.acting.controller import ControllerConfig, JobController, ParsedJobs
    from trainop.cluster.reading.caches import build
    from trainop.cluster.reading.client import Client
    from trainop.cluster.reading.config import ClusterConfig
    from trainop.cluster.reading.records import object_record
    from trainop.engine import EngineConfig

    caches = build(Client(ClusterConfig(server="http://127.0.0.1:1")), ["PyTorchJob"], None,
                   {})
    controller = JobController("PyTorchJob", Client(ClusterConfig(server="http://127.0.0.1:1")),
                               caches, ControllerConfig(EngineConfig()),
                               None, lambda: True, ParsedJobs())  # type: ignore[arg-type]
    services = caches.objects["Service"]
    service = {"metadata": {**POD["metadata"], "resourceVersion": "1"}}
    services.put(object_record("Service", service))  # type: ignore[arg-type]
    controller.expectations.expect("ns/j", [], ["Service/j-worker-1"])
    assert not controller.expectations.satisfied("ns/j")
    services.remove("ns/j-worker-1")
    assert controller.expectations.satisfied("ns/j")


def test_a_deletion_on_a_lost_node_is_seen_once_under_way() -> None:
    """No kubelet may ever confirm it: waiting for the pod's DELETED event would hold the
    job's every decision (the out-of-service taint among them) until the expectation's
    TTL. A deletion on a node that is Ready is still waited for."""
    from trainop.cluster.acting.controller import ControllerConfig, JobController, ParsedJobs
    from trainop.cluster.reading.caches import build
    from trainop.cluster.reading.client import Client
    from trainop.cluster.reading.config import ClusterConfig
    from trainop.engine import EngineConfig

    caches = build(Client(ClusterConfig(server="http://127.0.0.1:1")), ["PyTorchJob"], None,
                   {}, nodes=True)
    assert caches.pods is not None and caches.nodes is not None
    controller = JobController("PyTorchJob", Client(ClusterConfig(server="http://127.0.0.1:1")),
                               caches, ControllerConfig(EngineConfig(lost_node_grace=60)),
                               None, lambda: True, ParsedJobs())  # type: ignore[arg-type]

    def node(name: str, ready: str) -> dict[str, Any]:
        return {"metadata": {"name": name}, "status": {"conditions": [
            {"type": "Ready", "status": ready, "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}

    def pod(name: str, on: str, deleting: bool, version: str) -> dict[str, Any]:
        meta = {**POD["metadata"], "name": name, "uid": name,  # type: ignore[dict-item]
                "resourceVersion": version}
        if deleting:
            meta["deletionTimestamp"] = "2026-01-01T00:01:00Z"
        return {"metadata": meta, "spec": {"nodeName": on}, "status": {"phase": "Running"}}

    for name, ready in (("lost", "Unknown"), ("fine", "True"), ("later", "True")):
        caches.nodes.put(node_record(node(name, ready)))
    for name, on in (("j-worker-0", "lost"), ("j-worker-1", "fine"), ("j-worker-2", "later")):
        caches.pods.put(caches.pods.decode(pod(name, on, False, "1")))  # type: ignore[arg-type]

    def deleting(name: str, on: str) -> bool:
        """Delete `name` as the API server shows it; whether the job may decide again."""
        controller.expectations.expect("ns/j", [], [name])
        caches.pods.put(caches.pods.decode(pod(name, on, True, "2")))  # type: ignore[arg-type]
        return controller.expectations.satisfied("ns/j")

    assert deleting("j-worker-0", "lost")
    assert not deleting("j-worker-1", "fine")  # its kubelet confirms it: waited for
    controller.expectations.forget("ns/j")
    # deleted while its node was Ready, which is lost before the kubelet confirms
    assert not deleting("j-worker-2", "later")
    caches.nodes.put(node_record(node("later", "Unknown")))
    assert controller.expectations.satisfied("ns/j")


def test_pods_are_found_by_their_node_from_their_binding_until_they_go() -> None:
    """A Node's change looks only at the pods there (the pods informer's node index, kept
    where nodes are watched), not at every cached pod."""
    from trainop.cluster.reading.caches import NODE_INDEX, build
    from trainop.cluster.reading.client import Client
    from trainop.cluster.reading.config import ClusterConfig

    client = Client(ClusterConfig(server="http://127.0.0.1:1"))
    caches = build(client, ["PyTorchJob"], None, {}, nodes=True)
    pods = caches.pods
    assert pods is not None

    def put(name: str, on: str | None, version: str) -> None:
        meta = {**POD["metadata"], "name": name, "uid": name,  # type: ignore[dict-item]
                "resourceVersion": version}
        spec = {"nodeName": on} if on else {}
        pods.put(pods.decode({"metadata": meta, "spec": spec,  # type: ignore[arg-type]
                               "status": {"phase": "Pending"}}))

    def on(node: str) -> list[str]:
        return sorted(p.meta.name for p in pods.indexed(NODE_INDEX, node))

    put("j-worker-0", None, "1")
    put("j-worker-1", "b", "1")
    assert (on("a"), on("b")) == ([], ["j-worker-1"])
    put("j-worker-0", "a", "2")  # bound by the scheduler
    assert (on("a"), on("b")) == (["j-worker-0"], ["j-worker-1"])
    pods.remove("ns/j-worker-1")
    assert (on("a"), on("b")) == (["j-worker-0"], [])
    kept = pods.get("ns/j-worker-0")
    assert kept is not None and kept.meta.owner_key
    assert [p.meta.name for p in pods.owned_by(kept.meta.owner_key)] == ["j-worker-0"]


def test_a_name_is_one_segment_of_a_path_whatever_its_author_wrote() -> None:
    from trainop.api.resources import PODS, PRIORITY_CLASSES

    assert PODS.path("team-a", "job-worker-0") == "/api/v1/namespaces/team-a/pods/job-worker-0"
    assert PRIORITY_CLASSES.path(name="../../api/v1/secrets?watch=true#x") == \
        "/apis/scheduling.k8s.io/v1/priorityclasses/..%2F..%2Fapi%2Fv1%2Fsecrets%3Fwatch%3Dtrue%23x"
    for name in (".", ".."):
        with pytest.raises(ValueError, match="is no object's name"):
            PRIORITY_CLASSES.path(name=name)


def test_the_warnings_remembered_are_bounded(caplog: pytest.LogCaptureFixture) -> None:
    # the API server's warnings may quote what a job's author wrote: one per pod made
    from trainop.cluster.reading.client import Client
    from trainop.cluster.reading.config import ClusterConfig

    class Headers:
        def __init__(self, text: str):
            self.text = text

        def getall(self, name: str, default: list[str]) -> list[str]:
            return [f'299 - "{self.text}"']

    client = Client(ClusterConfig(server="http://127.0.0.1:1"))
    with caplog.at_level("WARNING", "trainop.client"):
        for i in range(1024):
            client._note_warnings(Headers(f"fractional byte value {i}m"), "POST", "/p")
        client._note_warnings(Headers("fractional byte value 1m"), "POST", "/p")
    assert len(client.warnings) == 256  # the README's newest 256
    assert len(caplog.records) == 1025  # one forgotten is told again
    caplog.clear()
    with caplog.at_level("WARNING", "trainop.client"):
        client._note_warnings(Headers(f"fractional byte value {1023}m"),
                              "POST", "/p")
    assert caplog.records == []  # one still remembered is told once only


@pytest.mark.parametrize(("path", "resource"), [
    ("/api/v1/namespaces/ns/pods", "pods"),
    ("/api/v1/namespaces/ns/pods/p-0/status", "pods/status"),
    ("/apis/kubeflow.org/v1/namespaces/ns/pytorchjobs/j?watch=true", "pytorchjobs"),
    ("/api/v1/namespaces/ns", "namespaces"),
    ("/api/v1/nodes/node-1", "nodes"),
    # a name its author chose is never a label value: one series, whatever the name
    ("/apis/scheduling.k8s.io/v1/priorityclasses/anything-at-all", "priorityclasses"),
    ("/apis/kueue.x-k8s.io/v1beta2/workloadpriorityclasses/w/status",
     "workloadpriorityclasses/status"),
])
def test_the_resource_a_request_is_counted_under(path: str, resource: str) -> None:
    from trainop.cluster.reading.client import resource_of

    assert resource_of(path) == resource


@pytest.mark.parametrize(("condition", "ready"), [("True", True), ("False", False),
                                                  (None, False)])
def test_a_pod_is_ready_by_its_ready_condition_not_its_containers(condition: str | None,
                                                                   ready: bool) -> None:
    # a readiness gate keeps the condition False while every container is ready
    from tests.unit.test_unreadable_objects import pod

    obj = pod()
    obj["status"]["containerStatuses"] = [{"name": "jax", "ready": True,
                                           "state": {"running": {}}}]
    if condition is not None:
        obj["status"]["conditions"] = [{"type": "Ready", "status": condition}]
    rec = pod_record(obj)
    assert rec is not None and rec.ready is ready
