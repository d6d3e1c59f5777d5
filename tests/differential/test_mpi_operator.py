"""mpi-operator v0.8.2 beside trainop on trainop's one MPIJob CRD: the same v2beta1 manifest
in two namespaces, one each. mpi-operator reads and writes its jobs at v2beta1 through
trainop's conversion; kube-controller-manager's Job controllers run both sides' launcher
Jobs. What the two make and say is compared: the SSH design's objects, the launcher Job and
the pods' labels are the same, and so is how a job succeeds, fails by its launcher, and is
suspended and resumed."""

from __future__ import annotations

import json
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from testbed import mpioperator
from testbed.apiserver import TestAPIServer
from testbed.jobcontrollers import JobControllers
from tests.conftest import CRDS, SA_GROUPS, SA_TOKEN, SA_USER
from tests.differential.conftest import PODGROUPS
from tests.integration.kube import Kube, converting_manager, install_rbac, wait_for
from tests.require import cannot_run
from trainop.local.ports import free_port

pytestmark = pytest.mark.differential
V2 = "mpijobs.v2beta1.kubeflow.org"
METRICS: dict[str, int] = {}
"""Each side's metrics port on loopback, by its namespace."""
TEMPLATE = {"spec": {"containers": [{"name": "mpi", "image": "mpi:1"}]}}


@pytest.fixture(scope="module")
def beside(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kube, Kube]]:
    """(mpi-operator's namespace, trainop's), on an API server of their own."""
    yield from side_by_side(tmp_path_factory.mktemp("mpi-operator"), [], [])


def side_by_side(tmp: Path, theirs_args: list[str], ours_args: list[str]
                 ) -> Iterator[tuple[Kube, Kube]]:
    """mpi-operator (`theirs_args`) and trainop (`ours_args`) each in a namespace of its
    own on one API server (trainop's CRDs, the PodGroup kinds' too), Job controllers
    running their launcher Jobs; (mpi-operator's namespace, trainop's)."""
    if not mpioperator.binary().is_file():
        cannot_run(f"mpi-operator is not built: {mpioperator.binary()} (hack/test-assets.sh)")
    with TestAPIServer(users={SA_TOKEN: (SA_USER, SA_GROUPS)}) as api:
        api.kubectl("apply", "--server-side", "-k", str(CRDS))
        api.kubectl("apply", "--server-side", "-f", str(PODGROUPS))
        api.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        install_rbac(api)
        tag = uuid.uuid4().hex[:6]
        theirs, ours = Kube(api, f"mpi-operator-{tag}"), Kube(api, f"trainop-{tag}")
        manager = converting_manager(api, tmp, "--namespace", ours.ns, *ours_args)
        jobs = JobControllers(api, tmp / "job-controllers.log")
        port = free_port()
        operator = mpioperator.MPIOperator(api, "--namespace", theirs.ns, "--monitoring-port",
                                           str(port), *theirs_args,
                                           log_path=tmp / "mpi-operator.log")
        METRICS.update({theirs.ns: port, ours.ns: manager.metrics_port})
        try:
            jobs.wait_ready()
            operator.wait_ready()
            yield theirs, ours
        finally:
            operator.stop()
            jobs.stop()
            manager.stop()


def submit(kube: Kube, doc: dict[str, Any]) -> None:
    doc = {**doc, "metadata": {**doc["metadata"], "namespace": kube.ns}}
    kube.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump(doc))


