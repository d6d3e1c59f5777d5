"""PaddleJob: its spec (and the validation rules of its own) and its model, which declares the
kind with its facts."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from trainop.api.kinds import KindInfo, declare_kind
from trainop.api.problems import Problem, elastic_problems, no_replicas_of_a_leader
from trainop.api.types import (
    Job,
    JobSpec,
    PaddleElasticPolicy,
    ReplicaSpec,
)


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
