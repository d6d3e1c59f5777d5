"""MPIJob: its spec (and the validation rules of its own) and its model, which declares the
kind with its facts."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from trainop.api.kinds import KindInfo, declare_kind
from trainop.api.problems import Problem, exactly_one
from trainop.api.types import (
    CleanPodPolicy,
    Job,
    JobSpec,
    ReplicaSpec,
)

SSH_AUTH_MOUNT_PATH = "/root/.ssh"
"""Where an MPIJob's SSH key is mounted unless it says (mpi-operator's default)."""


class MPIJobSpec(JobSpec):
    replica_specs: dict[str, ReplicaSpec] = Field(default_factory=dict, alias="mpiReplicaSpecs")
    checks_managed_by: ClassVar[bool] = False  # pkg/apis/kubeflow.org/v1/mpi_validation.go
    slots_per_worker: int | None = None
    clean_pod_policy: CleanPodPolicy | None = Field(
        None, description="Deprecated: use runPolicy.cleanPodPolicy."
    )
    main_container: str | None = None
    transport: Literal["KubectlExec", "SSH"] | None = Field(
        None, description="trainop: how the launcher starts the ranks in the workers. "
        "KubectlExec (default, as training-operator v1): kubectl exec through a Role of the "
        "job's own. SSH (mpi-operator v2beta1's design): an SSH key Secret, workers run sshd."
    )
    mpi_implementation: Literal["OpenMPI", "Intel", "MPICH"] | None = Field(
        None, description="trainop, with transport SSH: the hostfile format and launcher "
        "environment."
    )
    launcher_creation_policy: Literal["AtStartup", "WaitForWorkersReady"] | None = Field(
        None, description="trainop: create the launcher at once or when all workers are ready."
    )
    run_launcher_as_worker: bool | None = Field(
        None, description="trainop, with transport SSH: the launcher hosts ranks too, first "
        "in the hostfile (mpi-operator v2beta1's field)."
    )
    ssh_auth_mount_path: str | None = Field(
        None, description="trainop, with transport SSH: where the SSH key is mounted "
        "(default /root/.ssh; mpi-operator v2beta1's field)."
    )

    def main_container_name(self) -> str | None:
        return self.main_container

    def default_kind_fields(self) -> None:
        rp = self.run_policy
        if rp.clean_pod_policy is None and self.clean_pod_policy:
            rp.clean_pod_policy = self.clean_pod_policy  # the deprecated spec-level field
        if self.slots_per_worker is None:
            self.slots_per_worker = 1
        if self.transport is None:
            self.transport = "KubectlExec"
        if self.mpi_implementation is None:
            self.mpi_implementation = "OpenMPI"
        if self.launcher_creation_policy is None:
            self.launcher_creation_policy = "AtStartup"
        if self.run_launcher_as_worker is None:
            self.run_launcher_as_worker = False
        if self.ssh_auth_mount_path is None:
            self.ssh_auth_mount_path = SSH_AUTH_MOUNT_PATH

    def update_problems(self, before: JobSpec) -> list[Problem]:
        # the pods and objects of one transport cannot become the other's
        if isinstance(before, MPIJobSpec) and before.transport != self.transport:
            return [Problem("spec.transport", "is immutable")]
        return []

    def kind_problems(self, field: str) -> list[Problem]:
        problems = exactly_one(field, self.replica_specs, "Launcher")
        if self.slots_per_worker is not None and self.slots_per_worker < 1:
            problems.append(Problem(
                "spec.slotsPerWorker", f"must be 1 or more, got {self.slots_per_worker}"))
        if self.transport != "SSH" and self.mpi_implementation not in (None, "OpenMPI"):
            problems.append(Problem(
                "spec.mpiImplementation", f"{self.mpi_implementation} needs transport: SSH "
                "(the KubectlExec transport writes Open MPI's hostfile, as training-operator "
                "v1 does)"))
        if self.transport != "SSH" and self.run_launcher_as_worker:
            problems.append(Problem("spec.runLauncherAsWorker", "needs transport: SSH"))
        if self.transport != "SSH" and self.ssh_auth_mount_path not in (
                None, SSH_AUTH_MOUNT_PATH):
            problems.append(Problem("spec.sshAuthMountPath", "needs transport: SSH (the "
                                    "KubectlExec transport mounts no SSH key)"))
        if self.ssh_auth_mount_path is not None and \
                not self.ssh_auth_mount_path.startswith("/"):
            problems.append(Problem("spec.sshAuthMountPath", "must be an absolute path, got "
                                    f"{self.ssh_auth_mount_path!r}"))
        return problems


@declare_kind
class MPIJob(Job):
    kind: Literal["MPIJob"] = "MPIJob"
    spec: MPIJobSpec
    info = KindInfo(
        kind="MPIJob", plural="mpijobs", replica_specs_field="mpiReplicaSpecs",
        replica_types=("Launcher", "Worker"),
        default_container="mpi", default_port_name="mpi-port", default_port=9999,
        default_restart_policy="Never", framework="mpi",
        master_role=("Launcher",), default_ports=False, unset_replicas_zero=("Worker",),
        pods_under_one_service=True, free_container_names=True, age_column_first=True,
        unindexed_types=("Launcher",), validating_webhook=False)
