"""trainop as Kueue's integration (--kueue-workloads) for kinds Kueue lists as external
frameworks: trainop keeps each queued job's Workload, and Kueue queues, admits, preempts and
finishes it as it would a built-in kind's. MXJob too, which no Kueue release integrates."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from testbed import kueue
from testbed.apiserver import TestAPIServer
from tests.integration.kube import Kube, condition_of, wait_for
from tests.jobs import TYPICAL
from tests.kueue.conftest import EXTERNAL_KINDS, KUEUES
from tests.kueue.queues import Queues
from tests.kueue.test_kueue import pods_of, priority_class, queued, run, succeed, wait_pods_of
from trainop.api import parse_job
from trainop.engine import workload as wl
from trainop.engine.queueing import PREBUILT_LABEL

pytestmark = pytest.mark.kueue

TOLERATION = {"key": "pool", "operator": "Equal", "value": "a", "effect": "NoSchedule"}


def workload(queues: Queues, kind: str, job: str) -> dict[str, Any]:
    return queues.wait_workload(kind, job)


def events(kube: Kube, job: str) -> list[tuple[str, str]]:
    return [(e["reason"], e["message"]) for e in kube.items("events")
            if e["involvedObject"]["name"] == job]


def admitted_total(api: TestAPIServer, cluster_queue: str) -> float:
    """kueue_admitted_workloads_total of `cluster_queue`, as Kueue's metrics say it."""
    families = text_string_to_metric_families(KUEUES[api.url].metrics())
    return sum(s.value for f in families if f.name == "kueue_admitted_workloads"
               for s in f.samples if s.name == "kueue_admitted_workloads_total"
               and s.labels.get("cluster_queue") == cluster_queue)


@pytest.mark.parametrize("kind", EXTERNAL_KINDS)
def test_a_job_is_queued_admitted_run_and_finished_through_trainops_workload(
        external: TestAPIServer, ext_kube: Kube, ext_queues: Queues, kind: str) -> None:
    kube, queues = ext_kube, ext_queues
    queues.create(cpu="1", flavor={"nodeLabels": {"pool": "a"}, "tolerations": [TOLERATION]})
    kube.apply(queued(kind))  # too large for the queue: it waits
    made = workload(queues, kind, "job")
    stored = kube.job(kind, "job")
    # trainop's Workload: Kueue's name, owned by the job, held by Kueue's finalizer
    assert made["metadata"]["name"] == wl.name(parse_job(stored))
    assert made["metadata"]["finalizers"] == [wl.FINALIZER]
    assert [(p["name"], p["count"]) for p in made["spec"]["podSets"]] == [
        (rtype.lower(), count) for rtype, count in TYPICAL[kind].items()]
    # suspended by trainop before anything was made for it
    assert kube.wait_condition(kind, "job", "Suspended")["reason"] == f"{kind}Suspended"
    assert stored["spec"]["runPolicy"]["suspend"] is True
    pending = wait_for("the Workload pending", lambda: condition_of(
        queues.workload(kind, "job"), "QuotaReserved", "False"))
    assert pending["reason"] == "Pending"
    assert pods_of(kube, "job") == []

    queues.create(cpu="8", flavor={"nodeLabels": {"pool": "a"}, "tolerations": [TOLERATION]})
    replicas = sum(TYPICAL[kind].values())  # type: ignore[arg-type]
    pods = wait_pods_of(kube, "job", replicas)
    for pod in pods:
        labels, spec = pod["metadata"]["labels"], pod["spec"]
        assert spec["nodeSelector"] == {"pool": "a"}
        assert TOLERATION in spec["tolerations"]
        assert labels["kueue.x-k8s.io/podset"] == labels["training.kubeflow.org/replica-type"]
        assert labels["kueue.x-k8s.io/local-queue-name"] == "queue"
    # the stored job is as its user wrote it: the admission went to the pods only
    after = kube.job(kind, "job")
    assert after["spec"]["runPolicy"]["suspend"] is False
    for rs in after["spec"][next(iter(k for k in after["spec"] if k.endswith("ReplicaSpecs")))
                            ].values():
        assert "nodeSelector" not in rs["template"]["spec"]
    assert ("Started", f"Admitted by clusterQueue {queues.name}") in events(kube, "job")
    # Kueue's metrics count trainop's Workload as any other
    assert admitted_total(external, queues.name) == 1.0

    run(kube, kind, "job")
    assert queues.wait_condition(kind, "job", "PodsReady")["reason"] == "Started"
    succeeded = succeed(kube, kind, "job")
    finished = queues.wait_condition(kind, "job", "Finished")
    assert (finished["reason"], finished["message"]) == ("Succeeded", succeeded["message"])
    wait_for("the finalizer gone", lambda: queues.workload(kind, "job")["metadata"].get(
        "finalizers") in (None, []))


