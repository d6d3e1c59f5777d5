"""JAXJob: its spec (and the validation rules of its own) and its model, which declares the
kind with its facts."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from trainop.api.kinds import KindInfo, declare_kind
from trainop.api.types import Job, JobSpec, ReplicaSpec


class JAXJobSpec(JobSpec):
    replica_specs: dict[str, ReplicaSpec] = Field(default_factory=dict, alias="jaxReplicaSpecs")
    checks_managed_by: ClassVar[bool] = False  # pkg/webhooks/jax/jaxjob_webhook.go:72-80


@declare_kind
class JAXJob(Job):
    kind: Literal["JAXJob"] = "JAXJob"
    spec: JAXJobSpec
    info = KindInfo(
        kind="JAXJob", plural="jaxjobs", replica_specs_field="jaxReplicaSpecs",
        replica_types=("Worker",),
        default_container="jax", default_port_name="jaxjob-port", default_port=6666,
        default_restart_policy="Never", framework="jax",
        worker0_is_master=True,  # pkg/controller.v1/jax/jaxjob_controller.go:462
        scale_replica_type="Worker")
