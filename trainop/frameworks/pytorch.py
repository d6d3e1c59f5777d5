"""PyTorchJob: torch.distributed / torchrun environment, elastic rendezvous."""

from __future__ import annotations

from typing import Any

from trainop.api.jobs.pytorchjob import PyTorchJob, PyTorchJobSpec
from trainop.api.numbers import go_int
from trainop.api.resolved import resolve
from trainop.api.resources import HPAS
from trainop.api.types import Defaulted
from trainop.engine import Addressing, Counts, EngineConfig, Framework
from trainop.engine.framework import spec_of
from trainop.engine.labels import replica_name
from trainop.engine.wording import ShortTitleWithMaster
from trainop.frameworks.common import all_succeeded, any_succeeded, render_init_containers
from trainop.frameworks.registry import declare

DEFAULT_RDZV_BACKEND = "c10d"


def nproc_per_node(job: Defaulted) -> int:
    """nprocPerNode as a number for WORLD_SIZE: an integer, else 1 (`auto`, `cpu`, `gpu`
    leave the count to torchrun: upstream's getNprocPerNodeInt, envvar.go:132-140)."""
    number = go_int(spec_of(job, PyTorchJobSpec).nproc_per_node)
    return 1 if number is None else number


def init_containers(job: Defaulted, config: EngineConfig) -> list[dict[str, Any]]:
    """`init-pytorch`: a worker waits until the master's name resolves (initcontainer.go),
    from --pytorch-init-container-template-file where given."""
    master = replica_name(job, "Master", 0)
    return render_init_containers(config.pytorch_init_template, config.pytorch_init_image,
                                  config.pytorch_init_max_tries, master)


class PyTorch(Framework[PyTorchJobSpec]):
    model = PyTorchJob
    spec_type = PyTorchJobSpec
    owned = (HPAS,)
    # pkg/controller.v1/pytorch/pytorchjob_controller.go:383-424: the Master's words name
    # the job alone, the workers' its namespace too
    wording = ShortTitleWithMaster()

    def env(self, job: Defaulted, rtype: str, index: int, addr: Addressing) -> dict[str, str]:
        # upstream's variables in its order (envvar.go:49-123, master.go, elastic.go)
        spec = self.spec(job)
        resolved = resolve(job)
        total = resolved.total
        env = {"PYTHONUNBUFFERED": "1"}
        if resolved.present("Master"):  # without a Master: none of these
            master = addr.host(job, "Master", 0, qualified=False)
            port = str(addr.port(job, "Master", 0))
            rank = str(index + 1 if rtype == "Worker" else index)
            env |= {"MASTER_PORT": port, "PET_MASTER_PORT": port, "MASTER_ADDR": master,
                    "PET_MASTER_ADDR": master, "WORLD_SIZE": str(total * nproc_per_node(job)),
                    "RANK": rank, "PET_NODE_RANK": rank}
        if spec.nproc_per_node is not None:
            env["PET_NPROC_PER_NODE"] = spec.nproc_per_node
        policy = spec.elastic_policy
        if policy is None:
            env["PET_NNODES"] = str(total)
            return env
        host = policy.rdzv_host or addr.host(job, "Worker", 0, qualified=False)
        port = str(policy.rdzv_port or addr.port(job, "Worker", 0))
        env["PET_RDZV_ENDPOINT"] = f"{host}:{port}"
        env["PET_RDZV_BACKEND"] = policy.rdzv_backend or DEFAULT_RDZV_BACKEND
        env["PET_NNODES"] = f"{policy.min_replicas}:{policy.max_replicas}"
        if policy.max_restarts is not None:
            env["PET_MAX_RESTARTS"] = str(policy.max_restarts)
        if policy.n_proc_per_node is not None:
            env["PET_NPROC_PER_NODE"] = str(policy.n_proc_per_node)
        if policy.rdzv_id is not None:
            env["PET_RDZV_ID"] = policy.rdzv_id
        if policy.rdzv_conf:
            env["PET_RDZV_CONF"] = ",".join(f"{c.key}={c.value}" for c in policy.rdzv_conf)
        if policy.standalone:
            # upstream writes "" (elastic.go:114-118), which torchrun cannot read (int(""))
            env["PET_STANDALONE"] = "1"
        return env

    def decorate_pod(self, job: Defaulted, rtype: str, index: int, pod: dict[str, Any],
                     addr: Addressing, config: EngineConfig) -> None:
        # workers of a job with a Master wait for its name (initcontainer.go:117-134)
        if rtype == "Worker" and resolve(job).present("Master"):
            pod["spec"].setdefault("initContainers", []).extend(init_containers(job, config))

    def env_containers(self, job: Defaulted) -> str | None:
        return None  # upstream gives every container of a PyTorch pod the environment

    def succeeded(self, job: Defaulted, counts: dict[str, Counts]) -> bool:
        if resolve(job).present("Master"):
            return all_succeeded(counts, "Master")
        if self.spec(job).elastic_policy is not None:
            return any_succeeded(counts, "Worker")
        return all_succeeded(counts, "Worker")


declare(PyTorch())