def test_one_v2beta1_job_each(beside: tuple[Kube, Kube]) -> None:
    theirs, ours = beside
    job = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": "pi"},
           "spec": {"slotsPerWorker": 2, "mpiReplicaSpecs": {
               "Launcher": {"replicas": 1, "template": TEMPLATE},
               "Worker": {"replicas": 2, "template": TEMPLATE}}}}
    for side in beside:
        submit(side, job)
    for side in beside:
        wait_for(f"{side.ns}'s workers", lambda s=side: {"pi-worker-0", "pi-worker-1"} <= set(
            s.names("pods")) or None, 60)
        wait_for(f"{side.ns}'s config", lambda s=side: s.get("configmap", "pi-config"), 30)
    # the same: the workers, the headless Service, the SSH key, the hostfile's entries
    for resource in ("services", "secrets"):
        assert theirs.names(resource) == ours.names(resource), resource
    hosts = {side.ns: side.get("configmap", "pi-config")["data"]["hostfile"].replace(
        side.ns, "NS") for side in beside}
    assert hosts[theirs.ns] == hosts[ours.ns] == (
        "pi-worker-0.pi.NS.svc slots=2\npi-worker-1.pi.NS.svc slots=2\n")
    secret = theirs.get("secret", "pi-ssh")
    assert secret["type"] == ours.get("secret", "pi-ssh")["type"] == "kubernetes.io/ssh-auth"
    # the same labels (mpi-operator's) on the workers, and on the launcher's pod (which the
    # Job controller labels too)
    for name in ("pi-worker-0", "pi-worker-1"):
        assert theirs.get("pod", name)["metadata"]["labels"] == ours.get("pod", name)[
            "metadata"]["labels"], name
    launchers = [side.get("pod", wait_for(f"{side.ns}'s launcher pod", lambda s=side:
                                          launcher_pod(s, "pi"), 60)) for side in beside]
    assert [{k: v for k, v in pod["metadata"]["labels"].items()
             if k.startswith("training.kubeflow.org/")} for pod in launchers] == [{
        "training.kubeflow.org/job-name": "pi", "training.kubeflow.org/job-role": "launcher",
        "training.kubeflow.org/operator-name": "mpi-operator"}] * 2
    # the launcher: a batch/v1 Job on each side, of the same shape
    launchers = [launcher_job(side, "pi") for side in beside]
    assert launchers[0] == launchers[1], differing(launchers[0], launchers[1])
    assert launchers[1]["spec"]["podReplacementPolicy"] == "Failed"
    assert ours.get("pod", "pi-launcher") is None
    # mpi-operator's `app` label on its other objects; trainop's adds the two it watches by
    for resource, name in (("configmap", "pi-config"), ("secret", "pi-ssh"),
                           ("service", "pi"), ("jobs.batch", "pi-launcher")):
        labels = [side.get(resource, name)["metadata"]["labels"] for side in beside]
        assert labels[0] == {"app": "pi"}, resource
        assert labels[1] == {**labels[0], "training.kubeflow.org/job-name": "pi",
                             "training.kubeflow.org/operator-name": "mpi-operator"}, resource
    # mpi-operator writes its status at v2beta1, through trainop's conversion
    status = json.loads(theirs.kubectl("get", V2, "pi", "-o", "json"))["status"]
    assert status["conditions"][0]["type"] == "Created"
    assert status["conditions"][0]["reason"] == "MPIJobCreated"


def test_mpi_operator_meets_no_error_on_the_shared_crd(beside: tuple[Kube, Kube]) -> None:
    # it reads and writes its jobs at v2beta1 through trainop's conversion: no Warning of
    # its own (a failed create, a status it could not write) on the job of the test above
    theirs, _ = beside
    events = json.loads(theirs.kubectl("get", "events", "-o", "json"))["items"]
    assert events and not [e for e in events if e["type"] == "Warning"], events


def v2beta1_job(name: str) -> dict[str, Any]:
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": name},
            "spec": {"mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": TEMPLATE},
                "Worker": {"replicas": 2, "template": TEMPLATE}}}}


