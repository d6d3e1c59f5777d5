"""mpi-operator (github.com/kubeflow/mpi-operator), whose kubeflow.org/v2beta1 MPIJob trainop
serves beside v1, as a peer in the tests: its module comes from the Go module proxy, at the
release hack/test-assets.sh names ($TRAINOP_MPI_OPERATOR_VERSION). Nothing of it is in this
project."""

from __future__ import annotations

import fcntl
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import yaml

from testbed.apiserver import Cluster, find_assets, release
from testbed.manager import terminate, wait_logged
from testbed.upstream import go_module

MODULE = "github.com/kubeflow/mpi-operator"


def version() -> str:
    return release("mpi_operator")


def crd() -> dict[str, Any]:
    """mpi-operator's MPIJob CRD (manifests/base of its module)."""
    path = go_module(MODULE, version()) / "manifests" / "base" / "kubeflow.org_mpijobs.yaml"
    loaded: dict[str, Any] = yaml.safe_load(path.read_text())
    return loaded


HEALTH_PORT = 8080
"""mpi-operator's health port, fixed in its cmd/mpi-operator/app/server.go: one runs on a
machine at a time (LOCK)."""
LOCK = Path(tempfile.gettempdir()) / "trainop-mpi-operator.lock"


def binary() -> Path:
    """mpi-operator, built by hack/test-assets.sh."""
    return find_assets() / f"mpi-operator-{version()}"


class MPIOperator:
    """mpi-operator as a process against a test API server, on the MPIJob CRD installed
    there (trainop's, which serves v2beta1 through trainop's conversion webhook), in the
    namespaces `args` give it (`--namespace`). It always takes a Lease first (in
    `lock_namespace`, made here)."""

    def __init__(self, api: Cluster, *args: str, log_path: Path,
                 lock_namespace: str = "mpi-operator"):
        self.log_path = log_path
        self._lock = open(LOCK, "w")  # noqa: SIM115  (held for the operator's life)
        fcntl.flock(self._lock, fcntl.LOCK_EX)
        api.kubectl("create", "namespace", lock_namespace, check=False)
        self.proc = subprocess.Popen(
            [str(binary()), "--kubeConfig", str(api.kubeconfig),
             "--lock-namespace", lock_namespace, *args],
            env={k: v for k, v in os.environ.items() if k != "KUBECONFIG"},
            stdout=open(log_path, "wb"), stderr=subprocess.STDOUT)  # noqa: SIM115

    def wait_ready(self, timeout: float = 60) -> MPIOperator:
        """Wait until it leads and its workers run."""
        wait_logged(self.proc, lambda log: "Started workers" in log, timeout, "mpi-operator",
                    self.log)
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        terminate(self.proc)
        self._lock.close()
