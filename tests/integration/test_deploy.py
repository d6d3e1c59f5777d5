"""The install: kustomize renders, the server accepts it, the ClusterRole is enough for a
whole job lifecycle (and no more), and the admission webhook defaults and validates."""

from __future__ import annotations

import base64
import json
import re
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from testbed.apiserver import TestAPIServer
from tests.conftest import CRDS, SA_GROUPS, SA_TOKEN, SA_USER
from tests.integration.kube import Kube, Manager, install_rbac, wait_for
from tests.jobs import manifest
from trainop.api.install import path_for
from trainop.local.ports import free_port

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


def test_kustomize_renders_every_overlay() -> None:
    for overlay in ("default", "namespaced"):
        out = subprocess.run(["kubectl", "kustomize", str(REPO / "config" / overlay)],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        kinds = [d["kind"] for d in yaml.safe_load_all(out.stdout)]
        assert kinds.count("CustomResourceDefinition") == 7
        assert "Deployment" in kinds and "ValidatingWebhookConfiguration" in kinds
        policy = next(d for d in yaml.safe_load_all(out.stdout) if d["kind"] == "NetworkPolicy")
        opened = {p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]}
        assert opened == {9443, 8443}  # webhook, secure metrics (the kubelet's probes pass)
        if overlay == "namespaced":  # the webhooks judge jobs of the managed namespace only
            hooks = [h for d in yaml.safe_load_all(out.stdout) if d["kind"].endswith(
                "WebhookConfiguration") for h in d["webhooks"]]
            assert len(hooks) == 5 and all(h["namespaceSelector"] == {"matchLabels": {
                "kubernetes.io/metadata.name": "ml-team"}} for h in hooks)


def test_the_readmes_patch_narrows_the_webhook_port_only(tmp_path: Path) -> None:
    """README, Install: the one command that narrows 9443 to the control plane's addresses,
    run on the rendered NetworkPolicy as it is written there."""
    readme = (REPO / "README.md").read_text()
    command = re.search(r"kubectl -n trainop-system patch networkpolicy trainop-manager"
                        r" --type json -p \\\n\s*'(.*)'", readme)
    assert command is not None, "the README's NetworkPolicy patch is not where it was"
    out = subprocess.run(["kubectl", "kustomize", str(REPO / "config" / "default")],
                         capture_output=True, text=True, timeout=60, check=True)
    policy = next(d for d in yaml.safe_load_all(out.stdout) if d["kind"] == "NetworkPolicy")
    (tmp_path / "policy.yaml").write_text(yaml.safe_dump(policy))
    patched = subprocess.run(["kubectl", "patch", "--local", "-f", str(tmp_path / "policy.yaml"),
                              "--type", "json", "-p", command[1], "-o", "yaml"],
                             capture_output=True, text=True, timeout=60)
    assert patched.returncode == 0, patched.stderr
    webhook, metrics = yaml.safe_load(patched.stdout)["spec"]["ingress"]
    assert webhook == {"ports": [{"port": 9443, "protocol": "TCP"}],
                       "from": [{"ipBlock": {"cidr": "10.0.0.0/24"}}]}
    assert metrics == policy["spec"]["ingress"][1]


def test_server_side_dry_run_of_the_install(apiserver: TestAPIServer) -> None:
    # A dry run persists nothing, so the namespace it would create first must exist.
    apiserver.kubectl("apply", "--server-side", "-f",
                      str(REPO / "config" / "manager" / "namespace.yaml"))
    out = apiserver.kubectl("apply", "--dry-run=server", "--server-side", "-k",
                            str(REPO / "config" / "default"), check=False)
    assert out.returncode == 0, out.stderr
    assert "deployment.apps/trainop-manager serverside-applied (server dry run)" in out.stdout
    # kubectl prints what the API server warns of (a deprecated API or field): nothing
    assert "Warning" not in out.stderr, out.stderr