def launcher_job(kube: Kube, job: str) -> dict[str, Any]:
    """The side's launcher Job as a client compares it: its spec less what the API server
    generates (the selector, the Job controller's labels), the pod's environment by name,
    with the namespace written NS."""
    made = wait_for(f"{kube.ns}'s launcher Job", lambda: kube.get(
        "jobs.batch", f"{job}-launcher"), 60)
    spec = json.loads(json.dumps(made["spec"]).replace(kube.ns, "NS"))
    spec.pop("selector", None)
    template = spec["template"]
    template["metadata"]["labels"] = {k: v for k, v in template["metadata"]["labels"].items()
                                      if "controller-uid" not in k
                                      and k not in ("job-name", "batch.kubernetes.io/job-name")}
    template["metadata"].pop("ownerReferences", None)  # mpi-operator's quirk (docs)
    for c in template["spec"]["containers"]:
        c["env"] = [f"{e['name']}={e.get('value')}" for e in c.get("env") or []]
    owner = made["metadata"]["ownerReferences"][0]
    return {"spec": spec, "owner": {k: owner[k] for k in ("apiVersion", "kind", "controller")}}


def differing(theirs: Any, ours: Any, path: str = "") -> list[str]:
    """The paths where two JSON values differ, each with both sides' values."""
    if isinstance(theirs, dict) and isinstance(ours, dict):
        return [d for k in sorted(theirs.keys() | ours.keys())
                for d in differing(theirs.get(k, "(none)"), ours.get(k, "(none)"),
                                   f"{path}.{k}")]
    if isinstance(theirs, list) and isinstance(ours, list) and len(theirs) == len(ours):
        return [d for i, (a, b) in enumerate(zip(theirs, ours, strict=True))
                for d in differing(a, b, f"{path}[{i}]")]
    return [] if theirs == ours else [f"{path}: {theirs!r} != {ours!r}"]


def launcher_pod(kube: Kube, job: str) -> str | None:
    """The launcher's pod, which its Job made (`<job>-launcher-<random>`)."""
    names = [n for n in kube.names("pods") if n.startswith(f"{job}-launcher-")]
    return names[0] if len(names) == 1 else None


def running(kube: Kube, job: str) -> None:
    """Every pod of `job` Running (its two workers and its launcher), as a kubelet says."""
    wait_for(f"{kube.ns}'s workers", lambda: {f"{job}-worker-0", f"{job}-worker-1"} <= set(
        kube.names("pods")) or None, 60)
    launcher = wait_for(f"{kube.ns}'s launcher pod", lambda: launcher_pod(kube, job), 60)
    for name in (f"{job}-worker-0", f"{job}-worker-1", launcher):
        kube.set_pod(name, "Running")


def conditions(kube: Kube, job: str) -> list[dict[str, str]]:
    status = json.loads(kube.kubectl("get", V2, job, "-o", "json")).get("status", {})
    return [{k: c[k] for k in ("type", "status", "reason", "message")}
            for c in status.get("conditions", [])]


def wait_condition(kube: Kube, job: str, ctype: str, status: str = "True"
                   ) -> list[dict[str, str]]:
    return wait_for(f"{kube.ns}'s {job} {ctype}={status}", lambda: (lambda cs: cs if any(
        c["type"] == ctype and c["status"] == status for c in cs) else None)(
        conditions(kube, job)), 60)


def running_each(beside: tuple[Kube, Kube], doc: dict[str, Any]) -> None:
    """The job of `doc` submitted on each side, and Running there (every pod runs)."""
    for side in beside:
        submit(side, doc)
    for side in beside:
        running(side, doc["metadata"]["name"])
        wait_condition(side, doc["metadata"]["name"], "Running")
    assert same_replica_statuses(beside, doc["metadata"]["name"]) == {
        "Launcher": {"active": 1}, "Worker": {"active": 2}}


