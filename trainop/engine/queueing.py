"""What a queued job and its Kueue Workloads need next, for a kind trainop keeps Workloads
for: decided in the order Kueue's job framework decides it for a built-in kind (sigs.k8s.io/
kueue v0.19.2, pkg/controller/jobframework/reconciler.go: ReconcileGenericJob and
ensureOneWorkload), with Kueue's reasons and words. Pure: the manager carries out the Step
(and reads the job's pods' admission from engine/workload.py when it makes them).

The job's `runPolicy.suspend` is what Kueue's own integrations drive: suspended while
queued, resumed on admission, suspended again on eviction; the engine's suspend rules do
the rest (no pods, nothing counted against the job)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trainop.api import Job
from trainop.api.resolved import restarts_every_replica
from trainop.engine import clock
from trainop.engine import workload as wl
from trainop.engine.plan import Event
from trainop.engine.workload import PriorityClasses
from trainop.engine.workload_record import Workload, WorkloadCondition

PREBUILT_LABEL = "kueue.x-k8s.io/prebuilt-workload-name"
"""A job label (or annotation) naming the Workload made for it beforehand (MultiKueue's
copy on a worker cluster)."""
DEFAULT_QUEUE = "default"
"""The LocalQueue a new job that names none is given where its namespace has a LocalQueue
of this name (Kueue's LocalQueueDefaulting, GA)."""
MAX_CONDITION_MESSAGE = 32 * 1024
"""Kueue cuts a condition's message there (pkg/util/api: maxConditionMsgSize)."""

# the reasons of Kueue's Workload conditions (apis/kueue/v1beta2/workload_types.go)
PREEMPTED = "Preempted"
NODE_FAILURES = "NodeFailures"
PENDING = "Pending"
OUT_OF_SYNC = "OutOfSync"


@dataclass(frozen=True)
class JobState:
    """What of the job Kueue's integration reads (kubeflowjob_controller.go)."""

    suspended: bool
    """runPolicy.suspend."""
    active: bool
    """A replica type counts an active pod (IsActive: the quota is still in use)."""
    running: bool
    """The Running condition is True (PodsReady: every pod is ready)."""
    ended: tuple[bool, str] | None = None
    """(succeeded, message) of the job's Succeeded or Failed condition, once it has one."""
    started: bool = True
    """It ran once (status.startTime): a job that never did is suspended without a word,
    as Kueue's webhook suspends a queued job it admits to the API server."""
    succeeded: Mapping[str, int] = field(default_factory=dict)
    """Replica type -> pods of it that succeeded (status.replicaStatuses[*].succeeded)."""


@dataclass
class StatusPatch:
    """A Workload's status as it should be: its conditions, and `admission` None where the
    quota is given back."""

    workload: Workload
    conditions: list[WorkloadCondition] | None
    """None: the conditions are left as they are."""
    clear_admission: bool = False
    reclaimable_pods: list[dict[str, Any]] | None = None
    """status.reclaimablePods to write (None: left as they are)."""


@dataclass
class Step:
    """What to do now, in this order; events go on the job."""

    adopt: Workload | None = None
    """A prebuilt Workload to own (its owner reference and job-uid label set)."""
    create: dict[str, Any] | None = None
    replace_spec: list[tuple[Workload, dict[str, Any]]] = field(default_factory=list)
    """(Workload, spec): a Workload of the suspended job made to match it again."""
    delete: list[Workload] = field(default_factory=list)
    """Workloads not the job's: their finalizer removed, then deleted."""
    status: list[StatusPatch] = field(default_factory=list)
    release: list[Workload] = field(default_factory=list)
    """Workloads whose finalizer is removed (finished, being deleted, or the job gone)."""
    suspend: bool | None = None
    """The job's runPolicy.suspend to write (None: leave it)."""
    queue_label: str | None = None
    """The job's queue-name label to write (a new job naming no queue, in a namespace
    whose default LocalQueue it takes: wants_default_queue)."""
    events: list[Event] = field(default_factory=list)


def key(workload: Mapping[str, Any]) -> str:
    """namespace/name of a Workload to make."""
    meta = workload.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def conditions_with(workload: Workload, ctype: str, status: str, reason: str,
                    message: str, now: dt.datetime,
                    conditions: list[WorkloadCondition] | None = None
                    ) -> list[WorkloadCondition]:
    """The Workload's conditions with `ctype` set (apimeta.SetStatusCondition): its
    lastTransitionTime changes only where its status does."""
    base = conditions if conditions is not None else list(workload.status.conditions)
    before = next((c for c in base if c.type == ctype), None)
    since = before.last_transition_time if before is not None and \
        before.status == status and before.last_transition_time else clock.fmt(now)
    new = WorkloadCondition(ctype, status, reason, message[:MAX_CONDITION_MESSAGE], since,
                            workload.generation)
    return [*(c for c in base if c.type != ctype), new]


def pending(workload: Workload) -> tuple[str, str] | None:
    """Why Kueue has not admitted the Workload: its QuotaReserved False condition's reason
    and message (`Inadmissible`: `LocalQueue q doesn't exist`, `couldn't assign flavors to
    pod set worker: ...`), or None."""
    c = workload.status.condition_of("QuotaReserved")
    if c is None or c.status != "False" or not c.message:
        return None
    return c.reason, c.message


def queued(job: Job, *, managed_namespace: bool, without_queue_name: bool) -> bool:
    """Whether Kueue's rules queue `job` (ReconcileGenericJob's first checks): only in a
    namespace its managedJobsNamespaceSelector matches (respected for every job since
    v0.19), and there a job that names a queue or, with manageJobsWithoutQueueName, any
    job (one naming no queue then waits for one: Kueue admits no Workload without)."""
    return managed_namespace and (wl.queue_name(job) is not None or without_queue_name)


def wants_default_queue(job: Job) -> bool:
    """Whether the job is given the default LocalQueue where its namespace has one
    (ApplyDefaultLocalQueue): it names no queue and is new. Kueue's webhook writes the
    label as the job is created; trainop before it first writes the job's status."""
    return wl.queue_name(job) is None and not (job.status and job.status.conditions)


def prebuilt_in(labels: Mapping[str, str] | None, annotations: Mapping[str, str] | None
                ) -> str | None:
    """The Workload made beforehand that a job's label or annotation names, or None."""
    return (labels or {}).get(PREBUILT_LABEL) or (annotations or {}).get(PREBUILT_LABEL) \
        or None


def prebuilt_name(job: Job) -> str | None:
    return prebuilt_in(job.metadata.labels, job.metadata.annotations)


def given_back(workloads: Sequence[Workload]) -> tuple[tuple[str, int], ...]:
    """(pod set, count) of the replicas that the job's Workload holding quota gave back
    as done (its reclaimablePods)."""
    for workload in workloads:
        if workload.status.has_quota:
            return tuple((name, n) for name, n in workload.status.reclaimable_pods if n > 0)
    return ()


def reclaimable(job: Job, state: JobState, workload: Workload) -> list[dict[str, Any]]:
    """The Workload's reclaimablePods: per pod set, its replicas that succeeded and are not
    run again (not `restartPolicy: Always`), so Kueue lends their quota to others (Kueue's
    own kubeflow integration tells none). None of a job whose rules may run them again
    (restarts_every_replica). A count never goes down (Kueue refuses that while the
    Workload holds quota: validateReclaimablePodsUpdate); that many of the pod set never
    run again, whatever is deleted (objects.missing, by Observed.reclaimed)."""
    sizes = {str(ps.get("name")): int(ps.get("count") or 0) for ps in workload.pod_sets}
    before = dict(workload.status.reclaimable_pods)
    counts = dict(before)
    # the job as written: a restartPolicy left unset defaults to none that is Always
    if not restarts_every_replica(job.spec.run_policy):
        for rtype, spec in job.spec.replica_specs.items():
            name, done = rtype.lower(), state.succeeded.get(rtype, 0)
            if done and spec.restart_policy != "Always" and name in sizes:
                counts[name] = max(min(done, sizes[name]), before.get(name, 0))
    return [{"name": name, "count": counts[name]} for name in sizes
            if counts.get(name)]


def kept_by_another(job: Job, workloads: Sequence[Workload]) -> Workload | None:
    """The job's Workload that Kueue's own integration keeps, or None: one the job
    controls at another version of its kind (Kueue's `kubeflow.org/mpijob` owns an MPIJob's
    Workload at v2beta1). Kueue names a job's Workload by its kind and group only
    (GetWorkloadNameForOwnerWithGVK), so two integrations of a kind would both claim one
    name: where Kueue's holds it, trainop leaves the job to Kueue's."""
    uid = job.metadata.uid or ""
    for w in workloads:
        owner = w.controller
        if owner is not None and owner.uid == uid and owner.api_version != job.api_version:
            return w
    return None


def pods_ready(state: JobState, workload: Workload) -> tuple[str, str, str]:
    """The Workload's PodsReady condition: status, reason, message
    (generatePodsReadyCondition)."""
    not_ready = "False", "WaitForStart", "Not all pods are ready or succeeded"
    if not workload.status.admitted:
        return not_ready
    before = workload.status.condition_of("PodsReady")
    reason = before.reason if before is not None else ""
    if state.running:
        recovered = reason in ("WaitForRecovery", "Recovered")
        return ("True", "Recovered" if recovered else "Started",
                "All pods reached readiness and the workload is running")
    if (before is not None and before.status == "True") or reason == "WaitForRecovery":
        return "False", "WaitForRecovery", "At least one pod has failed, waiting for recovery"
    return not_ready


def desired(job: Job, classes: PriorityClasses) -> dict[str, Any]:
    """The job's Workload to write, with its priority found in `classes` (WorkloadError
    where the job names one that is not there)."""
    return wl.desired(job, wl.priority(job, classes))


def decide(job: Job, state: JobState, workloads: Sequence[Workload],
           classes: PriorityClasses, *, wait_for_pods_ready: bool, now: dt.datetime) -> Step:
    """The next step for a queued `job` (one with a queue name) whose Workloads (those it
    owns, and a prebuilt one it names) are `workloads`; `classes` give the priority of a
    Workload it writes (a WorkloadError where they cannot)."""
    step = Step()
    workload = _one_workload(job, state, workloads, classes, step, now)
    if workload is None:
        return _without_workload(job, state, classes, step)
    if workload.status.condition("Finished") is not None:
        # finished: nothing more of it; its finalizer goes (Kueue: FinishedWorkload)
        if wl.FINALIZER in workload.finalizers:
            step.release.append(workload)
        return step
    if workload.deleting:
        _stop(state, step, "Workload is deleted")
        step.release.append(workload)
        return step
    if state.ended is not None:
        succeeded, message = state.ended
        step.status.append(StatusPatch(workload, conditions_with(
            workload, "Finished", "True", "Succeeded" if succeeded else "Failed", message,
            now)))
        step.events.append(Event("Normal", "FinishedWorkload",
                                 f"Workload '{workload.key}' is declared finished"))
        return step
    released = reclaimable(job, state, workload) if workload.status.has_quota and not \
        state.suspended and workload.status.condition("Evicted") is None else None
    if released is not None and [(r["name"], r["count"]) for r in released] != list(
            workload.status.reclaimable_pods):
        # jobframework step 4 (JobWithReclaimablePods): the quota of replicas that are done
        step.status.append(StatusPatch(workload, None, reclaimable_pods=released))
        return step
    if wait_for_pods_ready:
        status, reason, message = pods_ready(state, workload)
        before = workload.status.condition_of("PodsReady")
        if before is None or (before.status, before.reason) != (status, reason):
            step.status.append(StatusPatch(workload, conditions_with(
                workload, "PodsReady", status, reason, message, now)))
            return step
    evicted = workload.status.condition("Evicted")
    if evicted is not None:
        _evicted(state, workload, evicted, step, now)
    elif state.suspended:
        _suspended(job, workload, step)
    elif not workload.status.admitted:
        _stop(state, step, "Not admitted by cluster queue")
    return step


def _without_workload(job: Job, state: JobState, classes: PriorityClasses,
                      step: Step) -> Step:
    """The step of a job none of whose Workloads is its own (yet)."""
    if step.suspend is not None or step.delete or step.adopt is not None:
        return step
    if prebuilt_name(job) is not None:
        # the prebuilt Workload is not there (yet): the job waits, stopped
        _stop(state, step, "Missing Workload; unable to start")
        return step
    if state.ended is None and not state.active and not step.replace_spec:
        step.create = desired(job, classes)
        step.events.append(Event("Normal", "CreatedWorkload",
                                 f"Created Workload: {key(step.create)}"))
    return step


def _evicted(state: JobState, workload: Workload, evicted: WorkloadCondition,
             step: Step, now: dt.datetime) -> None:
    """The job is stopped; once its pods are gone, the quota goes back and the Workload
    waits again."""
    _stop(state, step, evicted.message)
    if not workload.status.has_quota or state.active:
        return
    requeued = evicted.reason in (PREEMPTED, NODE_FAILURES)
    conditions = conditions_with(workload, "Requeued", "True" if requeued else "False",
                                 evicted.reason, evicted.message, now)
    conditions = conditions_with(workload, "QuotaReserved", "False", PENDING,
                                 evicted.message, now, conditions)
    if workload.status.admitted:
        conditions = conditions_with(workload, "Admitted", "False", "NoReservation",
                                     "The workload has no reservation", now, conditions)
    # the pods made again on readmission run every replica: none is reclaimable
    step.status.append(StatusPatch(workload, conditions, clear_admission=True,
                                   reclaimable_pods=[]))


def _suspended(job: Job, workload: Workload, step: Step) -> None:
    """A suspended job starts once its Workload is admitted; while it waits, its Workload
    follows its queue-name label."""
    if workload.status.admitted:
        step.suspend = False
        queue = (workload.status.admission or {}).get("clusterQueue", "")
        step.events.append(Event("Normal", "Started", f"Admitted by clusterQueue {queue}"))
    elif not workload.status.admission and workload.queue_name != (wl.queue_name(job) or ""):
        # the job's queue-name label changed while it waits (QueueNameChange); Kueue
        # refuses the change while the Workload holds an admission
        step.replace_spec.append((workload, {"queueName": wl.queue_name(job)}))


def _stop(state: JobState, step: Step, message: str) -> None:
    """Suspend the job, unless it is (stopJob: event Stopped)."""
    if state.suspended or step.suspend:
        return
    step.suspend = True
    step.events.append(Event("Normal", "Stopped", message))


def _one_workload(job: Job, state: JobState, workloads: Sequence[Workload],
                  classes: PriorityClasses, step: Step, now: dt.datetime
                  ) -> Workload | None:
    """The job's one Workload, or None, with what that takes in `step`
    (ensureOneWorkload)."""
    prebuilt = prebuilt_name(job)
    if prebuilt is not None:
        named = next((w for w in workloads if w.name == prebuilt), None)
        if named is None:
            return None
        owner = named.controller
        if owner is not None and owner.uid != (job.metadata.uid or ""):
            return None  # another object's: not touched
        if owner is None:
            step.adopt = named
            return None
        if not wl.matches(job, named) and named.status.condition("Finished") is None:
            step.status.append(StatusPatch(named, conditions_with(
                named, "Finished", "True", OUT_OF_SYNC,
                "The prebuilt workload is out of sync with its user job", now)))
            return None
        return named
    match = None
    others: list[Workload] = []
    for w in workloads:
        if match is None and wl.matches(job, w):
            match = w
        else:
            others.append(w)
    if match is None and others and state.suspended and not others[0].status.has_quota:
        step.replace_spec.append((others[0], desired(job, classes)["spec"]))
        step.events.append(Event("Normal", "UpdatedWorkload",
                                 "Updated not matching Workload for suspended job: "
                                 f"{others[0].key}"))
        others = others[1:]
    if match is None and not state.suspended and state.ended is None:
        if state.started:
            _stop(state, step,
                  "No matching Workload" if len(others) == 1 else "Missing Workload")
        else:
            step.suspend = True
    for w in others:
        step.delete.append(w)
        step.events.append(Event("Normal", "DeletedWorkload",
                                 f"Deleted not matching Workload: {w.key}"))
    return match
