"""mpi-operator (github.com/kubeflow/mpi-operator), whose kubeflow.org/v2beta1 MPIJob trainop
serves beside v1, as a peer in the tests: its module comes from the Go module proxy, at the
release hack/test-assets.sh names ($TRAINOP_MPI_OPERATOR_VERSION). Nothing of it is in this
project."""

from __future__ import annotations

from typing import Any

import yaml

from testbed.apiserver import release
from testbed.upstream import go_module

MODULE = "github.com/kubeflow/mpi-operator"


def version() -> str:
    return release("mpi_operator")


def crd() -> dict[str, Any]:
    """mpi-operator's MPIJob CRD (manifests/base of its module)."""
    path = go_module(MODULE, version()) / "manifests" / "base" / "kubeflow.org_mpijobs.yaml"
    loaded: dict[str, Any] = yaml.safe_load(path.read_text())
    return loaded