def test_a_v2beta1_job_that_succeeds_each(beside: tuple[Kube, Kube]) -> None:
    theirs, ours = beside
    running_each(beside, v2beta1_job("ok"))
    for side in beside:
        side.set_pod(launcher_pod(side, "ok") or "", "Succeeded", exit_code=0)
    done = {side.ns: wait_condition(side, "ok", "Succeeded") for side in beside}
    # the same conditions, in the same order, state and words
    assert in_any_namespace(done[theirs.ns], theirs) == in_any_namespace(done[ours.ns], ours)
    assert [(c["type"], c["status"]) for c in done[ours.ns]] == [
        ("Created", "True"), ("Running", "False"), ("Succeeded", "True")]
    assert done[ours.ns][-1]["message"] == f"MPIJob {ours.ns}/ok successfully completed."
    # the launcher's, and no worker counted once it completed (mpi-operator lists them no
    # more: its running workers are not counted as succeeded)
    assert same_replica_statuses(beside, "ok") == {"Launcher": {"succeeded": 1}, "Worker": {}}
    # and the same events (mpi-operator tells Running on every reconcile, trainop once)
    assert told(theirs, "ok") == told(ours, "ok") == {
        ("Normal", "MPIJobCreated", "MPIJob NS/ok is created."),
        ("Normal", "MPIJobRunning", "MPIJob NS/ok is running"),
        ("Normal", "MPIJobSucceeded", "MPIJob NS/ok successfully completed.")}


def replica_statuses(kube: Kube, job: str) -> Any:
    return json.loads(kube.kubectl("get", V2, job, "-o", "json")).get("status", {}).get(
        "replicaStatuses")


def same_replica_statuses(beside: tuple[Kube, Kube], job: str) -> Any:
    """Both sides' `status.replicaStatuses` of `job`, once they agree (each operator
    writes at its own pace; an AssertionError with both if they do not within 30 s)."""
    seen: list[Any] = []

    def agree() -> Any:
        seen[:] = [replica_statuses(side, job) for side in beside]
        return {"statuses": seen[1]} if seen[0] == seen[1] else None

    try:
        return wait_for(f"{job}'s replica statuses alike", agree, 30)["statuses"]
    except AssertionError:
        raise AssertionError(f"replicaStatuses: mpi-operator's {seen[0]} != {seen[1]}") from None


def in_any_namespace(conds: list[dict[str, str]], kube: Kube) -> list[dict[str, str]]:
    """The conditions with the namespace in their messages written NS."""
    return [{**c, "message": c["message"].replace(f"{kube.ns}/", "NS/")} for c in conds]


def told(kube: Kube, job: str) -> set[tuple[str, str, str]]:
    """The MPIJob's events (type, reason, message; the namespace written NS), each
    checked whole: about the job at v2beta1 in its namespace, told by mpi-operator's
    component. How often is not compared: mpi-operator tells
    `MPIJobRunning` again on every reconcile, so its count is how often it reconciled."""
    events = json.loads(kube.kubectl("get", "events", "-o", "json"))["items"]
    mine = [e for e in events if e["involvedObject"]["kind"] == "MPIJob"
            and e["involvedObject"]["name"] == job]
    for e in mine:
        assert {k: e["involvedObject"].get(k) for k in ("apiVersion", "namespace", "fieldPath")
                } == {"apiVersion": "kubeflow.org/v2beta1", "namespace": kube.ns,
                      "fieldPath": None}, e
        # (client-go's recorder reports as its source's component: event.go makeEvent)
        assert (e["source"], e.get("reportingComponent"), e.get("reportingInstance") or "") == (
            {"component": "mpi-job-controller"}, "mpi-job-controller", ""), e
    return {(e["type"], e["reason"], e["message"].replace(f"{kube.ns}/", "NS/"))
            for e in mine}


