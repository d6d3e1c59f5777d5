"""What training-operator v1.9 shows a client of each kind, with where upstream writes it
(kubeflow/training-operator, branch release-1.9). The unit conformance tests
(tests/unit/test_upstream_conformance.py) check the engine against these facts, and the
conformance suite (tests/conformance/) checks the manager on the real API server."""

from __future__ import annotations

from dataclasses import dataclass

PT = "pkg/controller.v1/pytorch/pytorchjob_controller.go"
TF = "pkg/controller.v1/tensorflow/tfjob_controller.go"
PD = "pkg/controller.v1/paddlepaddle/paddlepaddle_controller.go"
XGB = "pkg/controller.v1/xgboost/xgboostjob_controller.go"
JAX = "pkg/controller.v1/jax/jaxjob_controller.go"
MPI = "pkg/controller.v1/mpi/mpijob_controller.go"


@dataclass(frozen=True)
class Facts:
    """One kind's job named `job` in namespace `ns`, of `replicas`."""

    kind: str
    replicas: dict[str, int]
    masters: list[str]
    """Pods labelled training.kubeflow.org/job-role=master (IsMasterRole)."""
    lead: str
    """A pod whose running alone makes the job Running."""
    running: str
    succeeded: str
    failed: str
    """The Failed message when job-worker-1 fails with restartPolicy Never."""
    where: str

    def words(self, ns: str) -> tuple[str, str, str]:
        """Running, Succeeded and Failed messages for a job in namespace `ns`."""
        return (self.running.format(ns=ns), self.succeeded.format(ns=ns),
                self.failed.format(ns=ns))


FACTS = [
    Facts("TFJob", {"Chief": 1, "PS": 1, "Worker": 2}, ["job-chief-0"], "job-chief-0",
          "TFJob {ns}/job is running.", "TFJob {ns}/job successfully completed.",
          "TFJob {ns}/job has failed because 1 Worker replica(s) failed.",
          f"{TF}:444-459, :500, :600-601"),
    Facts("TFJob", {"PS": 1, "Worker": 2}, ["job-worker-0"], "job-worker-0",
          "TFJob {ns}/job is running.", "TFJob {ns}/job successfully completed.",
          "TFJob {ns}/job has failed because 1 Worker replica(s) failed.",
          f"{TF}:463-481, :500, :603-604"),
    Facts("PyTorchJob", {"Master": 1, "Worker": 2}, ["job-master-0"], "job-master-0",
          "PyTorchJob job is running.", "PyTorchJob job is successfully completed.",
          "PyTorchJob job is failed because 1 Worker replica(s) failed.",
          f"{PT}:383-401, :435, :499-506"),
    Facts("PyTorchJob", {"Worker": 2}, ["job-worker-0"], "job-worker-1",
          "PyTorchJob {ns}/job is running.", "PyTorchJob {ns}/job successfully completed.",
          "PyTorchJob job is failed because 1 Worker replica(s) failed.",
          f"{PT}:404-424, :435, :504-505"),
    Facts("XGBoostJob", {"Master": 1, "Worker": 2}, ["job-master-0"], "job-master-0",
          "XGBoostJob job is running.", "XGBoostJob job is successfully completed.",
          "XGBoostJob job is failed because 1 Worker replica(s) failed.",
          f"{XGB}:365-386, :397, :453"),
    Facts("PaddleJob", {"Master": 1, "Worker": 2}, ["job-master-0"], "job-master-0",
          "PaddleJob job is running.", "PaddleJob job is successfully completed.",
          "PaddleJob job is failed because 1 Worker replica(s) failed.",
          f"{PD}:385-403, :434"),
    Facts("PaddleJob", {"Worker": 2}, [], "job-worker-1",
          "PaddleJob {ns}/job is running.", "PaddleJob {ns}/job successfully completed.",
          "PaddleJob job is failed because 1 Worker replica(s) failed.",
          f"{PD}:406-424, :434, :507"),
    Facts("JAXJob", {"Worker": 3}, ["job-worker-0"], "job-worker-1",
          "JAXJob {ns}/job is running.", "JAXJob {ns}/job successfully completed.",
          "JAXJob job is failed because 1 Worker replica(s) failed.",
          f"{JAX}:373-386, :397, :464"),
    Facts("MPIJob", {"Launcher": 1, "Worker": 2}, ["job-launcher"], "job-launcher",
          "MPIJob job is running.", "MPIJob job is successfully completed.",
          "MPIJob job is failed because 1 Worker replica(s) failed.",
          f"{MPI}:306, :581-597, :607"),
]
IDS = ["tf-chief", "tf-workers", "pt-master", "pt-workers", "xgb", "paddle-master",
       "paddle-workers", "jax", "mpi"]

CREATED_AT = {
    "JAXJob": f"{JAX}:472", "MPIJob": f"{MPI}:322", "PaddleJob": f"{PD}:515",
    "PyTorchJob": f"{PT}:521", "TFJob": f"{TF}:656", "XGBoostJob": f"{XGB}:461",
    "MXJob": "(no v1.9 controller: MXJob is kept by trainop, worded as the others)",
}


def failed_reason(kind: str) -> str:
    """The Failed condition's reason when a replica fails for good: `KindFailed`, but MPI's
    controller wraps NewReason twice (pkg/controller.v1/mpi/mpijob_controller.go:613)."""
    return "MPIJobMPIJobFailed" if kind == "MPIJob" else f"{kind}Failed"
