"""The typed models every kubeflow.org/v1 job kind shares: its metadata, replica specs,
run policy, the spec and job every kind's extend (api/jobs/: each kind's own), status."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, NewType

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

from trainop.api.kinds import API_VERSION, KindInfo
from trainop.api.model import (
    Int64,
    LabelSelector,
    MetricSpec,
    Model,
    PodTemplate,
    Quantity,
    SchemaHint,
    Time,
)
from trainop.api.problems import Problem

RestartPolicy = Literal["Always", "OnFailure", "Never", "ExitCode"]
CleanPodPolicy = Literal["All", "Running", "None"]
RestartScope = Literal["Replica", "Job"]
PodFailureAction = Literal["FailJob", "Ignore", "Count", "RestartJob"]
ExitCodeOperator = Literal["In", "NotIn"]
ConditionStatus = Literal["True", "False", "Unknown"]


class ObjectMeta(Model):
    """The parts of Kubernetes object metadata trainop reads; the rest is kept as is."""

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class ReplicaSpec(Model):
    """One replica type of a job: how many pods, from which template, restarted how."""

    replicas: int | None = None
    template: PodTemplate | None = Field(
        None, description="PodTemplateSpec of every replica of this type."
    )
    restart_policy: RestartPolicy | None = None
    restart_limit: int | None = Field(
        None,
        description="trainop: how often pods of this type may restart before the job fails; "
        "checked besides runPolicy.backoffLimit.",
    )


class SharedSchedulingPolicy(Model):
    """Gang scheduling settings, as every version of these kinds has them.

    (v1's, and mpi-operator's v2beta1 MPIJob's, which lacks v1's CEL rule.)"""

    min_available: int | None = None
    queue: str | None = None
    min_resources: dict[str, Quantity] | None = None
    priority_class: str | None = None
    schedule_timeout_seconds: int | None = None
    topology_key: Annotated[str | None, SchemaHint(validations=(
        ("self == oldSelf", "spec.runPolicy.schedulingPolicy.topologyKey is immutable"),))] = Field(
        None,
        description="trainop: with the manager's --gang-scheduler-name=workload-api, every pod "
        "of the gang in one domain of this node label (a rack, a block): the PodGroup's "
        "topology constraint. Immutable.",
    )


class SchedulingPolicy(SharedSchedulingPolicy):
    """Gang scheduling settings, used when the manager runs with --gang-scheduler-name."""

    # upstream's CRD rule: the API server itself refuses a change of queue
    queue: Annotated[str | None, SchemaHint(validations=(
        ("self == oldSelf", "spec.runPolicy.schedulingPolicy.queue is immutable"),))] = None


class PodFailurePolicyOnExitCodes(Model):
    """A failed pod's container exit codes a rule matches (as batch/v1 Job's)."""

    container_name: str | None = Field(
        None, description="Only this container's (or init container's) exit code; unset: any.")
    operator: ExitCodeOperator
    values: list[int] = Field(
        description="Exit codes (ordered, unique; 0 is never matched).")


class PodFailurePolicyOnPodCondition(Model):
    """A condition a failed pod has (DisruptionTarget: preempted, evicted, drained)."""

    type: str
    status: ConditionStatus = "True"


class PodFailurePolicyRule(Model):
    action: PodFailureAction = Field(
        description="FailJob: fail the job now; Ignore: make the pod again, not counted "
        "against backoffLimit or restartLimit; Count: as without a policy; RestartJob "
        "(trainop's): restart every replica together, counted as one restart.")
    on_exit_codes: PodFailurePolicyOnExitCodes | None = None
    on_pod_conditions: list[PodFailurePolicyOnPodCondition] | None = None


class PodFailurePolicy(Model):
    """trainop: what a failed pod means for the job, by its exit codes or conditions, with
    the Kubernetes Job API's rules; the first rule that matches decides."""

    rules: list[PodFailurePolicyRule]


