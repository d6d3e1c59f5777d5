"""MXJob: its spec (and the validation rules of its own) and its model, which declares the
kind with its facts."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from trainop.api.kinds import KindInfo, declare_kind
from trainop.api.problems import (
    Problem,
    at_most_one,
    count,
    total,
)
from trainop.api.types import Job, JobSpec, ReplicaSpec


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
