"""Faults the manager must survive: its own crash, API server restarts, expired watches,
throttling, leader failover; plus what it must never do (duplicate pods, leak keys,
create outside the job's namespace, serve metrics to strangers)."""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from testbed.apiserver import TestAPIServer
from tests.conftest import CRDS
from tests.integration.kube import REPO, Kube, Manager, wait_for
from tests.jobs import manifest

pytestmark = pytest.mark.integration


USER_TOKEN = "plain-user-token"
"""A cluster-admin that is not in system:masters (whom max-inflight limits never apply to)."""


def private_api(*args: str) -> Iterator[TestAPIServer]:
    with TestAPIServer(extra_args=list(args),
                       users={USER_TOKEN: ("plain-admin", ["system:authenticated"])}) as api:
        api.kubectl("create", "clusterrolebinding", "plain-admin", "--clusterrole=cluster-admin",
                    "--user=plain-admin")
        api.kubectl("apply", "--server-side", "-k", str(CRDS))
        api.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        yield api


@pytest.fixture
def own_api() -> Iterator[TestAPIServer]:
    """A private API server, for tests that restart it."""
    yield from private_api()


@pytest.fixture
def throttled_api() -> Iterator[TestAPIServer]:
    """A private API server that serves very few requests at once (429 beyond)."""
    yield from private_api("--enable-priority-and-fairness=false", "--max-requests-inflight=4",
                           "--max-mutating-requests-inflight=1")


def kubelet(api: TestAPIServer, run_seconds: float, log: Path) -> subprocess.Popen[bytes]:
    # (testbed is imported from the checkout, not installed)
    return subprocess.Popen([sys.executable, "-m", "testbed.kubelet", "--kubeconfig",
                             str(api.kubeconfig), "--run-seconds", str(run_seconds)],
                            stdout=open(log, "wb"), stderr=subprocess.STDOUT, cwd=REPO)


def test_sigkill_during_creation_then_restart_makes_exactly_the_pods(
        kube: Kube, start_manager: Callable[..., Manager]) -> None:
    slow = ("--kube-api-qps", "40", "--kube-api-burst", "10")
    first = start_manager(*slow)
    kube.apply(manifest("PyTorchJob", {"Master": 1, "Worker": 299}, name="big"))
    wait_for("some pods", lambda: len(kube.names("pods")) >= 30, 60)
    first.proc.send_signal(signal.SIGKILL)
    first.proc.wait()
    made = len(kube.names("pods"))
    assert 30 <= made < 300, made
    start_manager()
    pods = kube.wait_pods(300, timeout=120)
    assert len(pods) == len(set(pods)) == 300
    wait_for("300 services", lambda: len(kube.names("services")) == 300, 60)
    kube.set_all("Succeeded", prefix="big-master", exit_code=0)
    kube.wait_condition("PyTorchJob", "big", "Succeeded", timeout=60)
    assert len(kube.names("pods")) == 300


def test_api_server_restart_changes_made_meanwhile_are_seen(own_api: TestAPIServer,
                                                            tmp_path: Path) -> None:
    kube = Kube(own_api)
    m = Manager(own_api, "--namespace", kube.ns, log_dir=tmp_path).wait_ready()
    try:
        for name in ("a", "b"):
            kube.apply(manifest("JAXJob", {"Worker": 2}, name=name))
        kube.wait_pods(4)
        kube.set_all("Running")
        kube.wait_condition("JAXJob", "a", "Running")
        own_api.stop_apiserver()
        time.sleep(2)
        own_api.start_apiserver()
        # straight away, before the manager's back-off lets it reconnect
        kube.set_all("Succeeded", prefix="a-", exit_code=0)
        kube.set_pod("b-worker-1", "Failed", exit_code=3)
        kube.wait_condition("JAXJob", "a", "Succeeded", timeout=60)
        failed = kube.wait_condition("JAXJob", "b", "Failed", timeout=60)
        assert "pod b-worker-1 exited with code 3" in failed["message"]
        assert "connection lost" in m.log()
    finally:
        m.stop()


