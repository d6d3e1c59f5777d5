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
    ca_data: bytes | None = None
    cert_data: bytes | None = None
    key_data: bytes | None = None
    """Inline kubeconfig credentials (…-data fields): kept in memory, never written out
    for longer than loading them takes."""

    def bearer(self) -> str | None:
        if self.token_file is not None:
            return self.token_file.read_text().strip()  # rotated by the kubelet: reread
        return self.token

    def ssl_context(self) -> ssl.SSLContext | bool:
        if not self.server.startswith("https"):
            return False
        ctx = ssl.create_default_context(
            cafile=self.ca_file, cadata=self.ca_data.decode() if self.ca_data else None)
        if self.insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if self.cert_data and self.key_data:
            _load_inline_chain(ctx, self.cert_data, self.key_data)
        elif self.cert_file and self.key_file:
            ctx.load_cert_chain(self.cert_file, self.key_file)
        return ctx


def _load_inline_chain(ctx: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    """ssl loads a client key only from a file: a private folder, removed at once."""
    with tempfile.TemporaryDirectory(prefix="trainop-") as folder:
        os.chmod(folder, 0o700)
        cert_path, key_path = Path(folder, "tls.crt"), Path(folder, "tls.key")
        cert_path.write_bytes(cert)
        key_path.touch(mode=0o600)
        key_path.write_bytes(key)
        ctx.load_cert_chain(cert_path, key_path)


def _mapping(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{what} is not a mapping")
    return value


def _named(entries: Any, name: Any, field: str, where: str) -> dict[str, Any] | None:
    """The `field` of the entry called `name` in a kubeconfig list (clusters, users, ...)."""
    if not isinstance(entries, list):
        return None
    for entry in entries:
        if isinstance(entry, dict) and entry.get("name") == name:
            return _mapping(entry.get(field) or {}, f"{where}: {field} {name!r}")
    return None


def _inline(obj: dict[str, Any], key: str, where: str) -> bytes | None:
    data = obj.get(f"{key}-data")
    if not data:
        return None
    try:
        return base64.b64decode(str(data), validate=True)
    except ValueError:
        raise ConfigError(f"{where}: {key}-data is not base64") from None


def from_kubeconfig(path: str | None = None, context: str | None = None) -> ClusterConfig:
    file = Path(path or os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
                or Path.home() / ".kube" / "config")
    if not file.is_file():
        raise ConfigError(f"no kubeconfig at {file}")
    try:
        doc = yaml.safe_load(file.read_text()) or {}
    except yaml.YAMLError as err:
        # the line number and the kind of problem only: the line may hold a token
        mark = getattr(err, "problem_mark", None)
        line = f" line {mark.line + 1}:" if mark is not None else ""
        raise ConfigError(f"{file}:{line} not valid YAML "
                          f"({getattr(err, 'problem', None) or 'unreadable'})") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"{file}: cannot be read ({err.__class__.__name__})") from None
    doc = _mapping(doc, str(file))
    name = context or doc.get("current-context")
    ctx = _named(doc.get("contexts"), name, "context", str(file))
    if ctx is None:
        raise ConfigError(f"{file}: no context {name!r}")
    cluster = _named(doc.get("clusters"), ctx.get("cluster"), "cluster", str(file))
    if cluster is None or not isinstance(cluster.get("server"), str):
        raise ConfigError(f"{file}: context {name!r} names no cluster with a server")
    user = _named(doc.get("users"), ctx.get("user"), "user", str(file)) or {}
    base = file.parent

    def path_of(key: str, obj: dict[str, Any]) -> str | None:
        return str((base / str(obj[key])).resolve()) if obj.get(key) else None

    return ClusterConfig(
        server=cluster["server"].rstrip("/"),
        token=str(user["token"]) if user.get("token") else None,
        token_file=Path(str(user["tokenFile"])) if user.get("tokenFile") else None,
        ca_file=path_of("certificate-authority", cluster),
        cert_file=path_of("client-certificate", user),
        key_file=path_of("client-key", user),
        ca_data=_inline(cluster, "certificate-authority", str(file)),
        cert_data=_inline(user, "client-certificate", str(file)),
        key_data=_inline(user, "client-key", str(file)),
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
        namespace=str(ctx.get("namespace") or "default"),
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
