"""Kueue (sigs.k8s.io/kueue) as a peer in the tests: the queueing system most clusters that
run Kubeflow v1 jobs put in front of the operator.

hack/test-assets.sh builds its manager from the Go module proxy, as kueue-VERSION beside the
Kubernetes binaries, and copies that release's CRDs and webhook configuration beside it
(kueue-VERSION-config). Nothing of it is in this project.
"""

from __future__ import annotations

import base64
import fcntl
import os
import re
import ssl
import subprocess
import urllib.request
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from testbed.apiserver import TestAPIServer, find_assets, release
from testbed.manager import terminate, wait_ready
from testbed.node import node_ip
from trainop.cluster.serving.certs import issue, new_ca, not_after
from trainop.local.ports import free_port

FRAMEWORKS = ("kubeflow.org/pytorchjob", "kubeflow.org/tfjob", "kubeflow.org/xgboostjob",
              "kubeflow.org/paddlejob", "kubeflow.org/jaxjob", "kubeflow.org/mpijob")
"""Kueue's integrations for the kinds trainop serves: the kubeflow.org/v1 ones, and
kubeflow.org/mpijob, which is mpi-operator's v2beta1 MPIJob (trainop serves it beside v1)."""
NAMESPACE = "kueue-system"
"""Kueue's own namespace (MultiKueue reads the worker clusters' kubeconfigs there)."""
METRICS_CERTS = Path("/etc/kueue/metrics/certs")
"""Where Kueue reads its metrics server's certificate when it does not manage its own
certificates (fixed in its cmd/kueue/main.go): it exits if the files are not there."""
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def version() -> str:
    """The Kueue release the suite runs ($TRAINOP_KUEUE_VERSION)."""
    return release("kueue")


def binary() -> Path:
    return find_assets() / f"kueue-{version()}"


def kueuectl() -> Path:
    """Kueue's CLI of the same release."""
    return find_assets() / f"kueuectl-{version()}"


def manifests() -> Path:
    """The release's config/ as hack/test-assets.sh copied it: crd/*.yaml, webhooks.yaml."""
    return find_assets() / f"kueue-{version()}-config"


VISIBILITY_SERVICE = "kueue-visibility-server"
VISIBILITY_CERTS = Path("/visibility")
"""Where Kueue's visibility server reads its certificate (fixed: pkg/visibility certDir)."""
_FILES = {METRICS_CERTS: ("ca.crt", "ca.key", "tls.crt", "tls.key"),
          VISIBILITY_CERTS: ("tls.crt", "tls.key")}


@cache
def certificates() -> dict[Path, dict[str, bytes]]:
    """The files of METRICS_CERTS (a CA, and a serving certificate it signed for 127.0.0.1,
    which the webhook serves too) and of VISIBILITY_CERTS (one for the visibility Service),
    as those folders hold them: made once on this machine (under a lock) and kept while
    they last, because every Kueue started at once, by this process or another (the Kueue
    and node suites run side by side), reads those fixed folders and must serve what its
    API server and scrapes were told to trust."""
    METRICS_CERTS.mkdir(parents=True, exist_ok=True)
    with open(METRICS_CERTS.parent / "certs.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        files = {folder: {name: (folder / name).read_bytes() for name in names
                          if (folder / name).is_file()} for folder, names in _FILES.items()}
        if any(len(files[folder]) < len(names) for folder, names in _FILES.items()) or \
                not all(_lasts(f["tls.crt"]) for f in files.values()):
            files = _new_certificates()
            for folder, named in files.items():
                folder.mkdir(parents=True, exist_ok=True)
                for name, data in named.items():
                    tmp = folder / f".{name}.tmp"
                    tmp.write_bytes(data)
                    tmp.chmod(0o600 if name.endswith(".key") else 0o644)
                    tmp.replace(folder / name)
    return files


def _lasts(cert_pem: bytes) -> bool:
    return not_after(cert_pem) > datetime.now(UTC) + timedelta(days=7)


def _new_certificates() -> dict[Path, dict[str, bytes]]:
    ca = new_ca("kueue-test-ca", days=90)
    serving = issue(ca, "kueue-webhook-service.kueue-system.svc",
                    dns_names=["kueue-webhook-service.kueue-system.svc"],
                    ips=["127.0.0.1"], days=90)
    service = f"{VISIBILITY_SERVICE}.{NAMESPACE}.svc"
    visibility = issue(ca, service, dns_names=[service], days=90)
    return {METRICS_CERTS: {"ca.crt": ca.cert_pem, "ca.key": ca.key_pem,
                            "tls.crt": serving.cert_pem, "tls.key": serving.key_pem},
            VISIBILITY_CERTS: {"tls.crt": visibility.cert_pem, "tls.key": visibility.key_pem}}