def test_watch_expiry_relists_and_misses_nothing(own_api: TestAPIServer, tmp_path: Path) -> None:
    kube = Kube(own_api)
    m = Manager(own_api, "--namespace", kube.ns, log_dir=tmp_path).wait_ready()
    try:
        kube.apply(manifest("JAXJob", {"Worker": 3}, name="jx"))
        kube.wait_pods(3)
        kube.set_all("Running")
        kube.wait_condition("JAXJob", "jx", "Running")
        uid = kube.get("pod", "jx-worker-2")["metadata"]["uid"]
        os.kill(m.proc.pid, signal.SIGSTOP)  # the manager hears nothing from here on
        try:
            kube.kubectl("delete", "pod", "jx-worker-2", "--wait=false")
            kube.set_pod("jx-worker-0", "Succeeded", exit_code=0)
            kube.set_pod("jx-worker-1", "Succeeded", exit_code=0)
            own_api.etcd_compact()
            own_api.stop_apiserver()  # drop its watch cache: old versions are gone for good
            own_api.start_apiserver()
        finally:
            os.kill(m.proc.pid, signal.SIGCONT)
        wait_for("a new jx-worker-2", lambda: (p := kube.get("pod", "jx-worker-2")) and
                 p["metadata"]["uid"] != uid, 60)
        status = wait_for("succeeded counted", lambda: (s := kube.job("JAXJob", "jx")[
            "status"])["replicaStatuses"]["Worker"].get("succeeded") == 2 and s, 60)
        assert status["replicaStatuses"]["Worker"]["succeeded"] == 2
        wait_for("a re-list", lambda: m.metric("trainop_informer_relists_total") > 0, 30)
        assert "410 Gone" in m.log() or "re-listing" in m.log()
    finally:
        m.stop()


def test_throttled_api_server_every_job_completes_without_a_storm(
        throttled_api: TestAPIServer, tmp_path: Path) -> None:
    kube = Kube(throttled_api)
    k = kubelet(throttled_api, 1, tmp_path / "kubelet.log")
    user = throttled_api.kubeconfig_for(USER_TOKEN, tmp_path / "user.kubeconfig")
    m = Manager(throttled_api, "--kubeconfig", str(user), "--namespace", kube.ns,
                "--kube-api-qps", "0", "--controller-threads", "32",
                log_dir=tmp_path).wait_ready()
    try:
        docs = [manifest("JAXJob", {"Worker": 2}, name=f"j{i}") for i in range(100)]
        for doc in docs:
            doc["metadata"].pop("uid")
            doc["metadata"]["namespace"] = kube.ns
        kube.kubectl("apply", "-f", "-", input=json.dumps(
            {"apiVersion": "v1", "kind": "List", "items": docs}))

        def succeeded() -> int:
            items = kube.get("jaxjobs.kubeflow.org")["items"]
            return sum(1 for j in items if any(c["type"] == "Succeeded" and c["status"] == "True"
                                               for c in (j.get("status") or {}).get(
                                                   "conditions") or [])) == 100
        wait_for("100 jobs Succeeded", succeeded, 300, every=2)
        throttled = m.metric("trainop_api_requests_total", code="429")
        total = m.metric("trainop_api_requests_total")
        # 100 jobs x (2 pods + 2 services + ~3 status writes + events): about 1,000 writes
        print(f"requests {total:.0f}, throttled (429) {throttled:.0f}")
        assert throttled > 0, "the API server never throttled: the test proves nothing"
        assert total < 3000, (total, throttled)
    finally:
        m.stop()
        k.terminate()
        k.wait()


def test_leader_failover_under_load_duplicates_nothing(
        kube: Kube, start_manager: Callable[..., Manager]) -> None:
    args = ("--leader-elect", "--leader-election-namespace", kube.ns, "--lease-duration", "4",
            "--renew-deadline", "3", "--retry-period", "0.5", "--kube-api-qps", "60",
            "--kube-api-burst", "10")
    first = start_manager(*args)
    wait_for("first leads", lambda: "became leader" in first.log())
    second = start_manager(*args)
    kube.apply(manifest("PyTorchJob", {"Master": 1, "Worker": 199}, name="big"))
    wait_for("creation under way", lambda: len(kube.names("pods")) >= 20, 60)
    first.proc.send_signal(signal.SIGKILL)
    first.proc.wait()
    killed = time.monotonic()
    wait_for("second leads", lambda: "became leader" in second.log(), 15)
    assert time.monotonic() - killed <= 4 + 0.5 + 1.5
    pods = kube.wait_pods(200, timeout=120)
    assert len(set(pods)) == 200
    time.sleep(1)
    assert len(kube.names("pods")) == 200


