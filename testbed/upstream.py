"""Upstream's training operator (github.com/kubeflow/training-operator) as a peer in the tests.

Its module comes from the Go module proxy: `go mod download` gives its source folder (its
CRDs under manifests/base/crds), and hack/test-assets.sh builds its binary, as
training-operator-VERSION beside the Kubernetes binaries. Nothing of it is in this project.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import subprocess
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509

from testbed.apiserver import Cluster, find_assets, release
from testbed.manager import terminate, wait_ready
from trainop.cluster.serving.certs import issue, new_ca
from trainop.local.ports import free_port

MODULE = "github.com/kubeflow/training-operator"

SCHEMA_KEYS = ("type", "format", "x-kubernetes-list-type", "x-kubernetes-list-map-keys",
               "x-kubernetes-map-type", "x-kubernetes-int-or-string",
               "x-kubernetes-preserve-unknown-fields", "x-kubernetes-validations",
               "required", "default", "enum", "pattern")
"""What a schema path must say as upstream's does (descriptions may differ)."""


def version() -> str:
    """The upstream release the suites compare with ($TRAINOP_UPSTREAM_VERSION)."""
    return release("upstream")


@cache
def go_module(module: str, version: str) -> Path:
    """The source of a Go module at `version`, from the Go module cache (downloaded from
    the module proxy on first use)."""
    env = {**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"}
    out = subprocess.run(["go", "mod", "download", "-json", f"{module}@{version}"],
                         check=True, capture_output=True, text=True, env=env,
                         cwd=Path.home())
    return Path(json.loads(out.stdout)["Dir"])


def module_dir() -> Path:
    """The source of upstream's module at `version()`."""
    return go_module(MODULE, version())


def crds() -> dict[str, dict[str, Any]]:
    """Upstream's CRDs by kind."""
    out = {}
    for path in sorted((module_dir() / "manifests" / "base" / "crds").glob("kubeflow.org_*.yaml")):
        crd = yaml.safe_load(path.read_text())
        out[crd["spec"]["names"]["kind"]] = crd
    return out


def binary() -> Path:
    """Upstream's operator, built by hack/test-assets.sh."""
    return find_assets() / f"training-operator-{version()}"


def schema_paths(schema: dict[str, Any], path: str = "") -> dict[str, dict[str, Any]]:
    """Every path of an OpenAPI schema (`.a.b`, `[]` for items, `{}` for a map's values)
    with the parts of its schema in SCHEMA_KEYS."""
    out = {path: {k: schema[k] for k in SCHEMA_KEYS if k in schema}}
    for name, sub in (schema.get("properties") or {}).items():
        out.update(schema_paths(sub, f"{path}.{name}"))
    if isinstance(schema.get("items"), dict):
        out.update(schema_paths(schema["items"], f"{path}[]"))
    if isinstance(schema.get("additionalProperties"), dict):
        out.update(schema_paths(schema["additionalProperties"], f"{path}{{}}"))
    return out


def crd_differences(ours: dict[str, Any], theirs: dict[str, Any]) -> list[str]:
    """Where CRD `ours` does not say what upstream's `theirs` says, version by version of
    theirs: a schema path of theirs missing from ours or different in SCHEMA_KEYS (paths
    only ours has are additions), and names, scope, printer columns (ours adds one,
    Progress, of priority 1) and subresources (versions only ours has are additions too)."""
    problems = []
    for key in ("group", "names", "scope"):
        if ours["spec"].get(key) != theirs["spec"].get(key):
            problems.append(f"spec.{key}: {ours['spec'].get(key)} != {theirs['spec'].get(key)}")
    for upstream in theirs["spec"]["versions"]:
        name = upstream["name"]
        mine = next((v for v in ours["spec"]["versions"] if v["name"] == name), None)
        if mine is None:
            problems.append(f"versions[{name}]: missing")
            continue
        problems.extend(_version_differences(name, mine, upstream))
    return problems


def _version_differences(name: str, mine: dict[str, Any], upstream: dict[str, Any]
                         ) -> list[str]:
    problems = []
    for key in ("served", "storage", "additionalPrinterColumns", "subresources"):
        have = mine.get(key)
        if key == "additionalPrinterColumns" and have is not None:
            # trainop's one addition, Progress, is of priority 1: `kubectl get` shows it
            # only with -o wide, its default output stays upstream's
            have = [c for c in have if not (c.get("priority", 0) >= 1 and
                                            c.get("name") == "Progress")] or None
        if have != upstream.get(key):
            problems.append(f"versions[{name}].{key}: {have} != {upstream.get(key)}")
    my_paths = schema_paths(mine["schema"]["openAPIV3Schema"])
    for path, want in schema_paths(upstream["schema"]["openAPIV3Schema"]).items():
        have = my_paths.get(path)
        if have is None:
            problems.append(f"{path or '.'}: missing")
            continue
        for key in SCHEMA_KEYS:
            mine_value, theirs_value = have.get(key), want.get(key)
            if key == "required":  # the same fields required, in any order
                mine_value = sorted(mine_value or [])
                theirs_value = sorted(theirs_value or [])
            if mine_value != theirs_value:
                problems.append(f"{path or '.'}: {key} {mine_value!r} != {theirs_value!r}")
    return problems


WEBHOOK_CONFIG = "validator.training-operator.kubeflow.org"
"""The ValidatingWebhookConfiguration upstream fills its CA into (its main.go)."""
NAMESPACE = "kubeflow"
"""Where upstream keeps its webhook certificate (MY_POD_NAMESPACE, as its Deployment sets)."""
CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")
"""Where upstream writes its serving certificate (fixed in its pkg/cert)."""
CERT_FILES = ("ca.crt", "ca.key", "tls.crt", "tls.key")


@cache
def certificates() -> tuple[bytes, dict[str, str]]:
    """The CA, and the files of upstream's webhook secret, as CERT_DIR holds them: made once
    on this machine (under a lock) and kept while they last, because every upstream started
    at once, by this process or another (the differential and node suites run side by
    side), reads that one folder and must serve what its API server was told to trust."""
    CERT_DIR.mkdir(parents=True, exist_ok=True)
    with open(CERT_DIR.parent / "serving-certs.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        files = {name: (CERT_DIR / name).read_text() for name in CERT_FILES
                 if (CERT_DIR / name).is_file()}
        if len(files) < len(CERT_FILES) or not _lasts(files["tls.crt"]):
            files = _new_certificates()
            for name, text in files.items():
                tmp = CERT_DIR / f".{name}.tmp"
                tmp.write_text(text)
                tmp.replace(CERT_DIR / name)
    return files["ca.crt"].encode(), files


def _lasts(cert_pem: str) -> bool:
    """Whether a certificate is valid for longer than upstream's rotator asks (90 days)."""
    cert = x509.load_pem_x509_certificate(cert_pem.encode())
    return cert.not_valid_after_utc > datetime.now(UTC) + timedelta(days=100)


def _new_certificates() -> dict[str, str]:
    ca = new_ca("training-operator-ca", days=365, dns_names=("training-operator-ca",))
    serving = issue(ca, f"training-operator.{NAMESPACE}.svc",
                    dns_names=[f"training-operator.{NAMESPACE}.svc"], ips=["127.0.0.1"],
                    days=365)
    return {"ca.crt": ca.cert_pem.decode(), "ca.key": ca.key_pem.decode(),
            "tls.crt": serving.cert_pem.decode(), "tls.key": serving.key_pem.decode()}


class UpstreamOperator:
    """Upstream's operator as a process against a test API server, with its own CRDs and its
    webhook registered as its manifests register it, but called at a loopback URL. Its
    certificate folder is fixed: every operator on this machine shares `certificates()`.

    Its certificate rotator keeps a secret whose CA is valid for the CA's name and whose
    serving certificate is valid for the Service's name, for at least 90 days: this one is
    made beforehand, for 127.0.0.1 too, so that the API server can call the loopback URL and
    the rotator keeps it."""

    def __init__(self, api: Cluster, *args: str, log_path: Path,
                 install_crds: bool = True, webhook_namespaces: dict[str, Any] | None = None):
        """`args`: upstream's flags; `webhook_namespaces`: a namespace selector for its
        webhooks (all namespaces if None)."""
        self.api = api
        self.log_path = log_path
        if install_crds:
            api.kubectl("apply", "--server-side", "-k",
                        str(module_dir() / "manifests" / "base" / "crds"))
            api.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        self.webhook_port, self.metrics_port, self.health_port = (
            free_port(), free_port(), free_port())
        ca_pem, files = certificates()
        api.kubectl("create", "namespace", NAMESPACE, check=False)
        secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {
            "name": "training-operator-webhook-cert", "namespace": NAMESPACE},
            "stringData": files}
        api.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-",
                    input=yaml.safe_dump(secret))
        # (CERT_DIR, where its Deployment mounts that secret, holds the files already: the
        # rotator waits to find them there)
        api.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-",
                    input=yaml.safe_dump(self.webhook_configuration(ca_pem,
                                                                    webhook_namespaces)))
        self.proc = subprocess.Popen(
            [str(binary()), "--kubeconfig", str(api.kubeconfig),
             "--metrics-bind-address", f"127.0.0.1:{self.metrics_port}",
             "--health-probe-bind-address", f"127.0.0.1:{self.health_port}",
             "--webhook-server-port", str(self.webhook_port), *args],
            env={**os.environ, "MY_POD_NAMESPACE": NAMESPACE},
            stdout=open(log_path, "wb"), stderr=subprocess.STDOUT)  # noqa: SIM115

    def webhook_configuration(self, ca_pem: bytes, namespaces: dict[str, Any] | None = None
                              ) -> dict[str, Any]:
        """Upstream's ValidatingWebhookConfiguration (its manifests, with the name its
        kustomization gives it), each webhook called at this process's loopback port."""
        path = module_dir() / "manifests" / "base" / "webhook" / "manifests.yaml"
        config = next(d for d in yaml.safe_load_all(path.read_text()) if d)
        config["metadata"] = {"name": WEBHOOK_CONFIG}
        for hook in config["webhooks"]:
            service = hook["clientConfig"].pop("service")
            hook["clientConfig"] = {
                "url": f"https://127.0.0.1:{self.webhook_port}{service['path']}",
                "caBundle": base64.b64encode(ca_pem).decode()}
            if namespaces is not None:
                hook["namespaceSelector"] = namespaces
        return dict(config)

    def wait_ready(self, timeout: float = 60) -> UpstreamOperator:
        """Wait for /readyz (its certificates are in place and its webhook serves)."""
        wait_ready(self.proc, self.health_port, timeout, "upstream", self.log)
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        """Stop it, and take its webhook configuration away (failing closed, it would
        refuse every job once nothing serves it)."""
        terminate(self.proc)
        self.api.kubectl("delete", "validatingwebhookconfiguration", WEBHOOK_CONFIG,
                         "--ignore-not-found", check=False)