class SharedRunPolicy(Model):
    """Cleanup, TTL, deadline, backoff, gang and suspend, as every version has them.

    (v1's without trainop's fields: mpi-operator's v2beta1 MPIJob's.)"""

    clean_pod_policy: CleanPodPolicy | None = None
    ttl_seconds_after_finished: int | None = None
    active_deadline_seconds: Int64 | None = None
    backoff_limit: int | None = None
    scheduling_policy: SharedSchedulingPolicy | None = None
    suspend: Annotated[bool | None, SchemaHint(default=False)] = None
    managed_by: str | None = None


class RunPolicy(SharedRunPolicy):
    """The job logic every kind shares: cleanup, TTL, deadline, backoff, gang, suspend."""

    scheduling_policy: SchedulingPolicy | None = None
    restart_scope: RestartScope | None = Field(
        None,
        description="trainop: Replica (default) restarts only the failed pod; Job restarts "
        "every replica of the job together when one fails retryably.",
    )
    restart_in_place: bool | None = Field(
        None,
        description="trainop: with restartScope Job, restart the job's pods in place (every "
        "container of every pod, on its node, the pods kept) instead of making them again, "
        "where the cluster allows it (Kubernetes 1.35+); unset: as the manager's "
        "--restart-in-place says.",
    )
    pod_failure_policy: PodFailurePolicy | None = None
    startup_deadline_seconds: int | None = Field(
        None,
        description="trainop: fail the job (reason StartupDeadlineExceeded) when one of its "
        "pods has not started this many seconds after it was created; unset: wait for ever.",
    )


class RDZVConf(Model):
    key: str | None = None
    value: str | None = None


class ElasticPolicy(Model):
    """PyTorch elastic training (torchrun rendezvous) and its autoscaling."""

    min_replicas: int | None = None
    max_replicas: int | None = None
    rdzv_backend: str | None = None
    rdzv_port: int | None = None
    rdzv_host: str | None = None
    rdzv_id: str | None = None
    rdzv_conf: list[RDZVConf] | None = None
    standalone: bool | None = None
    n_proc_per_node: int | None = None
    max_restarts: int | None = None
    metrics: list[MetricSpec] | None = None


class PaddleElasticPolicy(Model):
    min_replicas: int | None = None
    max_replicas: int | None = None
    max_restarts: int | None = None
    metrics: list[MetricSpec] | None = None


class JobSpec(Model):
    """What every kind's spec has; `replica_specs` has a kind-specific name on the wire."""

    checks_managed_by: ClassVar[bool] = True
    """Whether `runPolicy.managedBy` must be one of MANAGERS and stays as created (upstream's
    webhooks of TF, PyTorch, XGBoost and Paddle: pkg/common/util/webhooks.go; JAX's webhook
    and MPI's validation check neither)."""

    run_policy: RunPolicy = Field(default_factory=RunPolicy)
    replica_specs: dict[str, ReplicaSpec] = Field(default_factory=dict)
    managed_by: str | None = Field(
        None,
        description="trainop: the controller that runs the job, as runPolicy.managedBy "
        "(where both are set they agree): kueue.x-k8s.io/multikueue for a job Kueue's "
        "MultiKueue dispatches through its generic adapter, which reads and clears this "
        "field. Immutable.",
    )

    def elastic(self) -> ElasticPolicy | PaddleElasticPolicy | None:
        """The kind's elastic policy, where it has one."""
        return None

    def ender_problems(self, field: str) -> list[Problem]:
        """What the kind's success rule needs to exist (a replica whose end decides the
        job's): a job without it could never end."""
        return []

    def kind_problems(self, field: str) -> list[Problem]:
        """The kind's own rules (`field` is the replica specs' path)."""
        return []

    def default_kind_fields(self) -> None:
        """Default the kind's own fields, in place (after the common ones)."""

    def update_problems(self, before: JobSpec) -> list[Problem]:
        """The kind's own rules on changing a stored job's spec into this one."""
        return []

    def warnings(self) -> list[str]:
        """What the kind's webhook warns of in a job it allows (kubectl prints them)."""
        return []

    def main_container_name(self) -> str | None:
        """The main container's name where the spec chooses it (else the kind's default)."""
        return None

    @model_serializer(mode="wrap")
    def _leave_out_unwritten_run_policy(
        self, handler: SerializerFunctionWrapHandler
    ) -> dict[str, Any]:
        # runPolicy always exists in Python; a manifest that had none gets none back.
        out: dict[str, Any] = handler(self)
        if "run_policy" not in self.model_fields_set and not out.get("runPolicy"):
            out.pop("runPolicy", None)
        return out