def test_foreign_pods_with_our_labels_are_left_alone(kube: Kube, manager: Manager) -> None:
    kube.apply(manifest("JAXJob", {"Worker": 1}, name="jx"))
    kube.wait_pods(1)
    stranger = {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "jx-worker-5", "namespace": kube.ns, "labels": {
            "training.kubeflow.org/job-name": "jx", "training.kubeflow.org/replica-type": "worker",
            "training.kubeflow.org/replica-index": "5"},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                             "uid": "0000", "controller": True}]},
        "spec": {"containers": [{"name": "c", "image": "i"}]}}
    kube.kubectl("apply", "-f", "-", input=json.dumps(stranger))
    kube.set_all("Succeeded", prefix="jx-worker-0", exit_code=0)
    kube.wait_condition("JAXJob", "jx", "Succeeded")
    assert "jx-worker-5" in kube.names("pods")  # not counted, not deleted
    assert kube.job("JAXJob", "jx")["status"]["replicaStatuses"]["Worker"]["succeeded"] == 1


def test_ssh_keys_live_in_an_owned_secret_and_are_never_logged(kube: Kube,
                                                               manager: Manager) -> None:
    kube.apply(manifest("MPIJob", {"Launcher": 1, "Worker": 2}, name="mpi",
                        spec={"transport": "SSH"}))
    kube.wait_pods(3)
    secret = wait_for("secret", lambda: kube.get("secret", "mpi-ssh"))
    uid = kube.job("MPIJob", "mpi")["metadata"]["uid"]
    assert secret["metadata"]["ownerReferences"][0]["uid"] == uid
    import base64
    private = base64.b64decode(secret["data"]["ssh-privatekey"]).decode()
    assert private.startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
    body = private.splitlines()[1]
    assert body not in manager.log() and "PRIVATE KEY" not in manager.log()
    assert all(body not in e.get("message", "") for e in kube.items("events"))


def test_a_template_cannot_send_pods_to_another_namespace(kube: Kube, manager: Manager) -> None:
    extra = {"Worker": {"template": {"metadata": {"namespace": "kube-system"}, "spec": {
        "containers": [{"name": "jax", "image": "i"}]}}}}
    kube.apply(manifest("JAXJob", {"Worker": 1}, name="jx", replica_extra=extra))
    kube.wait_pods(1)
    out = kube.api.kubectl("get", "pods", "-n", "kube-system", "-o", "name")
    assert "jx-worker-0" not in out.stdout


def test_metrics_can_require_authentication(apiserver: TestAPIServer, kube: Kube,
                                            start_manager: Callable[..., Manager],
                                            tmp_path: Path) -> None:
    from tests.conftest import SA_TOKEN

    m = start_manager("--metrics-secure")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE

    def scrape(token: str | None) -> int:
        req = urllib.request.Request(f"https://127.0.0.1:{m.metrics_port}/metrics")
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
                return int(r.status)
        except urllib.error.HTTPError as err:
            return int(err.code)

    assert scrape(None) == 401
    assert scrape("not-a-token") == 401
    assert scrape(SA_TOKEN) == 403  # authenticated, but not allowed to read /metrics
    assert scrape(apiserver.admin_token) == 200