def test_a_job_of_every_kind_preempted_gives_its_quota_back_and_runs_again(
        ext_kube: Kube, ext_queues: Queues) -> None:
    kube, queues = ext_kube, ext_queues
    low, high = f"{kube.ns}-low", f"{kube.ns}-high"
    priority_class(kube, low, 100)
    priority_class(kube, high, 1000)
    # one CPU a pod: the low jobs fill all but one CPU; the high one needs it all
    lows = {kind: sum(TYPICAL[kind].values()) for kind in EXTERNAL_KINDS}  # type: ignore
    quota = sum(lows.values()) + 1
    queues.create(cpu=str(quota), preemption={"withinClusterQueue": "LowerPriority"})
    for kind in EXTERNAL_KINDS:
        kube.apply(queued(kind, kind.lower(), spec={"runPolicy": {"schedulingPolicy": {
            "priorityClass": low}}}))
    for kind, count in lows.items():
        wait_pods_of(kube, kind.lower(), count)
        assert queues.wait_workload(kind, kind.lower())["spec"]["priority"] == 100
        run(kube, kind, kind.lower())

    big = queued("JAXJob", "high", template={"priorityClassName": high})
    for rs in big["spec"]["jaxReplicaSpecs"].values():
        rs["replicas"] = 1
        rs["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = str(quota)
    kube.apply(big)
    assert queues.wait_workload("JAXJob", "high")["spec"]["priority"] == 1000
    for kind in EXTERNAL_KINDS:
        name = kind.lower()
        evicted = queues.wait_condition(kind, name, "Evicted")
        assert evicted["reason"] == "Preempted", kind
        # trainop suspends it, its pods go, and then the quota: Requeued, QuotaReserved False
        wait_for(f"the {kind}'s pods gone", lambda name=name: pods_of(kube, name) == [])
        assert queues.wait_condition(kind, name, "Requeued")["reason"] == "Preempted"
        assert kube.job(kind, name)["spec"]["runPolicy"]["suspend"] is True
        assert ("Stopped", evicted["message"]) in events(kube, name)
        # a preemption counts nothing against the job
        status = kube.job(kind, name).get("status") or {}
        assert not any(rs.get("restarts") for rs in (status.get("replicaStatuses") or {}
                                                     ).values()), kind
    wait_pods_of(kube, "high", 1)
    run(kube, "JAXJob", "high")
    succeed(kube, "JAXJob", "high")
    # the high job's quota goes with it: every low one is admitted again, runs and ends
    for kind, count in lows.items():
        wait_pods_of(kube, kind.lower(), count, timeout=60)
        run(kube, kind, kind.lower())
        succeed(kube, kind, kind.lower())
        finished = queues.wait_condition(kind, kind.lower(), "Finished")
        assert finished["reason"] == "Succeeded", kind


def test_an_mpijob_is_kueues_own_one_workload_and_trainop_makes_none(
        ext_kube: Kube, ext_queues: Queues) -> None:
    # Kueue as it ships keeps kubeflow.org/mpijob on: it queues a v1 MPIJob too (read at
    # v2beta1), and `--kueue-workloads all` leaves MPIJob to it: never two Workloads
    kube, queues = ext_kube, ext_queues
    queues.create(cpu="8")
    kube.apply(queued("MPIJob"))
    wait_pods_of(kube, "job", 3)
    (made,) = [w for w in kube.items("workloads.kueue.x-k8s.io")]
    owner = made["metadata"]["ownerReferences"][0]
    assert (owner["apiVersion"], owner["kind"], owner["name"]) == (
        "kubeflow.org/v2beta1", "MPIJob", "job")
    run(kube, "MPIJob", "job")
    succeed(kube, "MPIJob", "job")
    finished = queues.wait_condition("MPIJob", "job", "Finished")
    assert finished["reason"] == "Succeeded"
    assert len(kube.items("workloads.kueue.x-k8s.io")) == 1
    assert "WorkloadKeptByKueue" not in [r for r, _ in events(kube, "job")]


def test_a_new_job_naming_no_queue_takes_its_namespaces_default_one(
        ext_kube: Kube, ext_queues: Queues) -> None:
    kube, queues = ext_kube, ext_queues
    before = queued("XGBoostJob", "before")
    del before["metadata"]["labels"]
    kube.apply(before)  # no LocalQueue `default` yet: it runs unqueued
    replicas = sum(TYPICAL["XGBoostJob"].values())  # type: ignore[arg-type]
    wait_pods_of(kube, "before", replicas)
    queues.create()
    queues.apply({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                  "metadata": {"name": "default", "namespace": kube.ns},
                  "spec": {"clusterQueue": queues.name}})
    wait_for("LocalQueue default active", lambda: queues.active(
        "localqueues", "default", namespaced=True))
    doc = queued("XGBoostJob")
    del doc["metadata"]["labels"]
    kube.apply(doc)
    made = queues.wait_workload("XGBoostJob", "job")
    assert made["spec"]["queueName"] == "default"
    assert kube.job("XGBoostJob", "job")["metadata"]["labels"][wl.QUEUE_LABEL] == "default"
    queues.wait_condition("XGBoostJob", "job", "Admitted")
    wait_pods_of(kube, "job", replicas)
    # a job that ran before the LocalQueue was made is left as it is
    assert wl.QUEUE_LABEL not in (kube.job("XGBoostJob", "before")["metadata"].get(
        "labels") or {})
    assert queues.workload("XGBoostJob", "before") is None


def test_a_job_borrows_the_quota_its_cohort_lends(ext_kube: Kube, ext_queues: Queues
                                                  ) -> None:
    kube, queues = ext_kube, ext_queues
    queues.create(cpu="1", cohort=kube.ns, lender="8")
    kube.apply(queued("MXJob"))  # a CPU a pod: more than its ClusterQueue's own one
    replicas = sum(TYPICAL["MXJob"].values())  # type: ignore[arg-type]
    queues.wait_condition("MXJob", "job", "Admitted")
    wait_pods_of(kube, "job", replicas)

    def cpu() -> tuple[str, str]:
        usage = json.loads(kube.api.kubectl("get", "clusterqueue", queues.name, "-o", "json")
                           .stdout)["status"]["flavorsUsage"][0]["resources"]
        found = next(r for r in usage if r["name"] == "cpu")
        return found.get("total", "0"), found.get("borrowed", "0")
    # the ClusterQueue's status says it (written a moment after the admission)
    wanted = (str(replicas), str(replicas - 1))
    wait_for("the borrowing counted", lambda: cpu() == wanted)


def test_a_workload_deleted_by_hand_stops_the_job_until_a_new_one_is_admitted(
        ext_kube: Kube, ext_queues: Queues) -> None:
    kube, queues = ext_kube, ext_queues
    queues.create()
    kube.apply(queued("PyTorchJob"))
    wait_pods_of(kube, "job", 3)
    first = queues.wait_workload("PyTorchJob", "job")
    kube.kubectl("delete", "workloads.kueue.x-k8s.io", first["metadata"]["name"],
                 "--wait=false")
    # trainop stops the job (its pods go), lets the old Workload go, and makes a new one,
    # which Kueue admits: the job runs again
    wait_for("the job stopped", lambda: ("Stopped", "Workload is deleted") in events(
        kube, "job"))
    again = wait_for("a new Workload admitted", lambda: (lambda w: w if w and w[
        "metadata"]["uid"] != first["metadata"]["uid"] and wl.read(w).status.admitted else None)(
        queues.workload("PyTorchJob", "job")), timeout=60)
    assert again["metadata"]["name"] == first["metadata"]["name"]
    wait_pods_of(kube, "job", 3)
    run(kube, "PyTorchJob", "job")


def test_a_deleted_jobs_workload_is_let_go(ext_kube: Kube, ext_queues: Queues) -> None:
    kube, queues = ext_kube, ext_queues
    queues.create()
    kube.apply(queued("PyTorchJob"))
    wait_pods_of(kube, "job", 3)
    made = queues.wait_workload("PyTorchJob", "job")
    kube.kubectl("delete", "pytorchjobs.kubeflow.org", "job")
    # the garbage collector deletes the Workload of a deleted job (here, as it would: the
    # suite runs none); Kueue's finalizer holds it until trainop lets it go
    kube.kubectl("delete", "workloads.kueue.x-k8s.io", made["metadata"]["name"],
                 "--wait=false")
    wait_for("the Workload gone", lambda: kube.get(
        "workloads.kueue.x-k8s.io", made["metadata"]["name"]) is None)


def test_why_a_job_waits_is_said_on_it(ext_kube: Kube, ext_queues: Queues) -> None:
    kube, queues = ext_kube, ext_queues
    # no such LocalQueue: Kueue cannot admit it, and the job says why
    doc = queued("PyTorchJob", "lost")
    doc["metadata"]["labels"][wl.QUEUE_LABEL] = "nowhere"
    kube.apply(doc)
    name = queues.wait_workload("PyTorchJob", "lost")["metadata"]["name"]
    wait_for("the Pending warning", lambda: ("Pending", f"Workload {kube.ns}/{name}: "
             "LocalQueue nowhere doesn't exist") in events(kube, "lost"))
    warning = next(e for e in kube.items("events") if e["reason"] == "Pending")
    assert warning["type"] == "Warning"  # Kueue's reason: Inadmissible
    # too large for its queue: the same, in Kueue's words
    queues.create(cpu="1")
    kube.apply(queued("PyTorchJob", "big"))
    wait_for("the Pending event", lambda: any(
        r == "Pending" and "insufficient quota for cpu" in m for r, m in events(kube, "big")))
    assert pods_of(kube, "lost") == [] and pods_of(kube, "big") == []
    # told once per reason
    told = [e for e in kube.items("events") if e["reason"] == "Pending"
            and e["involvedObject"]["name"] == "lost"]
    assert len(told) == 1 and told[0].get("count", 1) == 1


def test_a_job_naming_a_prebuilt_workload_waits_for_it_then_adopts_it(
        ext_kube: Kube, ext_queues: Queues) -> None:
    # MultiKueue's way on a worker cluster, here with the job first: it waits, stopped,
    # until the Workload it names is made (without an owner), then owns it and runs
    kube, queues = ext_kube, ext_queues
    queues.create()
    doc = queued("MXJob")
    doc["metadata"]["annotations"] = {PREBUILT_LABEL: "made-before"}
    kube.apply(doc)
    assert kube.wait_condition("MXJob", "job", "Suspended")["reason"] == "MXJobSuspended"
    assert kube.items("workloads.kueue.x-k8s.io") == []
    prebuilt = wl.desired(parse_job(kube.job("MXJob", "job")), wl.Priority())
    prebuilt["metadata"] = {"name": "made-before", "namespace": kube.ns}
    kube.apply(prebuilt)
    wait_pods_of(kube, "job", 4)
    adopted = queues.wait_workload("MXJob", "job")
    assert adopted["metadata"]["name"] == "made-before"
    assert adopted["metadata"]["labels"][wl.JOB_UID_LABEL] == kube.job("MXJob", "job")[
        "metadata"]["uid"]
    assert len(kube.items("workloads.kueue.x-k8s.io")) == 1


def test_while_kueue_is_down_jobs_wait_and_nothing_runs_twice(
        external: TestAPIServer, ext_kube: Kube, ext_queues: Queues) -> None:
    kube, queues = ext_kube, ext_queues
    queues.create(cpu="4")  # room for the first job (3 CPUs), not for both
    kube.apply(queued("PyTorchJob", "running"))
    run_pods = {p["metadata"]["name"]: p["metadata"]["uid"]
                for p in wait_pods_of(kube, "running", 3)}
    run(kube, "PyTorchJob", "running")
    queues.wait_condition("PyTorchJob", "running", "PodsReady")
    admitted = queues.workload("PyTorchJob", "running")
    assert admitted is not None

    peer = KUEUES[external.url]
    peer.stop()
    try:
        # a job made while Kueue is down: trainop makes its Workload and keeps the job
        # suspended; nothing of it runs outside the quota
        kube.apply(queued("TFJob", "waiting"))
        made = queues.wait_workload("TFJob", "waiting")
        assert kube.wait_condition("TFJob", "waiting", "Suspended")["status"] == "True"
        assert pods_of(kube, "waiting") == []
    finally:
        KUEUES[external.url] = peer.again().wait_ready()

    # Kueue back: the running job keeps its Workload, quota and pods; the waiting one keeps
    # its Workload and waits for the quota, then runs once
    wait_for("the waiting job's Workload pending", lambda: condition_of(
        queues.workload("TFJob", "waiting"), "QuotaReserved", "False"))
    assert {p["metadata"]["name"]: p["metadata"]["uid"]
            for p in pods_of(kube, "running")} == run_pods
    still = queues.workload("PyTorchJob", "running")
    assert still is not None and wl.read(still).status.admitted
    assert still["metadata"]["uid"] == admitted["metadata"]["uid"]
    succeed(kube, "PyTorchJob", "running")
    wait_pods_of(kube, "waiting", 4, timeout=60)
    again = queues.workload("TFJob", "waiting")
    assert again is not None and again["metadata"]["uid"] == made["metadata"]["uid"]
    assert sorted(w["metadata"]["name"] for w in kube.items("workloads.kueue.x-k8s.io")) == \
        sorted([admitted["metadata"]["name"], made["metadata"]["name"]])


def test_replicas_that_are_done_give_their_quota_to_the_next_job(
        ext_kube: Kube, ext_queues: Queues) -> None:
    kube, queues = ext_kube, ext_queues
    queues.create(cpu="3")
    kube.apply(queued("PyTorchJob", "first"))
    wait_pods_of(kube, "first", 3)
    run(kube, "PyTorchJob", "first")
    nxt = queued("JAXJob", "next")
    nxt["spec"]["jaxReplicaSpecs"]["Worker"]["replicas"] = 2
    kube.apply(nxt)
    wait_for("the next job pending", lambda: condition_of(
        queues.workload("JAXJob", "next"), "QuotaReserved", "False"))
    # the first job's workers succeed while its master runs: their two CPUs go back, and
    # the next job is admitted beside it
    for name in ("first-worker-0", "first-worker-1"):
        kube.set_pod(name, "Succeeded", exit_code=0)
    released = wait_for("the workers reclaimable", lambda: (
        queues.workload("PyTorchJob", "first") or {}).get("status", {}).get(
        "reclaimablePods"))
    assert released == [{"name": "worker", "count": 2}]
    wait_pods_of(kube, "next", 2)
    assert kube.get("pod", "first-master-0")["status"]["phase"] == "Running"
    # their author deletes the workers that are done: their quota is the next job's now,
    # so they are not made again (the status, counted from the pods, shows them gone)
    kube.kubectl("delete", "pod", "first-worker-0", "first-worker-1")
    wait_for("the first job's status without its workers", lambda: not kube.job(
        "PyTorchJob", "first")["status"]["replicaStatuses"]["Worker"].get("succeeded")
        or None)
    assert [p["metadata"]["name"] for p in pods_of(kube, "first")] == ["first-master-0"]


def test_an_elastic_job_admitted_partly_runs_the_workers_kueue_admitted(
        ext_kube: Kube, ext_queues: Queues) -> None:
    kube, queues = ext_kube, ext_queues
    queues.create(cpu="2")
    doc = queued("PyTorchJob", spec={"elasticPolicy": {
        "minReplicas": 2, "maxReplicas": 4, "rdzvBackend": "c10d"}})
    del doc["spec"]["pytorchReplicaSpecs"]["Master"]
    doc["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 4
    kube.apply(doc)
    queues.wait_condition("PyTorchJob", "job", "Admitted")
    made = queues.wait_workload("PyTorchJob", "job")
    assert made["spec"]["podSets"][0]["minCount"] == 2
    assert made["status"]["admission"]["podSetAssignments"][0]["count"] == 2
    pods = wait_pods_of(kube, "job", 2)
    assert sorted(p["metadata"]["name"] for p in pods) == ["job-worker-0", "job-worker-1"]
    # the stored job asks for four still: two were admitted, two run
    assert kube.job("PyTorchJob", "job")["spec"]["pytorchReplicaSpecs"]["Worker"][
        "replicas"] == 4
    run(kube, "PyTorchJob", "job")
    succeed(kube, "PyTorchJob", "job")
    assert queues.wait_condition("PyTorchJob", "job", "Finished")["reason"] == "Succeeded"


def kueuectl(api: TestAPIServer, *args: str) -> str:
    out = subprocess.run([str(kueue.kueuectl()), "--kubeconfig", str(api.kubeconfig), *args],
                         capture_output=True, text=True, timeout=60, check=True)
    return out.stdout


def test_kueuectl_lists_stops_and_resumes_a_job_trainop_queues(
        external: TestAPIServer, ext_kube: Kube, ext_queues: Queues) -> None:
    kube, queues = ext_kube, ext_queues
    queues.create()
    kube.apply(queued("PaddleJob"))
    made = queues.wait_workload("PaddleJob", "job")
    replicas = sum(TYPICAL["PaddleJob"].values())  # type: ignore[arg-type]
    wait_pods_of(kube, "job", replicas)
    listed = kueuectl(external, "list", "workload", "-n", kube.ns, "--for", "paddlejob/job")
    header, row = listed.splitlines()
    assert header.split()[:5] == ["NAME", "JOB", "TYPE", "JOB", "NAME"]
    assert row.split()[:6] == [made["metadata"]["name"], "paddlejob", "job",
                               "queue", queues.name, "ADMITTED"]

    # stopped (its Workload deactivated): Kueue evicts it, trainop stops the job
    kueuectl(external, "stop", "workload", made["metadata"]["name"], "-n", kube.ns)
    evicted = queues.wait_condition("PaddleJob", "job", "Evicted")
    assert evicted["reason"] == "Deactivated"
    wait_for("the job suspended", lambda: kube.job("PaddleJob", "job")["spec"]["runPolicy"]
             .get("suspend"))
    wait_for("its pods gone", lambda: pods_of(kube, "job") == [])
    wait_for("the quota given back", lambda: condition_of(
        queues.workload("PaddleJob", "job"), "QuotaReserved", "False"))
    # resumed: admitted again, and it runs
    kueuectl(external, "resume", "workload", made["metadata"]["name"], "-n", kube.ns)
    wait_pods_of(kube, "job", replicas)
    assert not kube.job("PaddleJob", "job")["spec"]["runPolicy"]["suspend"]


@pytest.mark.parametrize("name", ["../../../../api/v1/namespaces/kube-system/secrets",
                                  "x?watch=true"])
def test_a_priority_class_name_is_never_a_path_of_the_authors_choosing(
        ext_kube: Kube, ext_queues: Queues, name: str) -> None:
    # the name is looked up to give the Workload its priority, as the manager's account:
    # joined into the path as written it read every Secret, or held a watch open
    kube, queues = ext_kube, ext_queues
    queues.create(cpu="3")
    kube.apply(queued("PyTorchJob", "sly", spec={"runPolicy": {"schedulingPolicy": {
        "priorityClass": name}}}))
    told = wait_for("the job told why it has no Workload", lambda: next(
        (m for r, m in events(kube, "sly") if r == "FailedToCreateWorkload"), None))
    assert told == f"priority class {name!r} is not a valid name"
    assert queues.workload("PyTorchJob", "sly") is None
    assert pods_of(kube, "sly") == []
