"""PaddleJob: collective (workers only) or parameter-server mode (Master + Worker)."""

from __future__ import annotations

from trainop.api.jobs.paddlejob import PaddleJob, PaddleJobSpec
from trainop.api.resolved import resolve
from trainop.api.resources import HPAS
from trainop.api.types import Defaulted
from trainop.engine import POD_IP, Addressing, Counts, Env, FieldRef, Framework
from trainop.engine.wording import ShortTitleWithMaster
from trainop.frameworks.common import all_succeeded
from trainop.frameworks.registry import declare


class Paddle(Framework[PaddleJobSpec]):
    model = PaddleJob
    spec_type = PaddleJobSpec
    owned = (HPAS,)
    # pkg/controller.v1/paddlepaddle/paddlepaddle_controller.go:385-420, as PyTorch
    wording = ShortTitleWithMaster()

    def env(self, job: Defaulted, rtype: str, index: int, addr: Addressing) -> Env:
        # upstream's variables in its order (pkg/controller.v1/paddlepaddle/envvar.go:53-140)
        ps_mode = resolve(job).present("Master")
        lead = "Master" if ps_mode else "Worker"
        port = addr.port(job, lead, 0)
        env: dict[str, str | FieldRef] = {
            "PYTHONUNBUFFERED": "1", "PADDLE_JOB_ID": job.name,
            "PADDLE_NNODES": str(resolve(job).total),
        }
        if rtype == lead and index == 0:
            # paddle.distributed.launch serves the master only on the pod's own IP
            env["POD_IP_DUMMY"] = FieldRef(POD_IP)
            env["PADDLE_MASTER"] = f"$(POD_IP_DUMMY):{port}"
        else:
            env["PADDLE_MASTER"] = f"{addr.host(job, lead, 0, qualified=False)}:{port}"
        if ps_mode:  # one server or trainer per pod
            env["PADDLE_SERVER_NUM" if rtype == "Master" else "PADDLE_TRAINER_NUM"] = "1"
        return env

    def env_containers(self, job: Defaulted) -> str | None:
        return None  # every container (envvar.go:53)

    def succeeded(self, job: Defaulted, counts: dict[str, Counts]) -> bool:
        if resolve(job).present("Master"):
            return all_succeeded(counts, "Master")
        return all_succeeded(counts, "Worker")


declare(Paddle())
