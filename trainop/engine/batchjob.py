"""A replica made by a batch/v1 Job rather than by a pod of the engine's own: mpi-operator's
launcher (mpi_job_controller.go: newLauncherJob). The Job carries the job's backoffLimit,
activeDeadlineSeconds, ttlSecondsAfterFinished and suspend, and Kubernetes' Job controller
restarts the replica's pod under them; the engine makes the Job, suspends and resumes it,
and reads the replica's counts and end from its status."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trainop.api import Job, ReplicaStatus
from trainop.api.resources import JOBS
from trainop.engine.framework import Counts
from trainop.engine.labels import app_labels, object_meta, replica_name
from trainop.engine.observed import BatchJob, OwnedObject, Phase

if TYPE_CHECKING:
    from trainop.engine.round import Round

COMPLETE = "Complete"
FAILED = "Failed"


def observed_job(r: Round) -> OwnedObject | None:
    """The batch/v1 Job of the round's replica `r.batch`, as observed."""
    if r.batch is None:
        return None
    return r.observed.object(JOBS.kind, replica_name(r.job, r.batch, 0))


def observed_state(r: Round) -> BatchJob | None:
    """What the observed Job's status says, or None where there is no Job."""
    found = observed_job(r)
    return found.job if found is not None else None


def desired(job: Job, pod: dict[str, Any], suspended: bool) -> dict[str, Any]:
    """The Job that makes the replica of `pod` (a desired pod of the engine's), named as
    the pod would be; `suspend` is written only when true, as mpi-operator writes it."""
    meta = pod["metadata"]
    run_policy = job.spec.run_policy
    spec: dict[str, Any] = {}
    for field, value in (("backoffLimit", run_policy.backoff_limit),
                         ("activeDeadlineSeconds", run_policy.active_deadline_seconds),
                         ("ttlSecondsAfterFinished", run_policy.ttl_seconds_after_finished)):
        if value is not None:
            spec[field] = value
    if suspended:
        spec["suspend"] = True
    # a pod that fails is replaced once it has failed, not while it terminates
    spec["podReplacementPolicy"] = "Failed"
    spec["template"] = {
        "metadata": {k: meta[k] for k in ("labels", "annotations") if meta.get(k)},
        "spec": pod["spec"],
    }
    return JOBS.new(object_meta(job, meta["name"], app_labels(job)), spec=spec)


def update(job: Job, name: str, suspended: bool, template: dict[str, Any] | None
           ) -> dict[str, Any]:
    """What of Job `name` to change (objects.patch_of): whether it is suspended and, for
    one resumed that never ran, the scheduling directives of `template` (the desired
    Job's; None for one that ran)."""
    spec: dict[str, Any] = {"suspend": suspended}
    if template is not None:
        spec["template"] = template
    return JOBS.new({"name": name, "namespace": job.namespace}, spec=spec)


def counts(state: BatchJob | None, replicas: int) -> Counts:
    """The replica's counts as the Job tells them (mpi-operator's updateMPIJobStatus):
    its failed pods, one succeeded once it completed, and its running pods while it has
    not ended."""
    if state is None:
        return Counts(replicas=replicas)
    done = state.finished is not None
    return Counts(replicas=replicas, active=0 if done else state.running,
                  succeeded=1 if state.finished == COMPLETE else 0, failed=state.failed,
                  succeeded_indexes=frozenset({0}) if state.finished == COMPLETE
                  else frozenset())


def replica_statuses(counts_by_type: dict[str, Counts], rtype: str, state: BatchJob | None,
                     stopped: bool) -> dict[str, ReplicaStatus]:
    """`status.replicaStatuses` as mpi-operator writes them (updateMPIJobStatus,
    cleanUpWorkerPods): the Job's replica only once its Job exists, as the Job tells it
    (`counts`); every other type's pods counted while the job runs, and none at all
    (`{}`) once it is `stopped` (suspended, or its Job ended): mpi-operator no longer
    lists those pods then, whatever they did."""
    out: dict[str, ReplicaStatus] = {}
    for name, c in counts_by_type.items():
        if name == rtype:
            if state is None:
                continue
            c = counts(state, c.replicas)
        elif stopped:
            c = Counts(replicas=c.replicas)
        out[name] = ReplicaStatus(active=c.active, succeeded=c.succeeded, failed=c.failed)
    return out


def step(r: Round) -> bool:
    """A job whose replica a Job makes ends when that Job fails, and no other pod's end
    decides anything (mpi-operator: a worker that fails is not made again), but one the
    cluster evicted; True when the job ended (nothing more to do in this round)."""
    assert r.batch is not None
    state = observed_state(r)
    if state is not None and state.finished == FAILED:
        reason, message = r.fw.wording.job_failed(r.job, state)
        if r.report.fail(reason, message):
            r.plan.add_metric("failed")
        return True
    # a replica the cluster evicted ends the job (mpi-operator's updateMPIJobStatus;
    # it does not count such a job as failed)
    others = [p for p in r.observed.live_pods() if p.replica_type != r.batch
              and r.resolved.in_spec(p.replica_type, p.index)]
    evicted = sum(1 for p in others if p.phase == Phase.FAILED and p.reason == "Evicted")
    if evicted:
        total = r.resolved.total - r.resolved.replicas[r.batch]
        r.report.fail(f"{r.job.kind}Evicted", r.fw.wording.evicted(r.job, evicted, total))
        return True
    return False
