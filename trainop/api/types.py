"""Typed models of the seven kubeflow.org/v1 job kinds, their run policy and status."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, NewType

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

from trainop.api.kinds import API_VERSION, KindInfo, declare_kind
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
from trainop.api.problems import (
    NPROC,
    Problem,
    at_most_one,
    count,
    elastic_problems,
    exactly_one,
    no_replicas_of_a_leader,
    total,
)

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


class TFJobSpec(JobSpec):
    replica_specs: dict[str, ReplicaSpec] = Field(default_factory=dict, alias="tfReplicaSpecs")
    success_policy: Literal["", "AllWorkers"] | None = None
    enable_dynamic_worker: bool | None = None

    def ender_problems(self, field: str) -> list[Problem]:
        if any(count(self.replica_specs, rt) for rt in ("Chief", "Master", "Worker")):
            return []
        return [Problem(field, "needs a Chief, a Master or at least one Worker")]

    def kind_problems(self, field: str) -> list[Problem]:
        # one Chief or Master role, of any number of replicas
        # (pkg/webhooks/tensorflow/tfjob_webhook.go:97-125)
        if "Chief" in self.replica_specs and "Master" in self.replica_specs:
            return [Problem(field, "must not have more than 1 Chief or Master role")]
        return no_replicas_of_a_leader(field, self.replica_specs, ("Chief", "Master"),
                                       "the job ends when its first replica does")


class PyTorchJobSpec(JobSpec):
    replica_specs: dict[str, ReplicaSpec] = Field(
        default_factory=dict, alias="pytorchReplicaSpecs"
    )
    elastic_policy: ElasticPolicy | None = None
    nproc_per_node: str | None = None

    def elastic(self) -> ElasticPolicy | None:
        return self.elastic_policy

    def default_kind_fields(self) -> None:
        policy = self.elastic_policy
        # "auto" unless the (deprecated) elastic one is set (pytorch_defaults.go:77-83)
        if self.nproc_per_node is None and (policy is None or policy.n_proc_per_node is None):
            self.nproc_per_node = "auto"
        if policy is not None:
            # a missing bound copies the other; both missing take the Worker count
            if policy.min_replicas is None and policy.max_replicas is None:
                # (the common defaults come first: an unset Worker count is 1 by now; no
                # Worker at all is the validation's to refuse)
                n = count(self.replica_specs, "Worker") if "Worker" in self.replica_specs \
                    else 1
                policy.min_replicas = policy.max_replicas = n
            elif policy.min_replicas is None:
                policy.min_replicas = policy.max_replicas
            elif policy.max_replicas is None:
                policy.max_replicas = policy.min_replicas

    def kind_problems(self, field: str) -> list[Problem]:
        problems = exactly_one(field, self.replica_specs, "Master") \
            if "Master" in self.replica_specs else []
        worker = self.replica_specs.get("Worker")
        if worker is not None and worker.replicas is not None and worker.replicas < 1:
            # pkg/webhooks/pytorch/pytorchjob_webhook.go:156-158
            problems.append(Problem(f"{field}[Worker].replicas", "must be at least 1"))
        if self.nproc_per_node is not None and not NPROC.match(self.nproc_per_node):
            problems.append(Problem(
                "spec.nprocPerNode",
                f"must be auto, cpu, gpu or a positive integer, got {self.nproc_per_node!r}",
            ))
        policy = self.elastic_policy
        if policy is not None:
            problems.extend(elastic_problems("spec.elasticPolicy", policy.min_replicas,
                                             policy.max_replicas))
            # pkg/webhooks/pytorch/pytorchjob_webhook.go:96-110
            if "Worker" not in self.replica_specs:
                problems.append(Problem(f"{field}[Worker]",
                                        "must be configured if elastic policy is used"))
            # (defaulting leaves nprocPerNode unset where the elastic one is set)
            if policy.n_proc_per_node is not None and self.nproc_per_node is not None:
                problems.append(Problem("spec.elasticPolicy.nProcPerNode",
                                        "must not be used with spec.nprocPerNode"))
        return problems

    def warnings(self) -> list[str]:
        # pkg/webhooks/pytorch/pytorchjob_webhook.go:100-103
        if self.elastic_policy is not None and self.elastic_policy.n_proc_per_node is not None:
            return ["spec.elasticPolicy.nProcPerNode is deprecated, use spec.nprocPerNode "
                    "instead"]
        return []


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


class XGBoostJobSpec(JobSpec):
    replica_specs: dict[str, ReplicaSpec] = Field(default_factory=dict, alias="xgbReplicaSpecs")

    def kind_problems(self, field: str) -> list[Problem]:
        return exactly_one(field, self.replica_specs, "Master")


class PaddleJobSpec(JobSpec):
    replica_specs: dict[str, ReplicaSpec] = Field(
        default_factory=dict, alias="paddleReplicaSpecs"
    )
    elastic_policy: PaddleElasticPolicy | None = None

    def elastic(self) -> PaddleElasticPolicy | None:
        return self.elastic_policy

    def kind_problems(self, field: str) -> list[Problem]:
        # any number of Masters: parameter-server mode (pkg/webhooks/paddlepaddle/, no rule)
        problems = no_replicas_of_a_leader(field, self.replica_specs, ("Master",),
                                           "every worker is pointed at its first replica")
        if self.elastic_policy is not None:
            problems.extend(elastic_problems("spec.elasticPolicy",
                                             self.elastic_policy.min_replicas,
                                             self.elastic_policy.max_replicas))
        return problems


class JAXJobSpec(JobSpec):
    replica_specs: dict[str, ReplicaSpec] = Field(default_factory=dict, alias="jaxReplicaSpecs")
    checks_managed_by: ClassVar[bool] = False  # pkg/webhooks/jax/jaxjob_webhook.go:72-80


class MXJobSpec(JobSpec):
    replica_specs: dict[str, ReplicaSpec] = Field(default_factory=dict, alias="mxReplicaSpecs")
    job_mode: Literal["MXTrain", "MXTune"] | None = None

    def ender_problems(self, field: str) -> list[Problem]:
        specs = self.replica_specs
        alone = count(specs, "Worker") == 1 and total(specs) == 1
        if count(specs, "Scheduler") or count(specs, "Tuner") or alone:
            return []
        return [Problem(field, "needs a Scheduler (MXTrain), a Tuner (MXTune), or a single "
                               "Worker alone")]

    def default_kind_fields(self) -> None:
        if self.job_mode is None:
            self.job_mode = "MXTrain"

    def kind_problems(self, field: str) -> list[Problem]:
        return at_most_one(field, self.replica_specs, "Scheduler")


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


class JobStatus(Model):
    conditions: list[JobCondition] | None = None
    replica_statuses: dict[str, ReplicaStatus] | None = None
    start_time: Time | None = None
    completion_time: Time | None = None
    last_reconcile_time: Time | None = None
    last_failure: FailureInfo | None = None
    waiting_replicas: list[WaitingReplica] | None = Field(
        None, description="trainop: the replicas whose pods have not started, and why.")


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

@declare_kind
class TFJob(Job):
    kind: Literal["TFJob"] = "TFJob"
    spec: TFJobSpec
    info = KindInfo(
        kind="TFJob", plural="tfjobs", replica_specs_field="tfReplicaSpecs",
        replica_types=("Chief", "Master", "PS", "Worker", "Evaluator"),
        default_container="tensorflow", default_port_name="tfjob-port", default_port=2222,
        default_restart_policy="Never", framework="tensorflow",
        master_role=("Chief", "Master"),
        worker0_is_master=True)  # pkg/controller.v1/tensorflow/tfjob_controller.go:598


@declare_kind
class PyTorchJob(Job):
    kind: Literal["PyTorchJob"] = "PyTorchJob"
    spec: PyTorchJobSpec
    info = KindInfo(
        kind="PyTorchJob", plural="pytorchjobs", replica_specs_field="pytorchReplicaSpecs",
        replica_types=("Master", "Worker"),
        default_container="pytorch", default_port_name="pytorchjob-port", default_port=23456,
        default_restart_policy="OnFailure", framework="pytorch",
        master_role=("Master",),
        worker0_is_master=True,  # pkg/controller.v1/pytorch/pytorchjob_controller.go:499
        scale_replica_type="Worker")


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


@declare_kind
class XGBoostJob(Job):
    kind: Literal["XGBoostJob"] = "XGBoostJob"
    spec: XGBoostJobSpec
    info = KindInfo(
        kind="XGBoostJob", plural="xgboostjobs", replica_specs_field="xgbReplicaSpecs",
        replica_types=("Master", "Worker"),
        default_container="xgboost", default_port_name="xgboostjob-port", default_port=9999,
        default_restart_policy="Never", framework="xgboost",
        master_role=("Master",))


@declare_kind
class PaddleJob(Job):
    kind: Literal["PaddleJob"] = "PaddleJob"
    spec: PaddleJobSpec
    info = KindInfo(
        kind="PaddleJob", plural="paddlejobs", replica_specs_field="paddleReplicaSpecs",
        replica_types=("Master", "Worker"),
        default_container="paddle", default_port_name="master", default_port=36543,
        default_restart_policy="OnFailure", framework="paddle",
        master_role=("Master",), scale_replica_type="Worker")


@declare_kind
class JAXJob(Job):
    kind: Literal["JAXJob"] = "JAXJob"
    spec: JAXJobSpec
    info = KindInfo(
        kind="JAXJob", plural="jaxjobs", replica_specs_field="jaxReplicaSpecs",
        replica_types=("Worker",),
        default_container="jax", default_port_name="jaxjob-port", default_port=6666,
        default_restart_policy="Never", framework="jax",
        worker0_is_master=True,  # pkg/controller.v1/jax/jaxjob_controller.go:462
        scale_replica_type="Worker")


@declare_kind
class MXJob(Job):
    kind: Literal["MXJob"] = "MXJob"
    spec: MXJobSpec
    info = KindInfo(
        kind="MXJob", plural="mxjobs", replica_specs_field="mxReplicaSpecs",
        replica_types=("Scheduler", "Server", "Worker", "TunerTracker", "TunerServer",
                       "Tuner"),
        default_container="mxnet", default_port_name="mxjob-port", default_port=9091,
        default_restart_policy="Never", framework="mxnet",
        master_role=("Scheduler",), validating_webhook=False)
