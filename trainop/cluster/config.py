"""Where the API server is and how to authenticate: kubeconfig or in-cluster."""

from __future__ import annotations

import base64
import os
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class ConfigError(ValueError):
    """No usable connection settings."""


@dataclass
class ClusterConfig:
    server: str
    token: str | None = None
    token_file: Path | None = None
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    insecure: bool = False
    namespace: str = "default"

    def bearer(self) -> str | None:
        if self.token_file is not None:
            return self.token_file.read_text().strip()  # rotated by the kubelet: reread
        return self.token

    def ssl_context(self) -> ssl.SSLContext | bool:
        if not self.server.startswith("https"):
            return False
        ctx = ssl.create_default_context(cafile=self.ca_file)
        if self.insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if self.cert_file and self.key_file:
            ctx.load_cert_chain(self.cert_file, self.key_file)
        return ctx


def _materialise(data_b64: str) -> str:
    """Inline kubeconfig data (…-data fields) as a private temporary file."""
    fd, path = tempfile.mkstemp(prefix="trainop-", suffix=".pem")
    with os.fdopen(fd, "wb") as f:
        f.write(base64.b64decode(data_b64))
    return path


def from_kubeconfig(path: str | None = None, context: str | None = None) -> ClusterConfig:
    file = Path(path or os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
                or Path.home() / ".kube" / "config")
    if not file.is_file():
        raise ConfigError(f"no kubeconfig at {file}")
    try:
        doc: dict[str, Any] = yaml.safe_load(file.read_text()) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"{file}: not valid YAML ({err})") from None
    name = context or doc.get("current-context")
    ctx = next((c["context"] for c in doc.get("contexts") or [] if c.get("name") == name), None)
    if ctx is None:
        raise ConfigError(f"{file}: no context {name!r}")
    cluster = next((c["cluster"] for c in doc.get("clusters") or []
                    if c.get("name") == ctx.get("cluster")), None)
    if cluster is None or not cluster.get("server"):
        raise ConfigError(f"{file}: context {name!r} names no cluster with a server")
    user = next((u.get("user") or {} for u in doc.get("users") or []
                 if u.get("name") == ctx.get("user")), {})
    base = file.parent

    def path_of(key: str, obj: dict[str, Any]) -> str | None:
        if obj.get(f"{key}-data"):
            return _materialise(obj[f"{key}-data"])
        if obj.get(key):
            return str((base / obj[key]).resolve())
        return None

    return ClusterConfig(
        server=cluster["server"].rstrip("/"),
        token=user.get("token"),
        token_file=Path(user["tokenFile"]) if user.get("tokenFile") else None,
        ca_file=path_of("certificate-authority", cluster),
        cert_file=path_of("client-certificate", user),
        key_file=path_of("client-key", user),
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
        namespace=ctx.get("namespace") or "default",
    )


def in_cluster() -> ClusterConfig:
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get(
        "KUBERNETES_SERVICE_PORT")
    if not host or not (SA_DIR / "token").is_file():
        raise ConfigError("not running in a cluster (no service account token)")
    host = f"[{host}]" if ":" in host else host
    return ClusterConfig(server=f"https://{host}:{port}", token_file=SA_DIR / "token",
                         ca_file=str(SA_DIR / "ca.crt"),
                         namespace=(SA_DIR / "namespace").read_text().strip())


def load(kubeconfig: str | None = None) -> ClusterConfig:
    """An explicit kubeconfig, else in-cluster, else $KUBECONFIG or ~/.kube/config."""
    if kubeconfig:
        return from_kubeconfig(kubeconfig)
    try:
        return in_cluster()
    except ConfigError:
        return from_kubeconfig()
