"""TFJob: its spec (and the validation rules of its own) and its model, which declares the
kind with its facts."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from trainop.api.kinds import KindInfo, declare_kind
from trainop.api.problems import Problem, count, no_replicas_of_a_leader
from trainop.api.types import Job, JobSpec, ReplicaSpec


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
