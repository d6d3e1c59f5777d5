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
        KindInfo("TFJob", "tfjobs", "tfReplicaSpecs",
                 ("Chief", "Master", "PS", "Worker", "Evaluator"),
                 "tensorflow", "tfjob-port", 2222, "Never", "tensorflow"),
        KindInfo("PyTorchJob", "pytorchjobs", "pytorchReplicaSpecs", ("Master", "Worker"),
                 "pytorch", "pytorchjob-port", 23456, "OnFailure", "pytorch",
                 scale_replica_type="Worker"),
        KindInfo("MPIJob", "mpijobs", "mpiReplicaSpecs", ("Launcher", "Worker"),
                 "mpi", "mpi-port", 9999, "Never", "mpi", default_ports=False,
                 unset_replicas_zero=("Worker",), pods_under_one_service=True,
                 free_container_names=True, age_column_first=True,
                 unindexed_types=("Launcher",)),
        KindInfo("XGBoostJob", "xgboostjobs", "xgbReplicaSpecs", ("Master", "Worker"),
                 "xgboost", "xgboostjob-port", 9999, "Never", "xgboost"),
        KindInfo("PaddleJob", "paddlejobs", "paddleReplicaSpecs", ("Master", "Worker"),
                 "paddle", "master", 36543, "OnFailure", "paddle",
                 scale_replica_type="Worker"),
        KindInfo("JAXJob", "jaxjobs", "jaxReplicaSpecs", ("Worker",),
                 "jax", "jaxjob-port", 6666, "Never", "jax", scale_replica_type="Worker"),
        KindInfo("MXJob", "mxjobs", "mxReplicaSpecs",
                 ("Scheduler", "Server", "Worker", "TunerTracker", "TunerServer", "Tuner"),
                 "mxnet", "mxjob-port", 9091, "Never", "mxnet"),
    )
}

