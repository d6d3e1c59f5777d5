"""MPIJob: a launcher runs mpirun; the workers host the ranks it starts in them.

How the launcher reaches the workers is the job's `transport`: `KubectlExec` (the default,
training-operator v1's design, mpi_exec.py) or `SSH` (mpi-operator v2beta1's design, asked
for explicitly, mpi_ssh.py). Success is the launcher's either way.
"""

from __future__ import annotations

from typing import Any, Protocol

from trainop.api.jobs.mpijob import MPIJob, MPIJobSpec
from trainop.api.model import settled
from trainop.api.persona import MPI_OPERATOR
from trainop.api.resolved import resolve
from trainop.api.resources import (
    CONFIGMAPS,
    JOBS,
    ROLEBINDINGS,
    ROLES,
    SECRETS,
    SERVICEACCOUNTS,
)
from trainop.api.types import Defaulted
from trainop.engine import (
    Addressing,
    BatchJob,
    Counts,
    EngineConfig,
    Framework,
    Launcher,
    Observed,
    Phase,
)
from trainop.engine import conditions as cond
from trainop.engine.framework import spec_of
from trainop.engine.wording import ShortTitle
from trainop.frameworks import mpi_exec, mpi_ssh
from trainop.frameworks.common import all_succeeded
from trainop.frameworks.registry import declare, declare_persona


class Transport(Protocol):
    """What differs between the two designs."""

    def env(self, job: Defaulted, rtype: str, index: int, addr: Addressing) -> dict[str, str]: ...

    def env_containers(self, job: Defaulted) -> str | None: ...

    def decorate_pod(self, job: Defaulted, rtype: str, index: int, pod: dict[str, Any],
                     addr: Addressing, config: EngineConfig) -> None: ...

    def objects(self, job: Defaulted, observed: Observed, addr: Addressing
                      ) -> list[dict[str, Any]]: ...

    def wants_ssh_key(self, job: Defaulted, observed: Observed) -> bool: ...

    def stops_on_finish(self) -> tuple[str, ...]: ...

    def names_looked_up_once(self, job: Defaulted, rtype: str, addr: Addressing) -> list[str]: ...


TRANSPORTS: dict[str, Transport] = {"KubectlExec": mpi_exec.KubectlExec(),
                                    "SSH": mpi_ssh.SSH()}
MPI_OPERATOR_TRANSPORTS: dict[str, Transport] = {**TRANSPORTS, "SSH": mpi_ssh.MPIOperatorSSH()}
"""A job written in mpi-operator's API has its pods shaped as mpi-operator shapes them."""


def transport_of(transports: dict[str, Transport], job: Defaulted) -> Transport:
    return transports[settled(spec_of(job, MPIJobSpec).transport, "spec.transport")]


class MPIWording(ShortTitle):
    """MPI's own UpdateJobStatus words every condition (mpijob_controller.go:581-614): the
    job's name alone, and no common/pod.go messages (MPI reconciles its pods itself)."""

    def created_pod(self, rtype: str, name: str) -> str:
        if rtype == "Worker":
            return f"Created worker pod: {name}"  # mpijob_controller.go:891
        return super().created_pod(rtype, name)

    def failed(self, job: Defaulted, failed: int, rtype: str, policy: str) -> str:
        return f"MPIJob {job.name} is failed because {failed} {rtype} replica(s) failed."

    def failed_reason(self, job: Defaulted) -> str:
        # mpijob_controller.go:613 wraps NewReason twice (its event, :608, does not)
        return "MPIJobMPIJobFailed"

    def restarting(self, job: Defaulted, failed: int, rtype: str) -> str:
        return f"MPIJob {job.name} is restarting because {failed} {rtype} replica(s) failed."

    def job_failed(self, job: Defaulted, state: BatchJob) -> tuple[str, str]:
        # mpi-operator's updateMPIJobFailedStatus: a Job past its backoffLimit is told with
        # its newest failed pod's own reason and message
        reason = state.reason or "MPIJobFailed"
        message = state.message or f"MPIJob {job.key} has failed"
        if state.reason == "BackoffLimitExceeded" and state.last_failed is not None:
            reason += "/" + state.last_failed[0]
            message = truncated(f"{message}: {state.last_failed[1]}")
        return reason, message


