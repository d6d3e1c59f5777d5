"""Runtime-wide settings that change what the engine plans."""

from __future__ import annotations

from dataclasses import dataclass

WORKLOAD_API = "workload-api"
"""The --gang-scheduler-name of Kubernetes' own gang: a Workload and PodGroup of
scheduling.k8s.io/v1beta1 per job (engine/kubegang.py), bound by kube-scheduler."""


@dataclass(frozen=True)
class EngineConfig:
    gang_scheduler: str | None = None
    """--gang-scheduler-name: "volcano" for Volcano, WORKLOAD_API for Kubernetes' own, any
    other name for scheduler-plugins."""
    gang_unavailable: str | None = None
    """Why the cluster cannot give Kubernetes' own gang (the manager asks as it starts):
    every job is then held, nothing of it made, and told so (engine/kubegang.py)."""
    gang_topology_unavailable: str | None = None
    """Why the cluster drops a PodGroup's topology constraint: a job that names a
    schedulingPolicy.topologyKey is then held and told so."""
    pytorch_init_image: str = "alpine:3.10"
    """--pytorch-init-container-image (upstream's default, pkg/config/config.go:29)."""
    pytorch_init_max_tries: int = 100
    """--pytorch-init-container-max-tries (pkg/config/config.go:34)."""
    pytorch_init_template: str | None = None
    """The text of --pytorch-init-container-template-file, where that file exists."""
    wait_for_dns: bool = False
    """--wait-for-dns (trainop's own; off as upstream): pods that look a peer's name up once
    as they start (Framework.names_looked_up_once: XGBoost's workers) first wait in an init
    container until it resolves."""
    mpi_kubectl_delivery_image: str = "ghcr.io/kubeflow/training-v1/kubectl-delivery:latest"
    """--mpi-kubectl-delivery-image: the MPI launcher's init container that brings kubectl
    (upstream's default, pkg/config/config.go:35)."""
    ignore_disruptions: bool = False
    """--ignore-disruptions (trainop's own; off as upstream): a job that sets no
    runPolicy.podFailurePolicy has podfailure.IGNORE_DISRUPTIONS (a pod the cluster ended,
    with the DisruptionTarget condition, is made again, not counted)."""
    fallback_to_logs_on_error: bool = False
    """--fallback-to-logs-on-error (trainop's own; off as upstream): containers whose
    template leaves terminationMessagePolicy unset get FallbackToLogsOnError, so a failed
    container that wrote no termination message leaves the end of its log as one
    (status.lastFailure.message)."""
    aggregate_events: bool = False
    """--aggregate-events (trainop's own; off as upstream): one SuccessfulCreatePod,
    SuccessfulCreateService or SuccessfulDeletePod event per job and round, naming the
    objects, instead of one per object."""

    restart_in_place: bool = False
    """--restart-in-place (trainop's own; off as upstream): jobs with restartScope Job that
    leave runPolicy.restartInPlace unset restart their pods in place (engine/inplace.py)."""
    in_place_unavailable: str | None = None
    """Why this cluster cannot restart pods in place (the manager asks the API server as it
    starts): then no job does, and a job that asks is told so once."""
    restart_agent_image: str = "alpine:3.22"
    """--restart-agent-image: the image of the agent a pod that restarts in place runs (it
    needs a POSIX sh, cat, sleep and test)."""

    rank_supervisor_image: str | None = None
    """--rank-supervisor-image: the image a pod that restarts in place copies the rank
    supervisor from (engine/supervised.py); None: no pod gets it."""

    lost_node_grace: float | None = None
    """--lost-node-grace (trainop's own; unset: as upstream, nodes are not watched): a pod on
    a node that stopped reporting is told at once, and deleted once the node has not been
    Ready for this many seconds, so that it is made again elsewhere (engine/lostnode.py)."""

    progress_interval: float = 10.0
    """--progress-interval: the fewest seconds between two writes of a job's progress
    (engine/progress.py)."""

    progress_server: str | None = None
    """--progress-server: the manager's URL (https://SERVICE.NAMESPACE.svc) a lead pod
    without a rank supervisor reports to, as Trainer's (engine/progress_server.py); None:
    none does."""

    batch_jobs: bool = True
    """A replica the kind makes by a batch/v1 Job (Launcher.batch_job) is made so; False:
    as a pod of the engine's own under its rules (the local runtime, which has no Job
    controller)."""

    @property
    def volcano(self) -> bool:
        return self.gang_scheduler == "volcano"

    @property
    def workload_api(self) -> bool:
        return self.gang_scheduler == WORKLOAD_API