def refusals(log: str) -> list[str]:
    """The log lines that tell of a refusal ("403 Forbidden"): the digits 403 elsewhere (a
    timestamp's milliseconds, a random namespace name) are not one."""
    return [line for line in log.splitlines() if "Forbidden" in line or
            re.search(r"\b403\b", line.split(" INFO ", 1)[-1].split(" WARNING ", 1)[-1])]


@pytest.fixture(scope="module")
def installed_rbac(apiserver: TestAPIServer) -> None:
    install_rbac(apiserver)


def test_the_cluster_role_is_enough_for_a_job_lifecycle(
        apiserver: TestAPIServer, kube: Kube, installed_rbac: None, tmp_path: Path) -> None:
    sa = apiserver.kubeconfig_for(SA_TOKEN, tmp_path / "sa.kubeconfig")
    # (with what the shipped Deployment turns on that asks for rights: nodes watched)
    m = Manager(apiserver, "--kubeconfig", str(sa), "--enable-scheme", "xgboostjob",
                "--enable-scheme", "mpijob", "--leader-elect", "--leader-election-namespace",
                "trainop-system", "--lost-node-grace", "60", "--restart-in-place",
                "--rank-supervisor-image", "trainop:0.1.0", log_dir=tmp_path)
    try:
        m.wait_ready()
        wait_for("leader", lambda: "became leader" in m.log())
        kube.apply(manifest("MPIJob", {"Launcher": 1, "Worker": 1}, name="mpi",
                            spec={"runPolicy": {"ttlSecondsAfterFinished": 1,
                                                "cleanPodPolicy": "All"}}))
        kube.apply(manifest("XGBoostJob", {"Master": 1, "Worker": 1}, name="xgb",
                            spec={"runPolicy": {"cleanPodPolicy": "All"}}))
        kube.wait_pods(4)
        kube.set_all("Running")
        kube.wait_condition("XGBoostJob", "xgb", "Running")
        kube.set_all("Succeeded", exit_code=0)
        kube.wait_condition("XGBoostJob", "xgb", "Succeeded")
        wait_for("cleanup and TTL", lambda: not kube.names("pods") and
                 kube.get("mpijobs.kubeflow.org", "mpi") is None, 30)
        assert not refusals(m.log()), m.log()
        # events are sent after the plan that tells them, beside other namespaces' (this
        # manager watches every namespace): a moment after the job's status
        wait_for("the XGBoostJobSucceeded event", lambda: any(
            e["reason"] == "XGBoostJobSucceeded" for e in kube.items("events")), 15)
    finally:
        m.stop()
    for forbidden in (["get", "deployments", "-A"], ["get", "persistentvolumes"],
                      ["create", "namespace", "nope"], ["delete", "crd", "tfjobs.kubeflow.org"],
                      ["get", "secrets", "-n", "kube-system", "-o", "yaml", "--watch=false",
                       "default-token"]):
        out = subprocess.run(["kubectl", "--kubeconfig", str(sa), *forbidden],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode != 0 and "forbidden" in out.stderr.lower(), (forbidden, out)


def test_lost_node_grace_without_the_right_to_watch_nodes_stops_the_manager_in_one_line(
        apiserver: TestAPIServer, installed_rbac: None, tmp_path: Path) -> None:
    # the shipped roles grant reads of Nodes (the shipped Deployment sets the flag): a role
    # without them, as an install of before would have
    role = json.loads(apiserver.kubectl("get", "clusterrole", "trainop-manager", "-o",
                                        "json").stdout)
    without = [r for r in role["rules"] if "nodes" not in r["resources"]]
    assert len(without) == len(role["rules"]) - 1
    apiserver.kubectl("patch", "clusterrole", "trainop-manager", "--type=merge", "-p",
                      json.dumps({"rules": without}))
    sa = apiserver.kubeconfig_for(SA_TOKEN, tmp_path / "sa.kubeconfig")
    try:
        out = subprocess.run([sys.executable, "-m", "trainop.cli", "manager", "--kubeconfig",
                              str(sa), "--lost-node-grace", "60", "--enable-scheme", "jaxjob",
                              "--metrics-bind-address", "127.0.0.1:0",
                              "--health-probe-bind-address", "127.0.0.1:0",
                              "--webhook-port", "0"], capture_output=True, text=True,
                             timeout=60)
    finally:
        apiserver.kubectl("patch", "clusterrole", "trainop-manager", "--type=merge", "-p",
                          json.dumps({"rules": role["rules"]}))
    assert out.returncode == 1
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("trainop: --lost-node-grace needs to list and watch nodes: "), last
    assert "forbidden" in last and "Traceback" not in out.stderr


def test_the_cluster_role_is_enough_where_owner_references_are_enforced(
        tmp_path: Path) -> None:
    # OpenShift's admission: setting blockOwnerDeletion needs `update` on the owner's
    # finalizers; without it every pod create is refused.
    with TestAPIServer(extra_args=[
            "--enable-admission-plugins=OwnerReferencesPermissionEnforcement"],
            users={SA_TOKEN: (SA_USER, SA_GROUPS)}) as api:
        api.kubectl("apply", "--server-side", "-k", str(CRDS))
        api.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        install_rbac(api)
        kube = Kube(api)
        sa = api.kubeconfig_for(SA_TOKEN, tmp_path / "sa.kubeconfig")
        m = Manager(api, "--kubeconfig", str(sa), "--enable-scheme", "jaxjob",
                    log_dir=tmp_path)
        try:
            m.wait_ready()
            kube.apply(manifest("JAXJob", {"Worker": 2}, name="jx"))
            kube.wait_pods(2)
            wait_for("services", lambda: len(kube.names("services")) == 2 or None)
            # a refusal reads "403 Forbidden"; random namespace names may hold the digits 403
            assert not refusals(m.log()), m.log()
        finally:
            m.stop()


@pytest.fixture
def webhook(apiserver: TestAPIServer, kube: Kube, tmp_path: Path,
            start_manager: Callable[..., Manager]) -> Iterator[Manager]:
    """A manager serving the webhook on loopback, registered for this test's namespace as
    the install registers it (validating only)."""
    port = free_port()
    apiserver.kubectl("label", "namespace", kube.ns, f"webhook-test={kube.ns}")
    name = f"trainop-{uuid.uuid4().hex[:6]}"
    configs = []
    for action, kind in (("validate", "ValidatingWebhookConfiguration"),):
        configs.append({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
                        "metadata": {"name": name}, "webhooks": [{
                            "name": f"{action}.pytorchjob.trainop.kubeflow.org",
                            "admissionReviewVersions": ["v1"], "sideEffects": "None",
                            "failurePolicy": "Fail",
                            "namespaceSelector": {"matchLabels": {"webhook-test": kube.ns}},
                            "clientConfig": {"url": f"https://127.0.0.1:{port}"
                                                    f"{path_for(action, 'PyTorchJob')}"},
                            "rules": [{"apiGroups": ["kubeflow.org"], "apiVersions": ["v1"],
                                       "operations": ["CREATE", "UPDATE"],
                                       "resources": ["pytorchjobs"]}]}]})
    apiserver.kubectl("apply", "-f", "-", input="---\n".join(yaml.safe_dump(c)
                                                            for c in configs))
    try:
        m = start_manager("--webhook-port", str(port), "--webhook-cert-dir",
                          str(tmp_path / "certs"), "--webhook-config-name", name,
                          "--webhook-service-namespace", kube.ns)
        m.webhook_port = port
        m.webhook_config = name
        yield m
    finally:
        apiserver.kubectl("delete", "validatingwebhookconfiguration", name, check=False)


def test_webhook_rejects_an_invalid_job_with_the_validation_message(
        kube: Kube, webhook: Manager) -> None:
    doc = manifest("PyTorchJob", {"Master": 2, "Worker": 1}, name="bad")
    doc["metadata"].pop("uid")
    doc["metadata"]["namespace"] = kube.ns
    out = kube.api.kubectl("apply", "-f", "-", input=yaml.safe_dump(doc), check=False)
    assert out.returncode != 0
    assert "spec.pytorchReplicaSpecs[Master].replicas: must be 1, got 2" in out.stderr
    assert kube.get("pytorchjobs.kubeflow.org", "bad") is None


def test_webhook_serves_again_after_its_process_is_killed(
        kube: Kube, webhook: Manager, tmp_path: Path,
        start_manager: Callable[..., Manager]) -> None:
    # A container restarted in its pod finds its emptyDir as the killed process left it:
    # the certificates written and marked as trainop's. The new process must serve them
    # (it once took them for already loaded and served TLS without a certificate).
    webhook.proc.kill()
    webhook.proc.wait()
    start_manager("--webhook-port", str(webhook.webhook_port), "--webhook-cert-dir",
                  str(tmp_path / "certs"), "--webhook-config-name", webhook.webhook_config,
                  "--webhook-service-namespace", kube.ns)
    doc = manifest("PyTorchJob", {"Master": 2, "Worker": 1}, name="bad")
    doc["metadata"].pop("uid")
    doc["metadata"]["namespace"] = kube.ns
    out = kube.api.kubectl("apply", "-f", "-", input=yaml.safe_dump(doc), check=False)
    assert "spec.pytorchReplicaSpecs[Master].replicas: must be 1, got 2" in out.stderr, out


def test_webhook_stores_the_job_as_applied_and_guards_immutable_fields(
        kube: Kube, webhook: Manager) -> None:
    # No defaults are written into the stored job (upstream v1.9 defaults in memory only:
    # it registers no mutating webhook, manifests/base/webhook/manifests.yaml at release-1.9),
    # so GitOps tools see no drift between what they applied and what is stored.
    applied = manifest("PyTorchJob", {"master": None, "worker": 2}, name="ok")
    kube.apply(applied)
    stored = kube.job("PyTorchJob", "ok")["spec"]
    assert stored == applied["spec"]
    out = kube.api.kubectl("patch", "pytorchjob", "ok", "-n", kube.ns, "--type=merge", "-p",
                           json.dumps({"spec": {"runPolicy": {
                               "managedBy": "kueue.x-k8s.io/multikueue"}}}),
                           check=False)
    # pkg/common/util/webhooks.go:27-32
    assert out.returncode != 0 and "spec.runPolicy.managedBy: is immutable" in out.stderr
    # trainop's: a topology key set on a job made without one (which the CRD's rule, a
    # transition rule, lets through) is refused by the webhook
    out = kube.api.kubectl("patch", "pytorchjob", "ok", "-n", kube.ns, "--type=merge", "-p",
                           json.dumps({"spec": {"runPolicy": {"schedulingPolicy": {
                               "topologyKey": "example.com/rack"}}}}), check=False)
    assert out.returncode != 0, out
    assert "spec.runPolicy.schedulingPolicy.topologyKey: is immutable" in out.stderr, out.stderr


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1_1 is deprecated")
def test_webhook_serves_tls_1_2_or_newer_only(webhook: Manager) -> None:
    port = webhook.webhook_port
    for version, ok in ((ssl.TLSVersion.TLSv1_1, False), (ssl.TLSVersion.TLSv1_2, True)):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.minimum_version = ctx.maximum_version = version
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
                    ctx.wrap_socket(raw) as tls:
                connected = tls.version() is not None
        except (ssl.SSLError, OSError):
            connected = False
        assert connected is ok, version


def test_dockerfile_installs_the_pinned_package_and_runs_the_manager() -> None:
    text = (REPO / "Dockerfile").read_text()
    assert "COPY pyproject.toml" in text and "RUN pip install ." in text
    assert 'ENTRYPOINT ["trainop", "manager"]' in text
    assert "USER 65532" in text
    pins = [d for d in __import__("tomllib").loads((REPO / "pyproject.toml").read_text())[
        "project"]["dependencies"]]
    assert pins and all("==" in d for d in pins)
    assert sys.version_info[:2] == (3, 11) or "python:3.11" in text


def test_every_replica_serves_the_certificate_the_ca_bundle_trusts(
        apiserver: TestAPIServer, kube: Kube, webhook: Manager,
        start_manager: Callable[..., Manager], tmp_path: Path) -> None:
    # A second manager (a second replica, or the new pod of a rolling update) serves the
    # certificate of the shared Secret, so a call reaching either passes TLS.
    port = free_port()
    start_manager("--webhook-port", str(port), "--webhook-cert-dir", str(tmp_path / "two"),
                  "--webhook-config-name", webhook.webhook_config,
                  "--webhook-service-namespace", kube.ns)
    config = json.loads(apiserver.kubectl("get", "validatingwebhookconfiguration",
                                          webhook.webhook_config, "-o", "json").stdout)
    bundle = base64.b64decode(config["webhooks"][0]["clientConfig"]["caBundle"]).decode()
    secret = kube.get("secret", "training-operator-webhook-cert")
    assert base64.b64decode(secret["data"]["ca.crt"]).decode() == bundle
    for replica in (webhook.webhook_port, port):
        ctx = ssl.create_default_context(cadata=bundle)
        ctx.check_hostname = False  # the name is the Service's; here it is 127.0.0.1
        with socket.create_connection(("127.0.0.1", replica), timeout=5) as raw, \
                ctx.wrap_socket(raw) as tls:
            assert tls.version() in ("TLSv1.2", "TLSv1.3")
    # and the API server, trusting that bundle, reaches the webhook through either
    test_webhook_rejects_an_invalid_job_with_the_validation_message(kube, webhook)


def test_strangers_holding_connections_stop_neither_the_webhook_nor_the_probes(
        kube: Kube, webhook: Manager) -> None:
    # From another address than the API server's and the kubelet's (both 127.0.0.1 here):
    # stalled TLS requests that announce a body on every webhook slot, re-taken as soon as
    # one is freed, and probe connections that ask for /healthz often enough never to idle.
    stop = threading.Event()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE

    def attacker(port: int, tls: bool, request: bytes, every: float) -> None:
        mine: list[socket.socket] = []
        last = time.monotonic()
        while not stop.is_set():
            if len(mine) < 300:
                try:
                    raw = socket.create_connection(("127.0.0.1", port), timeout=2,
                                                   source_address=("127.0.0.2", 0))
                    conn = ctx.wrap_socket(raw) if tls else raw
                    conn.sendall(request)
                    mine.append(conn)
                except OSError:
                    time.sleep(0.05)
            else:
                time.sleep(0.05)
            if time.monotonic() - last > every:  # keep them busy, drop the closed ones
                last = time.monotonic()
                for conn in list(mine):
                    try:
                        conn.sendall(request)
                    except OSError:
                        mine.remove(conn)
                        conn.close()
        for conn in mine:
            conn.close()

    stall = b"POST /validate-kubeflow-org-v1-pytorchjob HTTP/1.1\r\nHost: x\r\n" \
            b"Content-Type: application/json\r\nContent-Length: 4000000\r\n\r\n{"
    probe = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    threads = [threading.Thread(target=attacker, args=args, daemon=True) for args in (
        (webhook.webhook_port, True, stall, 5.0), (webhook.health_port, False, probe, 1.0))]
    for t in threads:
        t.start()
    try:
        time.sleep(3)
        for i in range(5):
            kube.apply(manifest("PyTorchJob", {"Master": 1, "Worker": 1}, name=f"ok-{i}"))
            with urllib.request.urlopen(
                    f"http://127.0.0.1:{webhook.health_port}/healthz", timeout=5) as resp:
                assert resp.status == 200
        assert webhook.metric("trainop_connections_refused_total") > 0
    finally:
        stop.set()
        for t in threads:
            t.join(10)
