"""The static facts of each kubeflow.org/v1 job kind (names, replica types, defaults).

They live in the API layer because defaulting, validation and CRD generation need them;
the framework plugins read them from here rather than repeating them.
"""

from __future__ import annotations

from dataclasses import dataclass

GROUP = "kubeflow.org"
VERSION = "v1"
API_VERSION = f"{GROUP}/{VERSION}"


@dataclass(frozen=True)
class KindInfo:
    """What trainop knows of one job kind before any job exists."""

    kind: str
    plural: str
    replica_specs_field: str
    replica_types: tuple[str, ...]
    default_container: str
    default_port_name: str
    default_port: int
    default_restart_policy: str
    framework: str
    """The `framework` label of the Prometheus metrics and the plugin's name."""
    master_role: tuple[str, ...] = ()
    """Replica types whose replicas are labelled training.kubeflow.org/job-role=master and
    lead the job (the first present one: its pods make the job Running)."""
    worker0_is_master: bool = False
    """Without a replica of the master role, worker 0 is the master (PyTorch, TF, JAX)."""
    scale_replica_type: str | None = None
    """The replica type behind the scale subresource, where the kind has one."""
    default_ports: bool = True
    """Whether defaulting appends the named port to the default container."""
    unset_replicas_zero: tuple[str, ...] = ()
    """Replica types whose `replicas` default to 0 instead of 1 (MPI's workers)."""
    free_container_names: bool = False
    """Containers may have any names (MPI: upstream's examples name them freely); for other
    kinds the operator finds its container by the default name."""
    age_column_first: bool = False
    """`kubectl get` shows Age before State (upstream's MPIJob CRD lists them so)."""
    unindexed_types: tuple[str, ...] = ()
    """Replica types of one pod named and labelled without an index (MPI's launcher:
    `{job}-launcher`, pkg/controller.v1/mpi/mpijob_controller.go:1006)."""
    pods_under_one_service: bool = False
    """Where pods are reached by DNS name, they are named through one headless service of
    the job's name (hostname and subdomain: `{pod}.{job}.{ns}.svc`) instead of a service
    each (MPIJob: its SSH transport; the default one names pods to kubectl exec)."""

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    def canonical_replica_type(self, name: str) -> str | None:
        """The replica type `name` stands for, case-insensitively, or None."""
        for rtype in self.replica_types:
            if rtype.lower() == name.lower():
                return rtype
        return None


KINDS: dict[str, KindInfo] = {
    k.kind: k
    for k in (
        KindInfo(kind="TFJob", plural="tfjobs", replica_specs_field="tfReplicaSpecs",
                 replica_types=("Chief", "Master", "PS", "Worker", "Evaluator"),
                 default_container="tensorflow", default_port_name="tfjob-port",
                 default_port=2222, default_restart_policy="Never", framework="tensorflow",
                 master_role=("Chief", "Master"),
                 worker0_is_master=True),  # pkg/controller.v1/tensorflow/tfjob_controller.go:598
        KindInfo(kind="PyTorchJob", plural="pytorchjobs",
                 replica_specs_field="pytorchReplicaSpecs", replica_types=("Master", "Worker"),
                 default_container="pytorch", default_port_name="pytorchjob-port",
                 default_port=23456, default_restart_policy="OnFailure", framework="pytorch",
                 master_role=("Master",),
                 worker0_is_master=True,  # pkg/controller.v1/pytorch/pytorchjob_controller.go:499
                 scale_replica_type="Worker"),
        KindInfo(kind="MPIJob", plural="mpijobs", replica_specs_field="mpiReplicaSpecs",
                 replica_types=("Launcher", "Worker"), default_container="mpi",
                 default_port_name="mpi-port", default_port=9999, default_restart_policy="Never",
                 framework="mpi", master_role=("Launcher",), default_ports=False,
                 unset_replicas_zero=("Worker",), pods_under_one_service=True,
                 free_container_names=True, age_column_first=True,
                 unindexed_types=("Launcher",)),
        KindInfo(kind="XGBoostJob", plural="xgboostjobs", replica_specs_field="xgbReplicaSpecs",
                 replica_types=("Master", "Worker"), default_container="xgboost",
                 default_port_name="xgboostjob-port", default_port=9999,
                 default_restart_policy="Never", framework="xgboost", master_role=("Master",)),
        KindInfo(kind="PaddleJob", plural="paddlejobs", replica_specs_field="paddleReplicaSpecs",
                 replica_types=("Master", "Worker"), default_container="paddle",
                 default_port_name="master", default_port=36543,
                 default_restart_policy="OnFailure", framework="paddle",
                 master_role=("Master",), scale_replica_type="Worker"),
        KindInfo(kind="JAXJob", plural="jaxjobs", replica_specs_field="jaxReplicaSpecs",
                 replica_types=("Worker",), default_container="jax",
                 default_port_name="jaxjob-port", default_port=6666,
                 default_restart_policy="Never", framework="jax",
                 worker0_is_master=True,  # pkg/controller.v1/jax/jaxjob_controller.go:462
                 scale_replica_type="Worker"),
        KindInfo(kind="MXJob", plural="mxjobs", replica_specs_field="mxReplicaSpecs",
                 replica_types=("Scheduler", "Server", "Worker", "TunerTracker", "TunerServer",
                                "Tuner"),
                 default_container="mxnet", default_port_name="mxjob-port", default_port=9091,
                 default_restart_policy="Never", framework="mxnet",
                 master_role=("Scheduler",)),
    )
}