def test_a_pod_in_another_namespace_naming_a_jobs_uid_is_not_its_replica(
        apiserver: TestAPIServer, kube: Kube, start_manager: Callable[..., Manager]) -> None:
    start_manager(namespace=False)  # one manager over every namespace
    kube.apply(manifest("JAXJob", {"Worker": 2}, name="jx"))
    kube.wait_pods(2)
    uid = kube.job("JAXJob", "jx")["metadata"]["uid"]
    other = Kube(apiserver)  # a namespace where someone may create pods, nothing more
    forged = {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "jx-worker-1", "namespace": other.ns, "labels": {
            "training.kubeflow.org/job-name": "jx", "training.kubeflow.org/replica-type": "worker",
            "training.kubeflow.org/replica-index": "1"},
        "ownerReferences": [{"apiVersion": "kubeflow.org/v1", "kind": "JAXJob", "name": "jx",
                             "uid": uid, "controller": True}]},
        "spec": {"containers": [{"name": "jax", "image": "i"}]}}
    other.kubectl("apply", "-f", "-", input=json.dumps(forged))
    other.set_pod("jx-worker-1", "Failed", exit_code=1)  # would fail the job, were it counted
    kube.set_all("Running")
    kube.wait_condition("JAXJob", "jx", "Running")
    kube.set_all("Succeeded", exit_code=0)
    kube.wait_condition("JAXJob", "jx", "Succeeded")
    assert kube.condition("JAXJob", "jx", "Failed") is None
    assert other.names("pods") == ["jx-worker-1"]  # untouched
    workers = kube.job("JAXJob", "jx")["status"]["replicaStatuses"]["Worker"]
    assert workers["succeeded"] == 2 and not workers.get("failed"), workers


def test_an_object_planted_under_a_jobs_name_is_never_adopted(kube: Kube,
                                                              manager: Manager) -> None:
    planted = {"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "mpi-config", "namespace": kube.ns},
               "data": {"hostfile": "attacker-host slots=1\n"}}
    kube.kubectl("apply", "-f", "-", input=json.dumps(planted))
    kube.apply(manifest("MPIJob", {"Launcher": 1, "Worker": 1}, name="mpi"))
    failed = kube.wait_condition("MPIJob", "mpi", "Failed")
    assert failed["reason"] == "CreateFailed"
    assert "ConfigMap mpi-config already exists and is not controlled by this job" in \
        failed["message"]
    assert kube.names("pods") == []  # no launcher mounts the planted script
    assert kube.get("configmap", "mpi-config")["data"] == planted["data"]
    assert any(e["reason"] == "CreateFailed" and "mpi-config" in e["message"]
               for e in kube.items("events"))


def test_a_flood_of_unknown_tokens_neither_starves_the_lease_nor_the_jobs(
        apiserver: TestAPIServer, kube: Kube, start_manager: Callable[..., Manager]) -> None:
    import concurrent.futures
    import uuid

    m = start_manager("--metrics-secure", "--leader-elect", "--leader-election-namespace",
                      kube.ns, "--leader-election-id", "flood")
    wait_for("leader", lambda: "became leader" in m.log())
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE

    def scrape(_: int) -> int:
        req = urllib.request.Request(f"https://127.0.0.1:{m.metrics_port}/metrics",
                                     headers={"Authorization": f"Bearer {uuid.uuid4().hex}"})
        try:
            with urllib.request.urlopen(req, context=ctx, timeout=30) as r:
                return int(r.status)
        except urllib.error.HTTPError as err:
            return int(err.code)

    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        flood = pool.map(scrape, range(600))
        kube.apply(manifest("JAXJob", {"Worker": 2}, name="jx"))  # meanwhile, work to do
        codes = list(flood)
        kube.wait_pods(2)
    assert set(codes) <= {401, 503} and codes.count(503) > 0, set(codes)
    lease = kube.get("lease", "flood")
    assert lease["spec"]["holderIdentity"] and "lost the lease" not in m.log()


