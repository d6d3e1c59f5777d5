"""TFJob: TF_CONFIG for every replica; success by chief/master or worker 0 (or all)."""

from __future__ import annotations

from trainop.api import KINDS, Job
from trainop.api.types import TFJobSpec
from trainop.engine import Addressing, Counts, Framework
from trainop.frameworks.common import all_succeeded, compact_json, per_job, replicas, total_replicas


class TensorFlow(Framework[TFJobSpec]):
    info = KINDS["TFJob"]
    spec_type = TFJobSpec
    master_role = ("Chief", "Master")
    worker0_is_master = True  # upstream: pkg/controller.v1/tensorflow/tfjob_controller.go:598

    def env(self, job: Job, rtype: str, index: int, addr: Addressing) -> dict[str, str]:
        # A single replica trains alone: no cluster to describe (upstream rule).
        if total_replicas(job) <= 1:
            return {}
        def cluster() -> str:
            return compact_json({
                rt.lower(): [f"{addr.host(job, rt, i)}:{addr.port(job, rt, i)}"
                             for i in range(replicas(job, rt))]
                for rt in job.spec.replica_specs
                if rt != "Evaluator" and replicas(job, rt) > 0  # evaluators watch, not train
            })
        # {"cluster":...,"task":...,"environment":"cloud"}, the cluster part made once
        task = compact_json({"type": rtype.lower(), "index": index})
        return {"TF_CONFIG": f'{{"cluster":{per_job(job, addr, "tf-cluster", cluster)},'
                             f'"task":{task},"environment":"cloud"}}'}

    def failed_message(self, job: Job, failed: int, rtype: str, policy: str) -> str:
        if policy == "ExitCode":
            return super().failed_message(job, failed, rtype, policy)
        # pkg/controller.v1/tensorflow/tfjob_controller.go:500
        return f"TFJob {job.key} has failed because {failed} {rtype} replica(s) failed."

    def succeeded(self, job: Job, counts: dict[str, Counts]) -> bool:
        for chief in ("Chief", "Master"):
            if replicas(job, chief) > 0:
                return all_succeeded(counts, chief)
        if self.spec(job).success_policy == "AllWorkers":
            return all_succeeded(counts, "Worker")
        worker = counts.get("Worker")
        return worker is not None and 0 in worker.succeeded_indexes