def test_a_v2beta1_job_suspended_and_resumed_each(beside: tuple[Kube, Kube]) -> None:
    theirs, ours = beside
    running_each(beside, v2beta1_job("pause"))
    paused = v2beta1_job("pause")
    paused["spec"]["runPolicy"] = {"suspend": True}
    for side in beside:
        submit(side, paused)
    for side in beside:  # every pod gone: the workers, the launcher's (its Job suspended)
        wait_for(f"{side.ns}'s pods gone", lambda s=side: not [
            n for n in s.names("pods") if n.startswith("pause-")], 60)
    suspended = {side.ns: wait_condition(side, "pause", "Suspended") for side in beside}
    assert in_any_namespace(suspended[theirs.ns], theirs) == in_any_namespace(
        suspended[ours.ns], ours)
    assert same_replica_statuses(beside, "pause") == {"Launcher": {}, "Worker": {}}
    running_now = next(c for c in suspended[ours.ns] if c["type"] == "Running")
    assert (running_now["status"], running_now["reason"]) == ("False", "MPIJobSuspended")
    launcher = theirs.get("jobs.batch", "pause-launcher")
    assert launcher["spec"]["suspend"] is True
    for side in beside:
        submit(side, v2beta1_job("pause"))
    resumed = {}
    for side in beside:  # made again
        running(side, "pause")
        resumed[side.ns] = wait_condition(side, "pause", "Running")
    assert in_any_namespace(resumed[theirs.ns], theirs) == in_any_namespace(
        resumed[ours.ns], ours)
    assert next(c for c in resumed[ours.ns] if c["type"] == "Suspended")["reason"] == (
        "MPIJobResumed")
    assert told(theirs, "pause") == told(ours, "pause") == {
        ("Normal", "MPIJobCreated", "MPIJob NS/pause is created."),
        ("Normal", "MPIJobRunning", "MPIJob NS/pause is running"),
        ("Normal", "MPIJobSuspended", "MPIJob suspended"),
        ("Normal", "MPIJobResumed", "MPIJob resumed")}


def test_a_v2beta1_job_whose_launcher_fails_each(beside: tuple[Kube, Kube]) -> None:
    theirs, ours = beside
    doc = v2beta1_job("bad")
    doc["spec"]["runPolicy"] = {"backoffLimit": 0}
    running_each(beside, doc)
    for side in beside:
        side.set_pod(launcher_pod(side, "bad") or "", "Failed", exit_code=1)
    failed = {side.ns: wait_condition(side, "bad", "Failed") for side in beside}
    # the Job's reason and message, with its newest failed pod's (none here)
    assert in_any_namespace(failed[theirs.ns], theirs) == in_any_namespace(
        failed[ours.ns], ours)
    last = failed[ours.ns][-1]
    assert (last["type"], last["reason"], last["message"]) == (
        "Failed", "BackoffLimitExceeded/", "Job has reached the specified backoff limit: ")
    assert told(theirs, "bad") == told(ours, "bad")
    assert same_replica_statuses(beside, "bad") == {"Launcher": {"failed": 1}, "Worker": {}}
    # the difference the README names: with cleanPodPolicy None, mpi-operator leaves the
    # workers running sshd for ever; trainop stops them
    workers = {f"bad-worker-{i}" for i in (0, 1)}
    assert workers <= set(theirs.names("pods"))
    wait_for("trainop's workers gone", lambda: not workers & set(ours.names("pods")), 30)


def test_a_v2beta1_job_with_an_evicted_worker_each(beside: tuple[Kube, Kube]) -> None:
    theirs, ours = beside
    running_each(beside, v2beta1_job("evict"))
    for side in beside:
        side.kubectl("patch", "pod", "evict-worker-0", "--subresource=status", "--type=merge",
                     "-p", json.dumps({"status": {
                         "phase": "Failed", "reason": "Evicted",
                         "message": "The node was low on resource: memory."}}))
    failed = {side.ns: wait_condition(side, "evict", "Failed") for side in beside}
    assert in_any_namespace(failed[theirs.ns], theirs) == in_any_namespace(
        failed[ours.ns], ours)
    last = failed[ours.ns][-1]
    assert (last["reason"], last["message"]) == ("MPIJobEvicted", "1/2 workers are evicted")
    assert told(theirs, "evict") == told(ours, "evict")