def ca_pem() -> bytes:
    """The CA every test Kueue's certificates are signed by."""
    return certificates()[METRICS_CERTS]["ca.crt"]


def as_released() -> dict[str, Any]:
    """The release's own Configuration (config/components/manager), as its manifests
    install it: its integrations, concurrency and client settings."""
    loaded: dict[str, Any] = yaml.safe_load((manifests() / "manager-config.yaml").read_text())
    return loaded


def unavailable(visibility: bool = False) -> str | None:
    """Why Kueue cannot run here (`visibility`: with its visibility API), or None."""
    if not binary().is_file() or not kueuectl().is_file() or not manifests().is_dir():
        return f"no kueue-{version()} in {find_assets()} (hack/test-assets.sh builds it)"
    for folder, what in ((METRICS_CERTS, "metrics"), (VISIBILITY_CERTS, "visibility server")):
        probe = folder  # a system folder
        while not probe.exists():
            probe = probe.parent
        if not os.access(probe, os.W_OK):
            return f"Kueue reads its {what} certificate from {folder}, which this user " \
                   "cannot write"
    if visibility and node_ip() == "127.0.0.1":
        return "the API server reaches an extension API server at a Service's endpoint, " \
               "which may not be a loopback address: this host has no other"
    return None


def install(api: TestAPIServer) -> None:
    """Kueue's CRDs and its namespace (before the manager starts: it watches its kinds)."""
    api.kubectl("apply", "--server-side", "-f", str(manifests() / "crd"))
    api.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
    api.kubectl("create", "namespace", NAMESPACE, check=False)


