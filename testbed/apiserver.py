"""Start etcd and kube-apiserver on free loopback ports, envtest style.

The binaries come from $KUBEBUILDER_ASSETS, else hack/test-assets.sh provides them (built
once per Kubernetes release from the Go module proxy, then cached). Token auth and RBAC
are on; `admin_token` belongs to system:masters. Everything lives in one temporary
folder and every process is stopped by `stop()`.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shutil
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import yaml

from testbed.processes import Daemons
from trainop.cluster.serving.certs import CertPair, issue, new_ca, rsa_key_pem
from trainop.local.ports import free_port

REPO = Path(__file__).resolve().parents[1]
ASSETS = ("etcd", "kube-apiserver", "kubectl")


class Cluster(Protocol):
    """What a test drives a cluster through: a test API server, or the real node's."""

    @property
    def kubeconfig(self) -> Path: ...

    def kubectl(self, *args: str, input: str | None = None, check: bool = True
                ) -> subprocess.CompletedProcess[str]: ...


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def release(component: str = "kube") -> str:
    """The release of `component` (kube, etcd or containerd) the suites run on:
    $TRAINOP_<COMPONENT>_VERSION, else the default that hack/test-assets.sh builds."""
    variable = f"TRAINOP_{component.upper()}_VERSION"
    script = (REPO / "hack" / "test-assets.sh").read_text()
    default = re.search(rf"{variable}:-(v[0-9.]+)", script)
    assert default, f"hack/test-assets.sh names no default for {variable}"
    return os.environ.get(variable) or default.group(1)


def serves_workload_api() -> bool:
    """Whether the suites' Kubernetes release has the Workload API (scheduling.k8s.io/
    v1beta1 Workload and PodGroup, 1.37+): its feature gates are known there, and only
    there may the test bed turn them on."""
    major, minor = (int(part) for part in release().lstrip("v").split(".")[:2])
    return (major, minor) >= (1, 37)


def find_assets() -> Path:
    """The folder holding etcd, kube-apiserver and kubectl (and the real node's binaries
    where they were built), provided by hack/test-assets.sh on first use; kubectl from it
    comes first on PATH, so the tests' kubectl is the release the API server is."""
    env = os.environ.get("KUBEBUILDER_ASSETS")
    if env and all((Path(env) / b).is_file() for b in ASSETS):
        assets = Path(env)
    else:
        script = REPO / "hack" / "test-assets.sh"
        out = subprocess.run(["bash", str(script)], check=True, stdout=subprocess.PIPE,
                             text=True)
        assets = Path(out.stdout.strip().splitlines()[-1])
    path = os.environ.get("PATH", "")
    if not path.startswith(f"{assets}{os.pathsep}"):
        os.environ["PATH"] = f"{assets}{os.pathsep}{path}"
    return assets


