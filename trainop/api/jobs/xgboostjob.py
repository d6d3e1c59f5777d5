"""XGBoostJob: its spec (and the validation rules of its own) and its model, which declares the
kind with its facts."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from trainop.api.kinds import KindInfo, declare_kind
from trainop.api.problems import Problem, exactly_one
from trainop.api.types import Job, JobSpec, ReplicaSpec


class XGBoostJobSpec(JobSpec):
    replica_specs: dict[str, ReplicaSpec] = Field(default_factory=dict, alias="xgbReplicaSpecs")

    def kind_problems(self, field: str) -> list[Problem]:
        return exactly_one(field, self.replica_specs, "Master")


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