class Kueue:
    """Kueue's manager against a test API server, its webhooks for its own kinds and the
    kubeflow.org/v1 kinds registered as its manifests register them, but called at a
    loopback URL with a certificate made here (Kueue's own certificate management would
    make one for its Service's name only)."""

    def __init__(self, api: TestAPIServer, folder: Path, *, name: str = "kueue",
                 config: dict[str, Any] | None = None, released: bool = False,
                 visibility: bool = False):
        """`folder`: its configuration, certificates and log; `config`: fields merged into
        its Configuration (waitForPodsReady, featureGates...), which is the release's own
        where `released` (else one with the integrations of FRAMEWORKS), either run as a
        process here (its ports on the loopback, no leader election, certificates made
        here); `visibility`: its visibility API on, served through `api`, which must have
        been started with aggregation."""
        self.api = api
        self.name = name
        self._args = (folder, config, released, visibility)
        self.log_path = folder / f"{name}.log"
        self.webhook_port, self.metrics_port, self.health_port = (
            free_port(), free_port(), free_port())
        serving = certificates()[METRICS_CERTS]
        certs = folder / f"{name}-certs"
        certs.mkdir(parents=True, exist_ok=True)
        for file in ("tls.crt", "tls.key"):
            (certs / file).write_bytes(serving[file])
        (certs / "tls.key").chmod(0o600)
        settings: dict[str, Any] = as_released() if released else {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
            "integrations": {"frameworks": list(FRAMEWORKS)}}
        settings |= {
            "namespace": NAMESPACE,
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
            "metrics": {"bindAddress": f"127.0.0.1:{self.metrics_port}"},
            "webhook": {"host": "127.0.0.1", "port": self.webhook_port,
                        "certDir": str(certs)},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            # its extension API server: an APIService, and a fixed certificate folder
            "featureGates": {"VisibilityOnDemand": visibility},
        }
        if visibility:
            settings["visibilityServer"] = self._serve_visibility()
        for key, value in (config or {}).items():
            if isinstance(value, dict) and isinstance(settings.get(key), dict):
                settings[key] = {**settings[key], **value}
            else:
                settings[key] = value
        path = folder / f"{name}-config.yaml"
        path.write_text(yaml.safe_dump(settings))
        self.webhooks = self.webhook_configurations(
            ca_pem(), settings["integrations"].get("frameworks") or [])
        for doc in self.webhooks:
            api.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-",
                        input=yaml.safe_dump(doc))
        self.proc = subprocess.Popen(
            # --kubeconfig, not only $KUBECONFIG: the visibility server's delegated
            # authentication reads the flag
            [str(binary()), f"--config={path}", f"--kubeconfig={api.kubeconfig}"],
            env={**os.environ, "KUBECONFIG": str(api.kubeconfig)},
            stdout=open(self.log_path, "ab"), stderr=subprocess.STDOUT)  # noqa: SIM115

    def _serve_visibility(self) -> dict[str, Any]:
        """Kueue's visibility server at this host's address (a Service's endpoint may not
        be a loopback one) and a free port (its certificate in VISIBILITY_CERTS), and the
        APIService, Service and EndpointSlice through which the API server calls it; its
        `visibilityServer` settings."""
        address, port = node_ip(), free_port()
        meta = {"name": VISIBILITY_SERVICE, "namespace": NAMESPACE}
        docs = [
            {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": {
                "ports": [{"name": "https", "port": 443, "targetPort": port}]}},
            {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": {
                **meta, "labels": {"kubernetes.io/service-name": VISIBILITY_SERVICE}},
             "addressType": "IPv4", "endpoints": [{"addresses": [address]}],
             "ports": [{"name": "https", "port": port, "protocol": "TCP"}]},
            {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
             "metadata": {"name": "v1beta2.visibility.kueue.x-k8s.io"}, "spec": {
                 "group": "visibility.kueue.x-k8s.io", "version": "v1beta2",
                 "groupPriorityMinimum": 100, "versionPriority": 100,
                 "caBundle": base64.b64encode(ca_pem()).decode(),
                 "service": {"name": VISIBILITY_SERVICE, "namespace": NAMESPACE,
                             "port": 443}}}]
        self.api.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-",
                         input="---\n".join(yaml.safe_dump(d) for d in docs))
        return {"bindAddress": address, "bindPort": port}

    def webhook_configurations(self, ca: bytes, frameworks: list[str]
                               ) -> list[dict[str, Any]]:
        """Kueue's mutating and validating configurations, with only the webhooks of its own
        kinds and of the integrations `frameworks` names (those of integrations left off
        would fail closed on every pod, Job or Deployment), each called at this process's
        loopback port."""
        # /mutate-kubeflow-org-v2beta1-mpijob, /validate--v1-pod, /mutate-apps-v1-deployment:
        # the group with its dots as dashes, a version, the kind
        served = {("apps" if f in ("deployment", "statefulset") else "",
                   f) if "/" not in f else (f.split("/")[0].replace(".", "-"), f.split("/")[1])
                  for f in frameworks}

        def wanted(path: str) -> bool:
            found = re.fullmatch(r"/(?:mutate|validate)-(.*)-v[0-9a-z]+-([a-z]+)", path)
            return found is not None and (
                found[1] == "kueue-x-k8s-io" or (found[1], found[2]) in served)

        docs = []
        text = (manifests() / "webhooks.yaml").read_text()
        for doc in yaml.safe_load_all(text):
            if not doc:
                continue
            doc["metadata"] = {"name": f"{self.name}-{doc['metadata']['name']}"}
            hooks = []
            for hook in doc["webhooks"]:
                path = hook["clientConfig"]["service"]["path"]
                if not wanted(path):
                    continue
                hook["clientConfig"] = {
                    "url": f"https://127.0.0.1:{self.webhook_port}{path}",
                    "caBundle": base64.b64encode(ca).decode()}
                hooks.append(hook)
            doc["webhooks"] = hooks
            docs.append(doc)
        return docs

    def again(self) -> Kueue:
        """A new Kueue as this one was started (this one stopped first): Kueue down and
        back."""
        self.stop()
        folder, config, released, visibility = self._args
        return Kueue(self.api, folder, name=self.name, config=config, released=released,
                     visibility=visibility)

    def wait_ready(self, timeout: float = 120) -> Kueue:
        """Wait for /readyz (its caches are synced and its webhook serves)."""
        wait_ready(self.proc, self.health_port, timeout, self.name, self.log)
        return self

    def metrics(self) -> str:
        """Its Prometheus metrics, as a scrape with a token of the API server's reads them
        (Kueue's metrics server authenticates and authorizes through the API server)."""
        context = ssl.create_default_context(cadata=ca_pem().decode())
        context.check_hostname = False  # its serving certificate names the Service
        request = urllib.request.Request(
            f"https://127.0.0.1:{self.metrics_port}/metrics",
            headers={"Authorization": f"Bearer {self.api.admin_token}"})
        with urllib.request.urlopen(request, context=context, timeout=10) as answer:
            return str(answer.read().decode())

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        """Stop it, and take its webhook configurations away (they fail closed)."""
        terminate(self.proc)
        for doc in self.webhooks:
            self.api.kubectl("delete", doc["kind"].lower(), doc["metadata"]["name"],
                             "--ignore-not-found", check=False)
