"""Helpers for integration tests: a trainop manager subprocess, and a test's view of the
API server (apply, read, drive pod phases as a kubelet would)."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import yaml

from testbed.apiserver import Cluster, TestAPIServer
from testbed.manager import ManagerProcess
from tests.conftest import SA_TOKEN
from trainop.api import nesting
from trainop.local.ports import free_port

T = TypeVar("T")
REPO = Path(__file__).resolve().parents[2]


def wait_for(what: str, fn: Callable[[], T | None], timeout: float = 30,
             every: float = 0.2) -> T:
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


def condition_of(obj: dict[str, Any] | None, ctype: str, status: str = "True"
                 ) -> dict[str, Any] | None:
    """The condition `ctype` of `obj`'s status, where its status is `status`."""
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == ctype and c["status"] == status:
            return dict(c)
    return None


class Manager(ManagerProcess):
    """`trainop manager` for one test, logging into the test's folder."""

    webhook_port = 0  # where a test that serves the webhook told it to listen
    webhook_config = ""  # and the name of its webhook configurations

    def __init__(self, api: TestAPIServer, *args: str, log_dir: Path):
        super().__init__(api.kubeconfig, *args,
                         log_path=log_dir / f"manager-{uuid.uuid4().hex[:6]}.log")


class Kube:
    """One test's namespace on a test API server (or the real node's)."""

    def __init__(self, api: Cluster, ns: str | None = None, existing: bool = False):
        self.api = api
        self.ns = ns or f"t-{uuid.uuid4().hex[:8]}"
        if not existing:
            api.kubectl("create", "namespace", self.ns)

    def kubectl(self, *args: str, input: str | None = None) -> str:
        return self.api.kubectl(*args, "-n", self.ns, input=input).stdout

    def apply(self, doc: dict[str, Any]) -> None:
        doc = json.loads(json.dumps(doc))
        doc["metadata"].pop("uid", None)
        doc["metadata"]["namespace"] = self.ns
        self.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump(doc))

    def get(self, resource: str, name: str | None = None) -> Any:
        args = ["get", resource, "-o", "json"] + ([name] if name else [])
        out = self.api.kubectl(*args, "-n", self.ns, check=False)
        if out.returncode != 0:
            if "NotFound" in out.stderr:
                return None
            raise RuntimeError(out.stderr)
        return nesting.loads(out.stdout)  # a hostile test's job may be nested past json's limit

    def items(self, resource: str) -> list[dict[str, Any]]:
        return list(self.get(resource)["items"])

    def names(self, resource: str) -> list[str]:
        return sorted(i["metadata"]["name"] for i in self.items(resource))

    def job(self, kind: str, name: str) -> dict[str, Any]:
        return dict(self.get(f"{kind.lower()}s.kubeflow.org", name))

    def condition(self, kind: str, name: str, ctype: str) -> dict[str, Any] | None:
        return condition_of(self.job(kind, name), ctype)

    def wait_condition(self, kind: str, name: str, ctype: str, timeout: float = 30
                       ) -> dict[str, Any]:
        return wait_for(f"{kind}/{name} {ctype}",
                        lambda: self.condition(kind, name, ctype), timeout)

    def wait_pods(self, count: int, timeout: float = 30) -> list[str]:
        return wait_for(f"{count} pods", lambda: (lambda n: n if len(n) == count else None)(
            self.names("pods")), timeout)

    def set_pod(self, name: str, phase: str, exit_code: int | None = None,
                restarts: int = 0, reason: str | None = None, container: str = "main",
                last_exit: int | None = None) -> None:
        """Move a pod to `phase`, as a kubelet would report it (`last_exit`: the exit code
        of the run before a restart in place, in lastState)."""
        state: dict[str, Any] = {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
        if exit_code is not None:
            state = {"terminated": {"exitCode": exit_code, "reason": reason or (
                "Completed" if exit_code == 0 else "Error")}}
        pod = self.get("pod", name)
        if pod is None:
            return  # deleted meanwhile (an MPI worker once the launcher is done)
        cname = pod["spec"]["containers"][0]["name"] if container == "main" else container
        status = {"phase": phase, "containerStatuses": [{
            "name": cname, "ready": phase == "Running", "restartCount": restarts,
            "image": "x", "imageID": "", "state": state}]}
        if last_exit is not None:
            status["containerStatuses"][0]["lastState"] = {"terminated": {  # type: ignore[index]
                "exitCode": last_exit, "reason": "Error"}}
        out = self.api.kubectl("patch", "pod", name, "-n", self.ns, "--subresource=status",
                               "--type=merge", "-p", json.dumps({"status": status}),
                               check=False)
        if out.returncode != 0 and "NotFound" not in out.stderr:
            raise RuntimeError(out.stderr)

    def set_all(self, phase: str, prefix: str = "", **kw: Any) -> None:
        for name in self.names("pods"):
            if name.startswith(prefix):
                self.set_pod(name, phase, **kw)


def install_rbac(api: TestAPIServer) -> None:
    """The rendered install's RBAC objects, for real (the rest as it is)."""
    rendered = subprocess.run(["kubectl", "kustomize", str(REPO / "config" / "default")],
                              capture_output=True, text=True, check=True).stdout
    docs = [d for d in yaml.safe_load_all(rendered) if d["kind"] in (
        "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
        "RoleBinding")]
    api.kubectl("apply", "--server-side", "-f", "-",
                input="---\n".join(yaml.safe_dump(d) for d in docs))


def converting_manager(api: TestAPIServer, folder: Path, *args: str,
                       crd_converts: bool = True) -> Manager:
    """A manager whose webhook converts the MPIJob CRD's versions: the CRD's clientConfig
    leads to it (where its Service would in a cluster), and it has put its CA there
    (`crd_converts` False: the CRD converts nothing, and has neither). It runs as the
    install's ServiceAccount where install_rbac was called, else as admin."""
    port = free_port()
    if crd_converts:
        convert_at(api, port)
    installed = api.kubectl("get", "serviceaccount", "-n", "trainop-system", "trainop-manager",
                            check=False).returncode == 0
    kubeconfig = ("--kubeconfig", str(api.kubeconfig_for(SA_TOKEN, folder / "sa.kubeconfig"))
                  ) if installed else ()
    manager = Manager(api, *kubeconfig, "--webhook-port", str(port),
                      "--webhook-cert-dir", str(folder / "certs"),
                      "--webhook-service-name", "trainop-webhook",
                      "--webhook-service-namespace", "trainop-system",
                      "--webhook-secret-name", "trainop-webhook-cert", *args, log_dir=folder)
    try:
        manager.wait_ready()
        if crd_converts:
            wait_converting(api)
    except BaseException:
        manager.stop()
        raise
    return manager


def convert_at(api: TestAPIServer, port: int) -> None:
    """The MPIJob CRD's conversion webhook called at a manager's loopback `port` (where its
    Service would lead in a cluster)."""
    api.kubectl("patch", "crd", "mpijobs.kubeflow.org", "--type=json", "-p", json.dumps([{
        "op": "replace", "path": "/spec/conversion/webhook/clientConfig",
        "value": {"url": f"https://127.0.0.1:{port}/convert"}}]))


def wait_converting(api: TestAPIServer) -> None:
    """Wait for the manager to have put its CA in the MPIJob CRD (it then converts)."""
    wait_for("the CA bundle in the MPIJob CRD", lambda: json.loads(api.kubectl(
        "get", "crd", "mpijobs.kubeflow.org", "-o", "json").stdout)["spec"]["conversion"][
        "webhook"]["clientConfig"].get("caBundle"))