class JobCondition(Model):
    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str | None = None
    message: str | None = None
    last_update_time: Time | None = None
    last_transition_time: Time | None = None


class ReplicaStatus(Model):
    active: int | None = None
    succeeded: int | None = None
    failed: int | None = None
    label_selector: LabelSelector | None = None
    selector: str | None = None
    restarts: int | None = Field(
        None, description="trainop: how often pods of this type were recreated after failing."
    )

    @model_serializer(mode="wrap")
    def _leave_out_zero_counts(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # upstream's counts are `omitempty`: a count of 0 is not written (clients read it
        # as 0 all the same)
        out: dict[str, Any] = handler(self)
        for key in ("active", "succeeded", "failed", "restarts"):
            if out.get(key) == 0:
                del out[key]
        return out


class FailureInfo(Model):
    """trainop: the replica whose failure last restarted or failed the job."""

    replica_type: str
    index: int
    pod: str
    exit_code: int | None = None
    reason: str | None = None
    time: Time | None = None
    """When the container ended (else when trainop saw the failure)."""
    node: str | None = None
    container: str | None = None
    message: str | None = None
    """The container's termination message (with FallbackToLogsOnError: the end of its
    log when it wrote none)."""


class WaitingReplica(Model):
    """trainop: a replica whose pod has not started (or cannot be made yet), and why."""

    replica_type: str
    index: int
    pod: str
    reason: str
    """The kubelet's or the scheduler's (ErrImagePull, CreateContainerConfigError,
    Unschedulable, CrashLoopBackOff of an init container), or trainop's NameInUse."""
    message: str | None = None
    since: Time | None = None


class RestartAttempt(Model):
    """trainop: the attempt a job that restarts in place is on (its record, which a manager
    taking over reads), and the last one released."""

    attempt: int
    released: int


class Metric(Model):
    """trainop: one named value a rank reported (Trainer's `{name, value}`)."""

    name: str
    value: str


class Progress(Model):
    """trainop: how far a job has got, as its lead rank last reported (engine/progress.py)."""

    percent: int | None = None
    step: int | None = None
    steps: int | None = None
    epoch: int | None = None
    epochs: int | None = None
    remaining_seconds: int | None = None
    metrics: list[Metric] | None = None
    pod: str
    """The pod whose rank reported it."""
    last_reported_time: Time
    """When the manager wrote the report it shows (at most once per --progress-interval)."""
    refused: str | None = None
    """Why the rank's latest report is not shown (too large, not in the payload's shape)."""


class JobStatus(Model):
    conditions: list[JobCondition] | None = None
    replica_statuses: dict[str, ReplicaStatus] | None = None
    start_time: Time | None = None
    completion_time: Time | None = None
    last_reconcile_time: Time | None = None
    last_failure: FailureInfo | None = None
    waiting_replicas: list[WaitingReplica] | None = Field(
        None, description="trainop: the replicas whose pods have not started, and why.")
    restart_attempt: RestartAttempt | None = Field(
        None, description="trainop: the attempt a job restarted in place is on, and the "
        "last one released.")
    progress: Progress | None = Field(
        None, description="trainop: how far the job has got, as its lead rank last reported.")


class Job(Model):
    """A job of any kind; each kind narrows `kind` and `spec`."""

    api_version: str = API_VERSION
    kind: str
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: JobSpec
    status: JobStatus | None = None

    info: ClassVar[KindInfo]

    @property
    def name(self) -> str:
        return self.metadata.name or ""

    @property
    def namespace(self) -> str:
        return self.metadata.namespace or "default"

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def main_container(self) -> str:
        """The container the framework's environment and exit codes belong to."""
        return self.spec.main_container_name() or self.info.default_container



Defaulted = NewType("Defaulted", Job)
"""A job as defaulting left it (api.defaults.default_job; load_job): every default decided,
so resolve() can read its settled facts. The job as stored (or written) is a plain Job:
mypy keeps code from reading a stored job where it meant the effective one."""
