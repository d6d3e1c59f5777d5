"""PyTorchJob: its spec (and the validation rules of its own) and its model, which declares the
kind with its facts."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from trainop.api.kinds import KindInfo, declare_kind
from trainop.api.problems import (
    NPROC,
    Problem,
    count,
    elastic_problems,
    exactly_one,
)
from trainop.api.types import (
    ElasticPolicy,
    Job,
    JobSpec,
    ReplicaSpec,
)


class PyTorchJobSpec(JobSpec):
    replica_specs: dict[str, ReplicaSpec] = Field(
        default_factory=dict, alias="pytorchReplicaSpecs"
    )
    elastic_policy: ElasticPolicy | None = None
    nproc_per_node: str | None = None

    def elastic(self) -> ElasticPolicy | None:
        return self.elastic_policy

    def default_kind_fields(self) -> None:
        policy = self.elastic_policy
        # "auto" unless the (deprecated) elastic one is set (pytorch_defaults.go:77-83)
        if self.nproc_per_node is None and (policy is None or policy.n_proc_per_node is None):
            self.nproc_per_node = "auto"
        if policy is not None:
            # a missing bound copies the other; both missing take the Worker count
            if policy.min_replicas is None and policy.max_replicas is None:
                # (the common defaults come first: an unset Worker count is 1 by now; no
                # Worker at all is the validation's to refuse)
                n = count(self.replica_specs, "Worker") if "Worker" in self.replica_specs \
                    else 1
                policy.min_replicas = policy.max_replicas = n
            elif policy.min_replicas is None:
                policy.min_replicas = policy.max_replicas
            elif policy.max_replicas is None:
                policy.max_replicas = policy.min_replicas

    def kind_problems(self, field: str) -> list[Problem]:
        problems = exactly_one(field, self.replica_specs, "Master") \
            if "Master" in self.replica_specs else []
        worker = self.replica_specs.get("Worker")
        if worker is not None and worker.replicas is not None and worker.replicas < 1:
            # pkg/webhooks/pytorch/pytorchjob_webhook.go:156-158
            problems.append(Problem(f"{field}[Worker].replicas", "must be at least 1"))
        if self.nproc_per_node is not None and not NPROC.match(self.nproc_per_node):
            problems.append(Problem(
                "spec.nprocPerNode",
                f"must be auto, cpu, gpu or a positive integer, got {self.nproc_per_node!r}",
            ))
        policy = self.elastic_policy
        if policy is not None:
            problems.extend(elastic_problems("spec.elasticPolicy", policy.min_replicas,
                                             policy.max_replicas))
            # pkg/webhooks/pytorch/pytorchjob_webhook.go:96-110
            if "Worker" not in self.replica_specs:
                problems.append(Problem(f"{field}[Worker]",
                                        "must be configured if elastic policy is used"))
            # (defaulting leaves nprocPerNode unset where the elastic one is set)
            if policy.n_proc_per_node is not None and self.nproc_per_node is not None:
                problems.append(Problem("spec.elasticPolicy.nProcPerNode",
                                        "must not be used with spec.nprocPerNode"))
        return problems

    def warnings(self) -> list[str]:
        # pkg/webhooks/pytorch/pytorchjob_webhook.go:100-103
        if self.elastic_policy is not None and self.elastic_policy.n_proc_per_node is not None:
            return ["spec.elasticPolicy.nProcPerNode is deprecated, use spec.nprocPerNode "
                    "instead"]
        return []


@declare_kind
class PyTorchJob(Job):
    kind: Literal["PyTorchJob"] = "PyTorchJob"
    spec: PyTorchJobSpec
    info = KindInfo(
        kind="PyTorchJob", plural="pytorchjobs", replica_specs_field="pytorchReplicaSpecs",
        replica_types=("Master", "Worker"),
        default_container="pytorch", default_port_name="pytorchjob-port", default_port=23456,
        default_restart_policy="OnFailure", framework="pytorch",
        master_role=("Master",),
        worker0_is_master=True,  # pkg/controller.v1/pytorch/pytorchjob_controller.go:499
        scale_replica_type="Worker")
