"""Runtime-wide settings that change what the engine plans."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EngineConfig:
    gang_scheduler: str | None = None
    """--gang-scheduler-name: "volcano" for Volcano, any other name for scheduler-plugins."""
    hpa_api_version: str = "autoscaling/v2"
    """The HorizontalPodAutoscaler version the cluster serves (v2 or v2beta2)."""
    mpi_kubectl_delivery_image: str = "kubeflow/kubectl-delivery:latest"
    """--mpi-kubectl-delivery-image: the MPI launcher's init container that brings kubectl
    (upstream's default, pkg/config/config.go:35)."""

    @property
    def volcano(self) -> bool:
        return self.gang_scheduler == "volcano"
