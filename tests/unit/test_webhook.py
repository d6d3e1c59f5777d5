"""The admission webhook's decisions (pure functions) and its registered manifests."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.jobs import TYPICAL, manifest
from trainop.api import KINDS
from trainop.api.install import path_for
from trainop.cluster.serving.webhook import answer, default_review, validate_review

REPO = Path(__file__).resolve().parents[2]


def review(obj: dict[str, Any], op: str = "CREATE", old: dict[str, Any] | None = None
           ) -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u1", "operation": op, "object": obj, "oldObject": old}}


def test_valid_job_is_allowed() -> None:
    out = validate_review(review(manifest("TFJob", {"Worker": 2})))
    assert out["response"] == {"uid": "u1", "allowed": True}


def test_invalid_job_is_denied_with_every_problem() -> None:
    out = validate_review(review(manifest("PyTorchJob", {"Master": 2, "PS": 1}, name="X")))
    response = out["response"]
    assert response["allowed"] is False and response["status"]["code"] == 403
    message = response["status"]["message"]
    assert "spec.pytorchReplicaSpecs[Master].replicas: must be 1, got 2" in message
    assert "spec.pytorchReplicaSpecs[PS]: unknown replica type" in message
    assert "metadata.name: must be a DNS-1035 label" in message


@pytest.mark.parametrize(("kind", "replicas", "path"), [
    ("TFJob", {"Chief": 0, "Worker": 1}, "spec.tfReplicaSpecs[Chief].replicas"),
    ("TFJob", {"Master": 0, "Worker": 1}, "spec.tfReplicaSpecs[Master].replicas"),
    ("PaddleJob", {"Master": 0, "Worker": 2}, "spec.paddleReplicaSpecs[Master].replicas"),
])
def test_a_leader_of_no_replicas_is_denied(kind: str, replicas: dict[str, int],
                                           path: str) -> None:
    """Upstream accepts these, and they could never run as meant (a TFJob that succeeds at
    once, a PaddleJob whose workers wait for a master never made)."""
    response = validate_review(review(manifest(kind, replicas)))["response"]
    assert response["allowed"] is False, response
    assert f"{path}: must be at least 1 where" in response["status"]["message"]
    without = {rt: n for rt, n in replicas.items() if n}
    assert validate_review(review(manifest(kind, without)))["response"]["allowed"] is True


MQ = "kueue.x-k8s.io/multikueue"
OURS = "kubeflow.org/training-operator"


@pytest.mark.parametrize(("kind", "old", "new", "allowed"), [
    ("PyTorchJob", None, MQ, False), ("PyTorchJob", MQ, MQ, True),
    ("TFJob", OURS, MQ, False),
    ("JAXJob", None, MQ, True),  # JAX's webhook checks no runPolicy (jaxjob_webhook.go:72-80)
], ids=["set-later", "unchanged", "changed", "jax-unchecked"])
def test_managed_by_is_immutable(kind: str, old: str | None, new: str, allowed: bool) -> None:
    # pkg/common/util/webhooks.go:27-32, called by the TF/PyTorch/XGBoost/Paddle webhooks
    before = manifest(kind, TYPICAL[kind], spec={"runPolicy": {"managedBy": old} if old else {}})
    after = manifest(kind, TYPICAL[kind], spec={"runPolicy": {"managedBy": new}})
    out = validate_review(review(after, "UPDATE", before))
    assert out["response"]["allowed"] is allowed


@pytest.mark.parametrize(("kind", "value", "allowed"), [
    ("PyTorchJob", OURS, True), ("XGBoostJob", MQ, True), ("PaddleJob", "a/b", False),
    ("JAXJob", "a/b", True), ("MPIJob", "a/b", True)])
def test_managed_by_takes_upstreams_two_values(kind: str, value: str, allowed: bool) -> None:
    # pkg/common/util/webhooks.go:11-24 (not called by JAX's webhook; MPI has none)
    out = validate_review(review(manifest(kind, TYPICAL[kind],
                                          spec={"runPolicy": {"managedBy": value}})))
    assert out["response"]["allowed"] is allowed
    if not allowed:
        assert out["response"]["status"]["message"].endswith(
            f'spec.runPolicy.managedBy: Unsupported value: "{value}": supported values: '
            f'"{OURS}", "{MQ}"')


@pytest.mark.parametrize(("spec", "problem"), [
    ({"managedBy": MQ}, None),
    ({"managedBy": MQ, "runPolicy": {"managedBy": MQ}}, None),
    ({"managedBy": "a/b"}, f'spec.managedBy: Unsupported value: "a/b": supported values: '
                           f'"{OURS}", "{MQ}"'),
    ({"managedBy": MQ, "runPolicy": {"managedBy": OURS}},
     f'spec.managedBy: "{MQ}" names another controller than spec.runPolicy.managedBy '
     f'"{OURS}"; set one of them'),
], ids=["multikueue", "both-agree", "unknown", "both-disagree"])
def test_spec_managed_by_takes_upstreams_values_and_agrees_with_run_policy(
        spec: dict[str, Any], problem: str | None) -> None:
    # trainop's field (for Kueue's MultiKueue generic adapter), checked for every kind
    out = validate_review(review(manifest("MXJob", TYPICAL["MXJob"], spec=spec)))["response"]
    assert out["allowed"] is (problem is None)
    if problem is not None:
        assert out["status"]["message"].endswith(problem)


@pytest.mark.parametrize(("old", "new", "allowed"), [
    (None, MQ, False), (MQ, None, False), (MQ, MQ, True)])
def test_spec_managed_by_is_immutable(old: str | None, new: str | None, allowed: bool) -> None:
    before = manifest("JAXJob", TYPICAL["JAXJob"], spec={"managedBy": old} if old else {})
    after = manifest("JAXJob", TYPICAL["JAXJob"], spec={"managedBy": new} if new else {})
    after["spec"]["jaxReplicaSpecs"]["Worker"]["replicas"] = 4
    out = validate_review(review(after, "UPDATE", before))["response"]
    assert out["allowed"] is allowed
    if not allowed:
        assert out["status"]["message"].endswith("spec.managedBy: is immutable")


RACK, ZONE = "example.com/rack", "topology.kubernetes.io/zone"


@pytest.mark.parametrize(("old", "new", "allowed"), [
    (None, RACK, False), (RACK, None, False), (RACK, ZONE, False), (RACK, RACK, True),
    (None, None, True)])
def test_a_topology_key_is_immutable_set_or_unset(old: str | None, new: str | None,
                                                  allowed: bool) -> None:
    # a job's gang is made once with its topology (a PodGroup's constraint cannot change):
    # the CRD's transition rule sees only a key changed, not one set or removed
    def job(key: str | None) -> dict[str, Any]:
        policy = {"schedulingPolicy": {"topologyKey": key}} if key else {}
        return manifest("PyTorchJob", TYPICAL["PyTorchJob"], spec={"runPolicy": policy})
    after = job(new)
    after["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 4
    out = validate_review(review(after, "UPDATE", job(old)))["response"]
    assert out["allowed"] is allowed, out
    if not allowed:
        assert out["status"]["message"].endswith(
            "spec.runPolicy.schedulingPolicy.topologyKey: is immutable")


def test_defaulting_patch_replaces_the_spec_with_the_defaulted_one() -> None:
    out = default_review(review(manifest("PyTorchJob", {"worker": None})))["response"]
    assert out["allowed"] and out["patchType"] == "JSONPatch"
    (op,) = json.loads(base64.b64decode(out["patch"]))
    assert op["op"] == "replace" and op["path"] == "/spec"
    worker = op["value"]["pytorchReplicaSpecs"]["Worker"]
    assert (worker["replicas"], worker["restartPolicy"]) == (1, "OnFailure")


def test_defaulting_an_already_defaulted_job_patches_nothing() -> None:
    first = default_review(review(manifest("TFJob", {"Worker": 1})))["response"]
    spec = json.loads(base64.b64decode(first["patch"]))[0]["value"]
    again = manifest("TFJob", {"Worker": 1})
    again["spec"] = spec
    assert "patch" not in default_review(review(again))["response"]


def test_defaulting_leaves_unparseable_jobs_to_validation() -> None:
    doc = manifest("TFJob", {"Worker": 1})
    doc["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = "two"
    assert default_review(review(doc))["response"] == {"uid": "u1", "allowed": True}


UPSTREAM_VALIDATED = ("JAXJob", "PaddleJob", "PyTorchJob", "TFJob", "XGBoostJob")
"""upstream: manifests/base/webhook/manifests.yaml:13,33,53,73,93 at release-1.9"""


def test_the_install_registers_upstreams_webhooks_only() -> None:
    # A validating webhook for the kinds upstream validates, and no mutating webhook: what a
    # user applies is what is stored (no drift for GitOps tools), as with upstream v1.9.
    docs = list(yaml.safe_load_all((REPO / "config/webhook/manifests.yaml").read_text()))
    assert [d["kind"] for d in docs] == ["ValidatingWebhookConfiguration"]
    paths = {h["clientConfig"]["service"]["path"]: h["rules"][0]["resources"]
             for h in docs[0]["webhooks"]}
    assert paths == {path_for("validate", k): [KINDS[k].plural] for k in UPSTREAM_VALIDATED}
    assert all(h["admissionReviewVersions"] == ["v1"] for h in docs[0]["webhooks"])
    assert all(h["rules"][0]["operations"] == ["CREATE", "UPDATE"] for h in docs[0]["webhooks"])


def test_cluster_role_grants_every_job_kind_and_no_wildcards() -> None:
    role = yaml.safe_load((REPO / "config/rbac/cluster/role.yaml").read_text())
    text = json.dumps(role)
    assert '"*"' not in text
    resources = {r for rule in role["rules"] for r in rule["resources"]}
    for info in KINDS.values():
        assert info.plural in resources and f"{info.plural}/status" in resources


def test_a_stored_job_invalid_by_todays_rules_can_still_lose_its_finalizer() -> None:
    stored = manifest("PyTorchJob", {"Master": 2, "Worker": 1})  # refused on create today
    stored["metadata"]["finalizers"] = ["example.com/keep"]
    stored["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    updated = json.loads(json.dumps(stored))
    updated["metadata"]["finalizers"] = []
    assert validate_review(review(updated, "UPDATE", stored))["response"]["allowed"] is True
    # a change of its spec is judged by today's rules
    updated["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 3
    assert validate_review(review(updated, "UPDATE", stored))["response"]["allowed"] is False


@pytest.mark.parametrize(("body", "message"), [
    (b"[1, 2]", "not an AdmissionReview: no request with an object"),
    (b"{\"request\": []}", "not an AdmissionReview: no request with an object"),
    (b"{\"request\": {\"object\": 3}}", "not an AdmissionReview: no request with an object"),
    (b"not json", "not an AdmissionReview: the body is not JSON"),
    (b"[" * 100_000 + b"]" * 100_000, "not an AdmissionReview: no request with an object"),
    (b"[" * 100_000, "not an AdmissionReview: the body is not JSON"),
], ids=["list", "request-list", "object-number", "not-json", "deep-nesting", "deep-unended"])
def test_a_malformed_review_gets_400_and_a_reason(body: bytes, message: str) -> None:
    status, answer_body = answer(body, validate_review)
    assert status == 400 and answer_body["message"].startswith(message)


@pytest.mark.parametrize("levels", [150, 5000])
@pytest.mark.parametrize("operation", ["CREATE", "UPDATE"])
def test_a_job_nested_too_deep_is_refused_with_where(levels: int, operation: str) -> None:
    # 150 levels orjson reads; 5,000 it refuses, and the body is read again with the
    # containers past the limit cut: the same answer for both, naming where
    job = manifest("PyTorchJob", {"Master": 1})
    stored = json.loads(json.dumps(job))
    container = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    body = json.dumps(review(job, operation, stored if operation == "UPDATE" else None))
    body = body.replace('"name": "pytorch"', '"name": "pytorch", "x": ' + "[" * levels +
                        "]" * levels, 1)
    assert container["name"] == "pytorch"
    status, answered = answer(body.encode(), validate_review)
    response = answered["response"]
    assert status == 200 and response["allowed"] is False
    assert response["status"]["message"].startswith(
        "spec.pytorchReplicaSpecs[Master].template.spec.containers[0].x[0][0]")
    assert response["status"]["message"].endswith(": is nested more than 100 levels deep")


def test_a_well_formed_review_is_answered() -> None:
    body = json.dumps(review(manifest("JAXJob", {"Worker": 1}))).encode()
    assert answer(body, validate_review) == (200, {
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "response": {"uid": "u1", "allowed": True}})


def test_the_namespaced_role_grants_what_the_cluster_role_grants() -> None:
    cluster = yaml.safe_load((REPO / "config/rbac/cluster/role.yaml").read_text())
    role = next(d for d in yaml.safe_load_all((REPO / "config/namespaced/role.yaml").read_text())
                if d["kind"] == "Role")
    assert role["rules"] == cluster["rules"]


def test_the_namespaced_install_grants_the_cluster_scoped_reads_a_role_cannot() -> None:
    # a Role's rules for cluster-scoped resources grant nothing: the namespaced overlay
    # grants those of the ClusterRole's rules in a ClusterRole of their own
    cluster = yaml.safe_load((REPO / "config/rbac/cluster/role.yaml").read_text())
    docs = list(yaml.safe_load_all((REPO / "config/namespaced/cluster_reads.yaml").read_text()))
    reads = next(d for d in docs if d["kind"] == "ClusterRole")
    scoped = {"resourceflavors", "workloadpriorityclasses", "priorityclasses", "namespaces",
              "nodes"}
    assert reads["rules"] == [r for r in cluster["rules"] if set(r["resources"]) & scoped]
    binding = next(d for d in docs if d["kind"] == "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == reads["metadata"]["name"]
    listed = yaml.safe_load((REPO / "config/namespaced/kustomization.yaml").read_text())
    assert "cluster_reads.yaml" in listed["resources"]


def test_the_cluster_role_lets_owner_references_block_deletion() -> None:
    # OwnerReferencesPermissionEnforcement: blockOwnerDeletion needs update on finalizers
    role = yaml.safe_load((REPO / "config/rbac/cluster/role.yaml").read_text())
    granted = {(r, v) for rule in role["rules"] for r in rule["resources"] for v in rule["verbs"]}
    for info in KINDS.values():
        assert (f"{info.plural}/finalizers", "update") in granted


def test_the_manager_writes_only_to_mounted_folders() -> None:
    # The Deployment's root filesystem is read-only: every folder the manager writes in
    # (temporary files, its webhook certificates) must be a volume.
    from trainop.cluster.options import WebhookOptions

    deployment = yaml.safe_load((REPO / "config/manager/deployment.yaml").read_text())
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    mounts = [Path(m["mountPath"]) for m in container["volumeMounts"]]
    assert "TMPDIR" not in {e["name"] for e in container.get("env") or []}
    for written in (Path("/tmp"), WebhookOptions().cert_dir):  # /tmp: Python's, without TMPDIR
        assert any(written == m or m in written.parents for m in mounts), written


def test_reviews_are_judged_off_the_event_loop() -> None:
    import asyncio
    import threading
    from functools import partial

    from trainop.cluster.options import WebhookOptions
    from trainop.cluster.serving.webhook import WebhookServer

    body = json.dumps(review(manifest("JAXJob", {"Worker": 1}))).encode()
    judged_in: list[int] = []

    def judge(r: dict[str, Any]) -> dict[str, Any]:
        judged_in.append(threading.get_ident())
        return validate_review(r)

    class Request:
        remote = "127.0.0.1"

        async def read(self) -> bytes:
            return body

    async def scenario() -> tuple[int, int]:
        handle = WebhookServer(None, WebhookOptions())._handler(  # type: ignore[arg-type]
            partial(answer, fn=judge))
        response = await handle(Request())
        return response.status, threading.get_ident()

    status, loop_thread = asyncio.run(scenario())
    assert status == 200 and judged_in and judged_in[0] != loop_thread


def test_a_review_waits_for_a_judge_within_a_deadline_and_leaves_when_cancelled() -> None:
    import asyncio
    import threading

    from trainop.cluster.serving.webhook import WAITING, Judges

    release = threading.Event()
    started: list[bytes] = []

    def slow(raw: bytes) -> tuple[int, dict[str, Any]]:
        started.append(raw)
        release.wait(10)
        return 200, {"raw": raw.decode()}

    def waiting() -> float:
        return float(WAITING._value.get())  # type: ignore[attr-defined]

    async def scenario() -> None:
        judges = Judges(1, wait=0.2)
        first = asyncio.create_task(judges.judge(slow, b"first"))
        await asyncio.sleep(0.1)
        # the one judge is busy: a second review waits its deadline, then is refused
        with pytest.raises(TimeoutError):
            await judges.judge(slow, b"second")
        assert waiting() == 0
        # a review whose client hung up leaves the queue at once
        third = asyncio.create_task(judges.judge(slow, b"third"))
        await asyncio.sleep(0.05)
        assert waiting() == 1
        third.cancel()
        with pytest.raises(asyncio.CancelledError):
            await third
        assert waiting() == 0
        # the first one's client hangs up too: its thread goes on, and no other thread
        # judges until it ends
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        fourth = asyncio.create_task(judges.judge(slow, b"fourth"))
        await asyncio.sleep(0.1)
        assert started == [b"first"]
        release.set()
        assert await asyncio.wait_for(fourth, 5) == (200, {"raw": "fourth"})
        assert started == [b"first", b"fourth"]
    asyncio.run(scenario())


def test_reviews_waiting_for_a_judge_are_served_fairly_among_addresses() -> None:
    import asyncio
    import threading
    import time

    from trainop.cluster.serving.webhook import Judges

    order: list[str] = []
    lock = threading.Lock()

    def judge(raw: bytes) -> tuple[int, dict[str, Any]]:
        time.sleep(0.05)  # a large review's seconds of CPU, shrunk
        with lock:
            order.append(raw.decode())
        return 200, {}

    async def scenario() -> None:
        judges = Judges(1, wait=10)
        flood = [asyncio.create_task(judges.judge(judge, f"flood-{i}".encode(), "10.0.0.9"))
                 for i in range(8)]
        await asyncio.sleep(0.01)
        api_server = asyncio.create_task(judges.judge(judge, b"api-server", "10.0.0.1"))
        await asyncio.gather(*flood, api_server)
    asyncio.run(scenario())
    # the one under way, then the API server's: not after the other seven
    assert order.index("api-server") <= 2, order


def test_an_mpi_jobs_transport_is_immutable() -> None:
    def mpi(transport: str) -> dict[str, Any]:
        return manifest("MPIJob", TYPICAL["MPIJob"], spec={"transport": transport})
    out = validate_review(review(mpi("SSH"), "UPDATE", mpi("KubectlExec")))["response"]
    assert out["allowed"] is False and "spec.transport: is immutable" in out["status"]["message"]
    same = validate_review(review(mpi("SSH"), "UPDATE", mpi("SSH")))["response"]
    assert same["allowed"]


@pytest.mark.parametrize("operation", ["CREATE", "UPDATE"])
def test_a_deprecated_field_is_a_warning_as_upstreams(operation: str) -> None:
    doc = manifest("PyTorchJob", {"Worker": 2})
    doc["spec"]["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": 2, "nProcPerNode": 2}
    old = manifest("PyTorchJob", {"Worker": 2}) if operation == "UPDATE" else None
    out = validate_review(review(doc, operation, old))["response"]
    assert out["allowed"] is True
    assert out["warnings"] == [
        "spec.elasticPolicy.nProcPerNode is deprecated, use spec.nprocPerNode instead"]
    plain = validate_review(review(manifest("PyTorchJob", {"Worker": 2})))["response"]
    assert "warnings" not in plain