@dataclass
class TestAPIServer:
    """A running etcd + kube-apiserver pair; use as a context manager or call stop()."""

    __test__ = False  # not a pytest test class

    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="trainop-api-")))
    extra_args: list[str] = field(default_factory=list)
    users: dict[str, tuple[str, list[str]]] = field(default_factory=dict)
    """More static tokens: token -> (user name, groups), e.g. a ServiceAccount's."""
    address: str = "127.0.0.1"
    """Where it listens (and what it advertises as the `kubernetes` Service's endpoint)."""
    listen_all: bool = False
    service_cidr: str = "10.0.0.0/24"
    sans: list[str] = field(default_factory=list)
    """More names and addresses its serving certificate is valid for."""
    authorization_modes: str = "RBAC"
    disabled_admission: str = "ServiceAccount"
    ca: CertPair | None = None
    """The CA it trusts for client certificates and signs its own with (made if None)."""
    aggregation: bool = False
    """Serve APIServices of extension API servers (Kueue's visibility API): a front-proxy
    CA and client certificate, as kubeadm sets them, and requests routed to the
    endpoints of an APIService's Service (there is no kube-proxy here)."""
    url: str = ""
    admin_token: str = "trainop-admin-token"
    kubeconfig: Path = Path()
    ca_file: Path = Path()
    etcd_url: str = ""
    daemons: Daemons | None = None
    _apiserver_args: list[str] = field(default_factory=list)

    def start(self, timeout: float = 60) -> TestAPIServer:
        assets = find_assets()
        self.daemons = Daemons(self.workdir)
        self._start_etcd(assets)
        self._start_apiserver(assets, timeout)
        return self

    def _spawn(self, name: str, args: list[str]) -> None:
        assert self.daemons is not None, "start() first"
        self.daemons.spawn(name, args)

    def _start_etcd(self, assets: Path) -> None:
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client}"
        self._spawn("etcd", [
            str(assets / "etcd"), "--name", "trainop-test",
            "--data-dir", str(self.workdir / "etcd"),
            "--listen-client-urls", self.etcd_url, "--advertise-client-urls", self.etcd_url,
            "--listen-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-cluster", f"trainop-test=http://127.0.0.1:{peer}",
            "--unsafe-no-fsync",
        ])

    def _start_apiserver(self, assets: Path, timeout: float) -> None:
        w = self.workdir
        ca = self.ca = self.ca or new_ca("kube-apiserver-ca")
        names = ["localhost", "127.0.0.1", self.address, *self.sans]
        serving = issue(ca, "kube-apiserver",
                        dns_names=[n for n in names if not _is_ip(n)],
                        ips=sorted({n for n in names if _is_ip(n)}))
        self.ca_file = w / "ca.crt"
        self.ca_file.write_bytes(ca.cert_pem)
        (w / "apiserver.crt").write_bytes(serving.cert_pem)
        (w / "apiserver.key").write_bytes(serving.key_pem)
        (w / "sa.key").write_bytes(rsa_key_pem())
        lines = [f'{self.admin_token},trainop-admin,1,"system:masters"']
        for n, (token, (user, groups)) in enumerate(self.users.items()):
            lines.append(f'{token},{user},{n + 2},"{",".join(groups)}"')
        (w / "tokens.csv").write_text("\n".join(lines) + "\n")
        port = free_port()
        self.url = f"https://{self.address}:{port}"
        self._apiserver_args = [
            str(assets / "kube-apiserver"),
            "--etcd-servers", self.etcd_url,
            "--bind-address", "0.0.0.0" if self.listen_all else self.address,
            "--advertise-address", self.address,
            "--secure-port", str(port),
            "--tls-cert-file", str(w / "apiserver.crt"),
            "--tls-private-key-file", str(w / "apiserver.key"),
            "--cert-dir", str(w / "certs"),
            "--token-auth-file", str(w / "tokens.csv"),
            "--client-ca-file", str(self.ca_file),
            "--authorization-mode", self.authorization_modes,
            "--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
            "--service-account-key-file", str(w / "sa.key"),
            "--service-account-signing-key-file", str(w / "sa.key"),
            "--service-cluster-ip-range", self.service_cidr,
            "--disable-admission-plugins", self.disabled_admission,
            "--allow-privileged=true",
            # the `kubernetes` Service's endpoint may not be a loopback address (envtest
            # turns its reconciler off the same way)
            *(("--endpoint-reconciler-type", "none")
              if ipaddress.ip_address(self.address).is_loopback else ()),
            *(self._aggregation_args() if self.aggregation else ()),
            *self.extra_args,
        ]
        self._spawn("kube-apiserver", self._apiserver_args)
        self.kubeconfig = w / "kubeconfig"
        self.kubeconfig.write_text(yaml.safe_dump(self.kubeconfig_dict(self.admin_token)))
        self._wait_ready(timeout)

    def _aggregation_args(self) -> list[str]:
        w = self.workdir
        ca = new_ca("front-proxy-ca")
        client = issue(ca, "front-proxy-client")
        (w / "front-proxy-ca.crt").write_bytes(ca.cert_pem)
        (w / "front-proxy-client.crt").write_bytes(client.cert_pem)
        (w / "front-proxy-client.key").write_bytes(client.key_pem)
        return ["--requestheader-client-ca-file", str(w / "front-proxy-ca.crt"),
                "--requestheader-allowed-names", "front-proxy-client",
                "--requestheader-username-headers", "X-Remote-User",
                "--requestheader-group-headers", "X-Remote-Group",
                "--requestheader-extra-headers-prefix", "X-Remote-Extra-",
                "--proxy-client-cert-file", str(w / "front-proxy-client.crt"),
                "--proxy-client-key-file", str(w / "front-proxy-client.key"),
                "--enable-aggregator-routing=true"]

    def kubeconfig_dict(self, token: str, user: str = "admin") -> dict[str, object]:
        """A kubeconfig for this server that authenticates with `token`."""
        return {
            "apiVersion": "v1", "kind": "Config", "current-context": "test",
            "clusters": [{"name": "test", "cluster": {
                "server": self.url, "certificate-authority": str(self.ca_file)}}],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": user}}],
        }

    def kubeconfig_for(self, token: str, path: Path) -> Path:
        """Write a kubeconfig that authenticates with `token` (one of `users`)."""
        path.write_text(yaml.safe_dump(self.kubeconfig_dict(token, "user")))
        return path

    def _wait_ready(self, timeout: float) -> None:
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            exited = self.daemons.exited() if self.daemons else "not started"
            if exited:
                self.stop()
                raise RuntimeError(exited)
            req = urllib.request.Request(
                f"{self.url}/readyz", headers={"Authorization": f"Bearer {self.admin_token}"}
            )
            try:
                with urllib.request.urlopen(req, context=ctx, timeout=2) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError) as err:
                last = str(err)
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"kube-apiserver not ready after {timeout}s ({last})")

    def stop_apiserver(self) -> None:
        """Kill kube-apiserver only, as a crash would (etcd keeps every object)."""
        if self.daemons:
            self.daemons.kill("kube-apiserver")

    def start_apiserver(self, timeout: float = 60) -> None:
        """Start kube-apiserver again, on the same port, against the same etcd."""
        self._spawn("kube-apiserver", self._apiserver_args)
        self._wait_ready(timeout)

    def etcd_compact(self) -> int:
        """Compact etcd to its current revision: older resourceVersions are gone (410)."""
        def call(path: str, body: dict[str, object]) -> dict[str, object]:
            req = urllib.request.Request(f"{self.etcd_url}{path}", json.dumps(body).encode(),
                                         {"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=10) as resp:
                return dict(json.loads(resp.read()))
        header = call("/v3/kv/range", {"key": "AA=="})["header"]
        revision = int(header["revision"])  # type: ignore[index]
        call("/v3/kv/compaction", {"revision": str(revision), "physical": True})
        return revision

    def kubectl(self, *args: str, input: str | None = None, check: bool = True
                ) -> subprocess.CompletedProcess[str]:
        """Run kubectl against this server as admin."""
        out = subprocess.run(
            ["kubectl", "--kubeconfig", str(self.kubeconfig), *args],
            input=input, capture_output=True, text=True, timeout=120,
        )
        if check and out.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {out.stderr.strip()}")
        return out

    def stop(self, keep_workdir: bool = False) -> None:
        if self.daemons:
            self.daemons.stop()
        if not keep_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> TestAPIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