def test_a_v2beta1_job_suspended_from_the_start_each(beside: tuple[Kube, Kube]) -> None:
    # as Kueue queues one: what its pods need is made, and its launcher Job, suspended
    doc = v2beta1_job("queued")
    doc["spec"]["runPolicy"] = {"suspend": True}
    for side in beside:
        submit(side, doc)
    launchers = [launcher_job(side, "queued") for side in beside]
    assert launchers[0] == launchers[1], differing(launchers[0], launchers[1])
    assert launchers[1]["spec"]["suspend"] is True
    assert same_replica_statuses(beside, "queued") == {"Launcher": {}, "Worker": {}}
    for side in beside:
        assert side.get("configmap", "queued-config") and side.get("secret", "queued-ssh")
        assert side.get("service", "queued") is not None
        assert not [n for n in side.names("pods") if n.startswith("queued-")]
    # resumed: the workers, and the launcher's pod, which its Job now makes
    running_each(beside, v2beta1_job("queued"))


def test_a_v2beta1_launcher_that_waits_for_its_workers_each(beside: tuple[Kube, Kube]) -> None:
    doc = v2beta1_job("wait")
    doc["spec"]["launcherCreationPolicy"] = "WaitForWorkersReady"
    for side in beside:
        submit(side, doc)
    for side in beside:
        wait_for(f"{side.ns}'s workers", lambda s=side: {"wait-worker-0", "wait-worker-1"} <= set(
            s.names("pods")) or None, 60)
    time.sleep(3)  # a few reconciles: neither makes the launcher Job yet
    assert [side.get("jobs.batch", "wait-launcher") for side in beside] == [None, None]
    for side in beside:
        for name in ("wait-worker-0", "wait-worker-1"):
            side.set_pod(name, "Running")  # its container ready, the pod not Ready yet
            side.kubectl("patch", "pod", name, "--subresource=status", "--type=merge", "-p",
                         json.dumps({"status": {"conditions": [
                             {"type": "Ready", "status": "False"}]}}))
    # a readiness gate or probe keeps the pod's Ready condition False: not ready, on
    # either side (mpi-operator's isPodReady reads the condition)
    time.sleep(3)
    assert [side.get("jobs.batch", "wait-launcher") for side in beside] == [None, None]
    for side in beside:
        for name in ("wait-worker-0", "wait-worker-1"):
            side.kubectl("patch", "pod", name, "--subresource=status", "--type=merge", "-p",
                         json.dumps({"status": {"conditions": [
                             {"type": "Ready", "status": "True"}]}}))
    launchers = [launcher_job(side, "wait") for side in beside]
    assert launchers[0] == launchers[1], differing(launchers[0], launchers[1])


def test_a_v2beta1_launcher_that_runs_as_a_worker_each(beside: tuple[Kube, Kube]) -> None:
    # the launcher hosts rank 0: first in the hostfile, replica-index 0, its GPUs kept
    doc = v2beta1_job("lw")
    doc["spec"]["runLauncherAsWorker"] = True
    for side in beside:
        submit(side, doc)
    launchers = [launcher_job(side, "lw") for side in beside]
    assert launchers[0] == launchers[1], differing(launchers[0], launchers[1])
    assert launchers[1]["spec"]["template"]["metadata"]["labels"][
        "training.kubeflow.org/replica-index"] == "0"
    # the hostfile lists every host; discover_hosts.sh those that run
    config = [{k: v.replace(side.ns, "NS") for k, v in side.get(
        "configmap", "lw-config")["data"].items()} for side in beside]
    assert config[0] == config[1]
    for side in beside:
        running(side, "lw")
    discovered = [wait_for(f"{side.ns}'s workers discovered", lambda s=side: (
        lambda text: text.replace(s.ns, "NS") if text.count("echo") == 3 else None)(
        s.get("configmap", "lw-config")["data"]["discover_hosts.sh"]), 30) for side in beside]
    assert discovered[0] == discovered[1]
    for name in ("lw-worker-0", "lw-worker-1"):
        labels = [side.get("pod", name)["metadata"]["labels"] for side in beside]
        assert labels[0] == labels[1], name