def test_a_name_held_by_a_pod_no_cache_shows_is_looked_at_with_back_off(
        kube: Kube, manager: Manager) -> None:
    """A bare pod of the user's, deleted but kept by her finalizer, under a replica's name:
    the job names it (waitingReplicas, a NameInUse event) and looks at it again 1, 2, 4,
    8... seconds apart, one request a look, instead of a create and a list every second;
    once it is gone, the replica is made."""
    bare = {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "jx-worker-0", "namespace": kube.ns, "finalizers": ["example.com/keep"]},
        "spec": {"containers": [{"name": "c", "image": "i"}]}}
    kube.kubectl("apply", "-f", "-", input=json.dumps(bare))
    kube.kubectl("delete", "pod", "jx-worker-0", "--wait=false")
    kube.apply(manifest("JAXJob", {"Worker": 2}, name="jx"))
    waiting = wait_for("the replica names its holder", lambda: [
        w for w in (kube.job("JAXJob", "jx").get("status") or {}).get("waitingReplicas") or []
        if w["reason"] == "NameInUse"])
    assert waiting[0]["message"] == ("Pod jx-worker-0 is being deleted; it is made once that "
                                     "is gone")
    assert any(e["reason"] == "NameInUse" and e["involvedObject"]["name"] == "jx"
               for e in kube.items("events"))

    def tries() -> float:
        return manager.metric("trainop_api_requests_total", verb="post", resource="pods") + \
            manager.metric("trainop_api_requests_total", verb="get", resource="pods")
    before = tries()
    time.sleep(12)
    # a second apart, 12 s would be 24 requests; backing off, at most 3 looks (4, 8, 16)
    assert tries() - before <= 3
    kube.kubectl("patch", "pod", "jx-worker-0", "--type=merge", "-p",
                 '{"metadata": {"finalizers": null}}')
    wait_for("the replica made once its name is free", lambda: any(
        p["metadata"]["name"] == "jx-worker-0" and (p["metadata"].get("ownerReferences") or [])
        for p in kube.items("pods")), timeout=90)


