"""PaddleJob: collective (workers only) or parameter-server mode (Master + Worker)."""

from __future__ import annotations

from trainop.api import KINDS, Job
from trainop.api.types import PaddleJobSpec
from trainop.engine import Addressing, Counts, Framework
from trainop.frameworks.common import all_succeeded, replicas


class Paddle(Framework[PaddleJobSpec]):
    info = KINDS["PaddleJob"]
    spec_type = PaddleJobSpec
    master_role = ("Master",)
    owned_kinds = ("HorizontalPodAutoscaler",)

    def short_title(self, job: Job) -> bool:
        # pkg/controller.v1/paddlepaddle/paddlepaddle_controller.go:385-420, as PyTorch
        return "Master" in job.spec.replica_specs

    def env(self, job: Job, rtype: str, index: int, addr: Addressing) -> dict[str, str]:
        masters, workers = replicas(job, "Master"), replicas(job, "Worker")
        lead = "Master" if masters else "Worker"
        env = {
            "PADDLE_MASTER": f"{addr.host(job, lead, 0, qualified=False)}:"
                             f"{addr.port(job, lead, 0)}",
            "PADDLE_NNODES": str(workers),
            "PADDLE_JOB_ID": job.name,
            "PYTHONUNBUFFERED": "1",
        }
        if masters:
            env["PADDLE_SERVER_NUM"] = str(masters)
            env["PADDLE_TRAINER_NUM"] = str(workers)
        return env

    def succeeded(self, job: Job, counts: dict[str, Counts]) -> bool:
        if replicas(job, "Master") > 0:
            return all_succeeded(counts, "Master")
        return all_succeeded(counts, "Worker")