class MPIOperatorWording(MPIWording):
    """mpi-operator's words (its mpi_job_controller.go and mpi_job_controller_status.go):
    `MPIJob <ns>/<name> ...`."""

    def short_title(self, job: Defaulted) -> bool:
        return False

    def created(self, job: Defaulted) -> str:
        return f"MPIJob {job.key} is created."

    def suspended(self, job: Defaulted, running: bool) -> list[tuple[str, str, str]]:
        # Running False whether it ran or not
        return [(cond.SUSPENDED, "True", "MPIJob suspended"),
                (cond.RUNNING, "False", f"MPIJob {job.key} is suspended.")]

    def resumed(self, job: Defaulted) -> str:
        return "MPIJob resumed"

    def never_running(self, job: Defaulted) -> str | None:
        return f"MPIJob {job.key} is finished but Running condition was never set."

    def tells_objects(self, job: Defaulted) -> bool:
        return False  # mpi-operator tells none

    def told(self, job: Defaulted, ctype: str) -> str | None:
        if ctype == cond.CREATED:
            return self.created(job)
        # mpi-operator tells this on every reconcile while the job runs; trainop once
        return f"MPIJob {job.key} is running" if ctype == cond.RUNNING else None


EVENT_MESSAGE_LIMIT = 1024
"""mpi-operator's eventMessageLimit (mpi_job_controller.go)."""


def truncated(message: str) -> str:
    """At most EVENT_MESSAGE_LIMIT bytes, `...` at the end of one cut (truncateMessage)."""
    raw = message.encode()
    if len(raw) <= EVENT_MESSAGE_LIMIT:
        return message
    return raw[:EVENT_MESSAGE_LIMIT - 3].decode(errors="ignore") + "..."


class MPILauncher(Launcher):
    """mpirun in the launcher starts the ranks in the workers, through the job's transport."""

    started = ("Worker",)
    grants = (ROLEBINDINGS, ROLES)

    def __init__(self, transports: dict[str, Transport]):
        self.transports = transports

    def objects(self, job: Defaulted, observed: Observed, addr: Addressing) -> list[dict[str, Any]]:
        return transport_of(self.transports, job).objects(job, observed, addr)

    def may_create(self, job: Defaulted, rtype: str, observed: Observed) -> bool:
        if rtype != "Launcher" or spec_of(job, MPIJobSpec).launcher_creation_policy != \
                "WaitForWorkersReady":
            return True
        ready = {p.index for p in observed.pods
                 if p.replica_type == "Worker" and p.phase == Phase.RUNNING and p.ready}
        return all(i in ready for i in range(resolve(job).replicas_of("Worker")))

    def wants_ssh_key(self, job: Defaulted, observed: Observed) -> bool:
        return transport_of(self.transports, job).wants_ssh_key(job, observed)

    def stops_on_finish(self, job: Defaulted) -> tuple[str, ...]:
        return transport_of(self.transports, job).stops_on_finish()


class MPIOperatorLauncher(MPILauncher):
    def batch_job(self, job: Defaulted) -> str | None:
        return "Launcher"  # mpi-operator's launcher is a batch/v1 Job (newLauncherJob)


class MPI(Framework[MPIJobSpec]):
    model = MPIJob
    spec_type = MPIJobSpec
    pod_services = False
    tells_exit_codes = False  # MPI reconciles its pods itself (mpijob_controller.go:330)
    owned = (CONFIGMAPS, SECRETS, SERVICEACCOUNTS, ROLES, ROLEBINDINGS, JOBS)
    wording: MPIWording = MPIWording()
    transports = TRANSPORTS
    launcher = MPILauncher(TRANSPORTS)

    def transport(self, job: Defaulted) -> Transport:
        return transport_of(self.transports, job)

    def env(self, job: Defaulted, rtype: str, index: int, addr: Addressing) -> dict[str, str]:
        return self.transport(job).env(job, rtype, index, addr)

    def env_containers(self, job: Defaulted) -> str | None:
        return self.transport(job).env_containers(job)

    def decorate_pod(self, job: Defaulted, rtype: str, index: int, pod: dict[str, Any],
                     addr: Addressing, config: EngineConfig) -> None:
        self.transport(job).decorate_pod(job, rtype, index, pod, addr, config)

    def names_looked_up_once(self, job: Defaulted, rtype: str, index: int, addr: Addressing
                             ) -> list[str]:
        return self.transport(job).names_looked_up_once(job, rtype, addr)

    def succeeded(self, job: Defaulted, counts: dict[str, Counts]) -> bool:
        return all_succeeded(counts, "Launcher")


class MPIOperatorMPI(MPI):
    """An MPIJob written in mpi-operator's API (v2beta1), run as mpi-operator runs it: its
    words, its pods' shape, its launcher a batch/v1 Job."""

    wording = MPIOperatorWording()
    transports = MPI_OPERATOR_TRANSPORTS
    launcher = MPIOperatorLauncher(MPI_OPERATOR_TRANSPORTS)

    def running(self, job: Defaulted, counts: dict[str, Counts]) -> bool:
        # a launcher pod runs and so does every worker (updateMPIJobStatus)
        worker = counts.get("Worker")
        return counts["Launcher"].active > 0 and (worker is None
                                                   or worker.active == worker.replicas)


declare(MPI())
declare_persona(MPI_OPERATOR, MPIOperatorMPI())