def test_an_allowed_scraper_is_served_through_a_flood_of_unknown_tokens(
        apiserver: TestAPIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Unknown tokens fill every review slot of their own; a token found allowed before is
    reviewed again in slots of its own once its answer expires (here: at once), however
    many unknown ones came in between."""
    import asyncio
    import uuid

    from trainop.cluster.reading.client import Client
    from trainop.cluster.reading.config import from_kubeconfig
    from trainop.cluster.serving import authn

    monkeypatch.setattr(authn, "CACHE_SECONDS", 0.0)

    async def scenario() -> tuple[list[int], list[int]]:
        client = Client(from_kubeconfig(str(apiserver.kubeconfig)))
        try:
            auth = authn.TokenAuthorizer(client)
            admin = f"Bearer {apiserver.admin_token}"
            assert await auth.check(admin, "/metrics") == 200
            flood = [asyncio.ensure_future(auth.check(f"Bearer {uuid.uuid4().hex}",
                                                      "/metrics")) for _ in range(2000)]
            await asyncio.sleep(0)  # the flood's first reviews hold the unknown tokens' slots
            during = [await auth.check(admin, "/metrics") for _ in range(3)]
            return during, list(await asyncio.gather(*flood))
        finally:
            await client.close()

    during, codes = asyncio.run(scenario())
    assert during == [200, 200, 200]
    assert set(codes) <= {401, 503} and codes.count(503) > 0, set(codes)


def test_one_job_nested_past_the_decoders_limit_fails_alone(own_api: TestAPIServer,
                                                             tmp_path: Path) -> None:
    # a CRD that keeps unknown fields (an older or hand-made one): the API server stores
    # an MPIJob nested 1,100 levels deep, past what orjson reads (1,024)
    own_api.kubectl("patch", "crd", "mpijobs.kubeflow.org", "--type=json", "-p", json.dumps([{
        "op": "add", "path": "/spec/versions/0/schema/openAPIV3Schema/properties/spec/"
        "x-kubernetes-preserve-unknown-fields", "value": True}]))
    kube = Kube(own_api)

    def create_deep(name: str) -> None:
        doc = manifest("MPIJob", {"Launcher": 1, "Worker": 1}, name=name)
        doc["metadata"] = {"name": name, "namespace": kube.ns}
        text = json.dumps(doc).replace('"spec": {', '"spec": {"deep": ' + "[" * 1100 +
                                       "]" * 1100 + ", ", 1)
        kube.kubectl("create", "-f", "-", input=text)

    create_deep("listed")  # in the first list's page
    m = Manager(own_api, "--namespace", kube.ns, log_dir=tmp_path).wait_ready()
    try:
        create_deep("watched")  # a watch event
        kube.apply(manifest("MPIJob", {"Launcher": 1, "Worker": 1}, name="ok"))
        kube.apply(manifest("PyTorchJob", {"Master": 1}, name="pt"))
        wait_for("the other jobs' pods", lambda: {"ok-worker-0", "pt-master-0"} <= set(
            kube.names("pods")), 60)
        for name in ("listed", "watched"):
            failed = kube.wait_condition("MPIJob", name, "Failed")
            assert failed["message"].startswith(
                f"MPIJob {kube.ns}/{name} is invalid: spec.deep[0][0]"), failed["message"]
            assert failed["message"].endswith(": is nested more than 100 levels deep")
        assert not [p for p in kube.names("pods") if p.startswith(("listed", "watched"))]
    finally:
        m.stop()
    # a restarted manager reads them in its first list and gets ready
    Manager(own_api, "--namespace", kube.ns, log_dir=tmp_path).wait_ready().stop()


def peak_rss_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(ln for ln in status.splitlines() if ln.startswith("VmHWM:")).split()[1]) / 1024


def test_a_tiny_job_of_ten_thousand_workers_costs_the_manager_a_batch(
        kube: Kube, manager: Manager) -> None:
    # 257 bytes of TFJob, 10,000 workers, under a quota of 4 pods: each worker's TF_CONFIG
    # names every replica (311 KiB); planned all at once that was 3.2 GiB
    kube.kubectl("create", "quota", "four-pods", "--hard=pods=4")
    # no quota controller runs here: its status, which admission counts on, is set by hand
    kube.kubectl("patch", "resourcequota", "four-pods", "--subresource=status",
                 "--type=merge", "-p", json.dumps({"status": {"hard": {"pods": "4"},
                                                              "used": {"pods": "0"}}}))
    before = peak_rss_mib(manager.proc.pid)
    kube.apply(manifest("TFJob", {"Worker": 10_000}, name="wide"))
    wait_for("the quota's four pods", lambda: len(kube.names("pods")) == 4, 60)
    wait_for("creates refused by the quota, and retried", lambda: sum(
        1 for e in kube.items("events") if e["reason"] == "FailedCreatePod") >= 1 and
        manager.metric("trainop_api_requests_total", verb="post", resource="pods",
                       code="403") >= 3, 120)
    peak = peak_rss_mib(manager.proc.pid)
    assert peak < before + 300, (before, peak)
    assert len(kube.names("pods")) == 4


def test_a_pod_annotation_no_record_can_read_stops_no_other_namespace(
        apiserver: TestAPIServer, kube: Kube, start_manager: Callable[..., Manager]) -> None:
    # a tenant's bare pod with trainop's labels and an attempt `str.isdigit()` takes but
    # int() refuses: read before anything asks whose it is, in the first list of a manager
    # over every namespace, and again in its watch
    tenant = Kube(apiserver)
    bare = {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "bait-worker-0", "namespace": tenant.ns, "labels": {
            "training.kubeflow.org/job-name": "bait",
            "training.kubeflow.org/replica-type": "worker",
            "training.kubeflow.org/replica-index": "0"},
        "annotations": {"trainop.kubeflow.org/attempt": "²",
                        "trainop.kubeflow.org/attempt-released": "0"}},
        "spec": {"containers": [{"name": "c", "image": "i"}]}}
    tenant.kubectl("apply", "-f", "-", input=json.dumps(bare))
    try:
        m = start_manager(namespace=False)  # ready: its caches synced past the pod
        kube.apply(manifest("JAXJob", {"Worker": 1}, name="victim"))
        kube.wait_pods(1)
        tenant.kubectl("annotate", "pod", "bait-worker-0", "--overwrite",
                       "trainop.kubeflow.org/attempt-released=³")
        kube.set_all("Succeeded", exit_code=0)
        kube.wait_condition("JAXJob", "victim", "Succeeded")
        # read as a pod not restarted in place (a number is ASCII digits): nothing to
        # skip, and never a lost connection
        assert m.metric("trainop_informer_unreadable_objects_total", resource="pods") == 0
        assert "pods: connection lost" not in m.log_path.read_text()
    finally:
        tenant.kubectl("delete", "pod", "bait-worker-0", "--wait=false")
