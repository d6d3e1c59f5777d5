"""TFJob: TF_CONFIG for every replica; success by chief/master or worker 0 (or all)."""

from __future__ import annotations

import json

from trainop.api.jobs.tfjob import TFJob, TFJobSpec
from trainop.api.resolved import resolve
from trainop.api.types import Defaulted
from trainop.engine import Addressing, Counts, Framework, Wording
from trainop.frameworks.common import all_succeeded, compact_json, per_job
from trainop.frameworks.registry import declare


class TFWording(Wording):
    def restarting_event(self, job: Defaulted, failed: int, rtype: str) -> str | None:
        return None  # tfjob_controller.go tells none of its own

    def failed(self, job: Defaulted, failed: int, rtype: str, policy: str) -> str:
        if policy == "ExitCode":
            return super().failed(job, failed, rtype, policy)
        # pkg/controller.v1/tensorflow/tfjob_controller.go:500
        return f"TFJob {job.key} has failed because {failed} {rtype} replica(s) failed."


class TensorFlow(Framework[TFJobSpec]):
    model = TFJob
    spec_type = TFJobSpec
    wording = TFWording()

    def env(self, job: Defaulted, rtype: str, index: int, addr: Addressing) -> dict[str, str]:
        # A single replica trains alone: no cluster to describe (util.go:74-95).
        resolved = resolve(job)
        if resolved.total <= 1:
            return {}

        def cluster() -> dict[str, list[str]]:
            # every type of the spec, the evaluator too (one of 0 replicas as []), keys
            # sorted as Go writes a map (tensorflow.go:157-188)
            return {rt.lower(): [f"{addr.host(job, rt, i)}:{addr.port(job, rt, i)}"
                                 for i in range(resolved.replicas_of(rt))]
                    for rt in sorted(resolved.replicas, key=str.lower)}
        task = compact_json({"type": rtype.lower(), "index": index})
        if self.spec(job).enable_dynamic_worker:
            # a worker knows itself and the PS only, so workers may come and go
            # (tensorflow.go:74-83, :125-134)
            full = per_job(job, addr, "tf-cluster", cluster)
            own = full.get(rtype.lower(), [])
            # a worker's PS list is the cluster's, which Go writes `null` when the job has
            # no PS (a lookup of a missing map key: tensorflow.go:79)
            sparse = {"worker": {str(index): own[index]} if rtype == "Worker" else {},
                      "ps": own[index:index + 1] if rtype == "PS" else
                      full.get("ps") if rtype == "Worker" else []}
            return {"TF_CONFIG": compact_json({"cluster": sparse, "task": json.loads(task)})}
        # {"cluster":...,"task":...,"environment":"cloud"}, the cluster part made once
        shared = per_job(job, addr, "tf-cluster-json", lambda: compact_json(cluster()))
        return {"TF_CONFIG": f'{{"cluster":{shared},"task":{task},"environment":"cloud"}}'}

    def tolerates_failure(self, job: Defaulted, rtype: str) -> bool:
        # tfjob_controller.go:495-498: the job goes on whatever its workers do
        return rtype == "Worker" and bool(self.spec(job).enable_dynamic_worker)

    def succeeded(self, job: Defaulted, counts: dict[str, Counts]) -> bool:
        for chief in ("Chief", "Master"):
            if resolve(job).present(chief):
                return all_succeeded(counts, chief)
        if self.spec(job).success_policy == "AllWorkers":
            return all_succeeded(counts, "Worker")
        worker = counts.get("Worker")
        return worker is not None and 0 in worker.succeeded_indexes


declare(TensorFlow())