def test_a_v2beta1_jobs_deadline_and_ttl_each(beside: tuple[Kube, Kube]) -> None:
    # both the launcher Job's: the Job controller ends it, then deletes it; the MPIJob stays
    theirs, ours = beside
    doc = v2beta1_job("late")
    doc["spec"]["runPolicy"] = {"activeDeadlineSeconds": 5, "ttlSecondsAfterFinished": 2}
    for side in beside:
        submit(side, doc)
    failed = {side.ns: wait_condition(side, "late", "Failed") for side in beside}
    assert in_any_namespace(failed[theirs.ns], theirs) == in_any_namespace(
        failed[ours.ns], ours)
    # it never ran: Running False after the end, on both sides
    assert [(c["type"], c["status"], c["reason"]) for c in failed[ours.ns]] == [
        ("Created", "True", "MPIJobCreated"), ("Failed", "True", "DeadlineExceeded"),
        ("Running", "False", "MPIJobRunning")]
    assert failed[ours.ns][1]["message"] == "Job was active longer than specified deadline"
    for side in beside:  # (in the foreground: no garbage collector here deletes its pod)
        wait_for(f"{side.ns}'s launcher Job deleted by its TTL", lambda s=side: deleted(
            s, "late-launcher"), 60)
    time.sleep(3)
    for side in beside:  # not made again, and the MPIJob is kept
        assert deleted(side, "late-launcher")
        assert side.get(V2, "late") is not None
    assert told(theirs, "late") == told(ours, "late")


def deleted(kube: Kube, job: str) -> bool:
    """Whether batch/v1 Job `job` is gone or going."""
    there = kube.get("jobs.batch", job)
    return there is None or bool(there["metadata"].get("deletionTimestamp"))


def samples(kube: Kube, prefix: str) -> list[Any]:
    """The side's operator's metric samples whose names start with `prefix`."""
    with urllib.request.urlopen(f"http://127.0.0.1:{METRICS[kube.ns]}/metrics",
                                timeout=10) as r:
        text = r.read().decode()
    return [s for family in text_string_to_metric_families(text) for s in family.samples
            if s.name.startswith(prefix)]


def counters(kube: Kube) -> dict[str, float]:
    """mpi-operator's job counters as the side's operator shows them."""
    return {s.name: s.value for s in samples(kube, "mpi_operator_jobs_")}


def test_the_same_job_counters_each(beside: tuple[Kube, Kube]) -> None:
    # after the jobs above (each operator sees only its namespace): mpi-operator's counters,
    # for the jobs written in its API; trainop counts each job once, mpi-operator at least
    # once (it counts one again when its first status write conflicts, or when a later
    # reconcile sees the launcher complete again: a loaded machine shows it)
    theirs, ours = beside
    mine = counters(ours)
    assert mine == {"mpi_operator_jobs_created_total": 9.0,
                    "mpi_operator_jobs_successful_total": 1.0,
                    "mpi_operator_jobs_failed_total": 2.0}
    assert all(mine[name] <= n for name, n in counters(theirs).items())
    assert counters(theirs).keys() == mine.keys()
    # and the same mpi_operator_job_info: 1 for each launcher Job, in its namespace
    info = [{(s.labels["launcher"], s.labels["namespace"].replace(side.ns, "NS"), s.value)
             for s in samples(side, "mpi_operator_job_info")} for side in beside]
    assert info[0] == info[1] == {(f"{job}-launcher", "NS", 1.0)
                                  for job in ("pi", "ok", "pause", "bad", "evict", "queued",
                                              "wait", "lw", "late")}
