"""Upstream's words: the condition messages and event texts a kind's jobs are told with.

Clients and dashboards match these texts, so each is upstream v1.9.4's exact one. The
common controller's wording is the default; a kind whose own controller words a message
differently has a `Wording` subclass (`Framework.wording`).
"""

from __future__ import annotations

from trainop.api.resolved import resolve
from trainop.api.types import Defaulted
from trainop.engine import conditions as cond
from trainop.engine.observed import BatchJob


class Wording:
    """The common controller's texts (pkg/controller.v1/common)."""

    def short_title(self, job: Defaulted) -> bool:
        """Whether the kind names the job by its name alone in the Running and Succeeded
        messages (`K n is running.`, `K n is successfully completed.`) instead of
        `K ns/n is running.`, `K ns/n successfully completed.`."""
        return False

    def running(self, job: Defaulted) -> str:
        if self.short_title(job):
            return f"{job.kind} {job.name} is running."
        return f"{job.kind} {job.key} is running."

    def succeeded(self, job: Defaulted) -> str:
        if self.short_title(job):
            return f"{job.kind} {job.name} is successfully completed."
        return f"{job.kind} {job.key} successfully completed."

    def created(self, job: Defaulted) -> str:
        return f"{job.kind} {job.name} is created."

    def suspended(self, job: Defaulted, running: bool) -> list[tuple[str, str, str]]:
        """The conditions a suspend sets (type, status, message; the reason is
        `<Kind>Suspended`), in order, the job `running` or not: upstream v1's Running False
        (if it was True), then Suspended True, the last, which the State column shows
        (pkg/controller.v1/common/job.go:146-161)."""
        message = f"{job.kind} {job.name} is suspended."
        return [*([(cond.RUNNING, "False", message)] if running else []),
                (cond.SUSPENDED, "True", message)]

    def resumed(self, job: Defaulted) -> str:
        """The message of Suspended turned False, and of its event."""
        return f"{job.kind} {job.name} is resumed."

    def told(self, job: Defaulted, ctype: str) -> str | None:
        """The message of the event a `ctype` condition tells as it turns True, where its
        own message is not told: upstream v1.9 tells none for Created and Running."""
        return None

    def tells_objects(self, job: Defaulted) -> bool:
        """Whether the job's pods and services being made and deleted are told
        (`SuccessfulCreatePod`, ...: upstream v1's pod_control.go and service_control.go)."""
        return True

    def created_pod(self, rtype: str, name: str) -> str:
        """The message of a pod's SuccessfulCreatePod event."""
        return f"Created pod: {name}"

    def failed(self, job: Defaulted, failed: int, rtype: str, policy: str) -> str:
        """The Failed message when `failed` pods of `rtype` failed for good: an ExitCode
        replica's permanent exit code (pkg/controller.v1/common/pod.go:369), else the
        kind's UpdateJobStatus (e.g. pytorch/pytorchjob_controller.go:435)."""
        if policy == "ExitCode":
            return f'job "{job.name}" is failing because "{rtype}" replica(s) failed.'
        return f"{job.kind} {job.name} is failed because {failed} {rtype} replica(s) failed."

    def failed_reason(self, job: Defaulted) -> str:
        """The Failed condition's reason when replicas failed for good (its event's reason
        is always `KindFailed`)."""
        return f"{job.kind}Failed"

    def job_failed(self, job: Defaulted, state: BatchJob) -> tuple[str, str]:
        """The Failed reason and message (its event's too) of a job whose replica's
        batch/v1 Job failed (engine/batchjob.py): the Job's own, else the kind's."""
        return (state.reason or f"{job.kind}Failed",
                state.message or f"{job.kind} {job.key} has failed")

    def never_running(self, job: Defaulted) -> str | None:
        """The message of a Running False condition a job that ended gets where it never
        had one (mpi-operator's), or None: none (upstream v1)."""
        return None

    def evicted(self, job: Defaulted, evicted: int, total: int) -> str:
        """The Failed message of a job whose replica a Job makes once the cluster evicted
        `evicted` of its `total` other replicas (mpi-operator's updateMPIJobStatus)."""
        return f"{evicted}/{total} workers are evicted"

    def restarting(self, job: Defaulted, failed: int, rtype: str) -> str:
        """The Restarting message (pkg/controller.v1/common/pod.go:362)."""
        return f"job {job.name} is restarting because {rtype} replica(s) failed."

    def restarting_event(self, job: Defaulted, failed: int, rtype: str) -> str | None:
        """The Warning the kind's own controller tells on a restart besides pod.go's (e.g.
        pytorchjob_controller.go:430), if it has one."""
        return f"{job.kind} {job.name} is restarting because {failed} {rtype} replica(s) failed."


class ShortTitle(Wording):
    """A kind that names the job by its name alone (XGBoost, MPI)."""

    def short_title(self, job: Defaulted) -> bool:
        return True


class ShortTitleWithMaster(Wording):
    """PyTorch and Paddle: the name alone where the job has a Master (their controllers
    word the master's and the workers' status differently)."""

    def short_title(self, job: Defaulted) -> bool:
        return resolve(job).present("Master")
