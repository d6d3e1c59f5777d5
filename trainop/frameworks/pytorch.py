"""PyTorchJob: torch.distributed / torchrun environment, elastic rendezvous."""

from __future__ import annotations

from trainop.api import KINDS, Job
from trainop.api.templates import container
from trainop.api.types import PyTorchJobSpec
from trainop.engine import Addressing, Counts, Framework
from trainop.engine.framework import spec_of
from trainop.frameworks.common import all_succeeded, any_succeeded, replicas

DEFAULT_RDZV_BACKEND = "c10d"


def nproc_per_node(job: Job) -> int:
    """Processes per pod: an integer nprocPerNode, else 1 (auto and cpu on a CPU pod)."""
    value = spec_of(job, PyTorchJobSpec).nproc_per_node or "auto"
    if value.isdigit():
        return int(value)
    if value in ("auto", "gpu"):
        gpus = _gpus_per_pod(job)
        if gpus:
            return gpus
    return 1


def _gpus_per_pod(job: Job) -> int:
    for rspec in job.spec.replica_specs.values():
        c = container(rspec.template, job.main_container)
        if c is not None:
            limits = (c.get("resources") or {}).get("limits") or {}
            for name, value in limits.items():
                if name.endswith("/gpu") and str(value).isdigit():
                    return int(value)
    return 0


class PyTorch(Framework[PyTorchJobSpec]):
    info = KINDS["PyTorchJob"]
    spec_type = PyTorchJobSpec
    master_role = ("Master",)
    worker0_is_master = True  # upstream: pkg/controller.v1/pytorch/pytorchjob_controller.go:499
    owned_kinds = ("HorizontalPodAutoscaler",)

    def short_title(self, job: Job) -> bool:
        # pkg/controller.v1/pytorch/pytorchjob_controller.go:383-424: the Master's words
        # name the job alone, the workers' its namespace too
        return "Master" in job.spec.replica_specs

    def env(self, job: Job, rtype: str, index: int, addr: Addressing) -> dict[str, str]:
        spec = self.spec(job)
        has_master = replicas(job, "Master") > 0
        lead = "Master" if has_master else "Worker"
        nnodes = replicas(job, "Master") + replicas(job, "Worker")
        rank = index + 1 if (has_master and rtype == "Worker") else index
        master_addr = addr.host(job, lead, 0, qualified=False)
        master_port = str(addr.port(job, lead, 0))
        env = {
            "MASTER_ADDR": master_addr, "MASTER_PORT": master_port,
            "PET_MASTER_ADDR": master_addr, "PET_MASTER_PORT": master_port,
            "WORLD_SIZE": str(nnodes * nproc_per_node(job)),
            "RANK": str(rank), "PET_NODE_RANK": str(rank),
            "PET_NNODES": str(nnodes),
            "PET_NPROC_PER_NODE": spec.nproc_per_node or "auto",
            "PYTHONUNBUFFERED": "1",
        }
        policy = spec.elastic_policy
        if policy is not None:
            host = policy.rdzv_host or addr.host(job, "Worker", 0, qualified=False)
            port = policy.rdzv_port or addr.port(job, "Worker", 0)
            env["PET_RDZV_ENDPOINT"] = f"{host}:{port}"
            env["PET_RDZV_BACKEND"] = policy.rdzv_backend or DEFAULT_RDZV_BACKEND
            env["PET_NNODES"] = f"{policy.min_replicas}:{policy.max_replicas}"
            if policy.max_restarts is not None:
                env["PET_MAX_RESTARTS"] = str(policy.max_restarts)
            if policy.rdzv_id:
                env["PET_RDZV_ID"] = policy.rdzv_id
            if policy.rdzv_conf:
                env["PET_RDZV_CONF"] = ",".join(
                    f"{c.key}={c.value}" for c in policy.rdzv_conf if c.key
                )
            if policy.standalone:
                env["PET_STANDALONE"] = "1"
        return env

    def env_containers(self, job: Job) -> str | None:
        return None  # upstream gives every container of a PyTorch pod the environment

    def succeeded(self, job: Job, counts: dict[str, Counts]) -> bool:
        if replicas(job, "Master") > 0:
            return all_succeeded(counts, "Master")
        if self.spec(job).elastic_policy is not None:
            return any_succeeded(counts, "Worker")
        return all_succeeded(counts, "Worker")
