"""XGBoostJob: the collective tracker on the master (rank 0); success by the master."""

from __future__ import annotations

from trainop.api.jobs.xgboostjob import XGBoostJob, XGBoostJobSpec
from trainop.api.resolved import resolve
from trainop.api.types import Defaulted
from trainop.engine import Addressing, Counts, Framework
from trainop.engine.wording import ShortTitle
from trainop.frameworks.common import all_succeeded, per_job
from trainop.frameworks.registry import declare


class XGBoost(Framework[XGBoostJobSpec]):
    model = XGBoostJob
    spec_type = XGBoostJobSpec

    wording = ShortTitle()  # pkg/controller.v1/xgboost/xgboostjob_controller.go:365-377

    def env(self, job: Defaulted, rtype: str, index: int, addr: Addressing) -> dict[str, str]:
        # upstream's variables, in its order: pkg/controller.v1/xgboost/xgboost.go:31-110
        resolved = resolve(job)
        total = resolved.total
        rank = index + resolved.replicas_of("Master") if rtype == "Worker" else index
        env = {
            "MASTER_PORT": str(addr.port(job, "Master", 0)),
            "MASTER_ADDR": addr.host(job, "Master", 0, qualified=False),
            "WORLD_SIZE": str(total),
            "RANK": str(rank),
            "PYTHONUNBUFFERED": "1",
        }
        if total > 1:  # for LightGBM: the workers' port and names (a master alone has none)
            # the Worker type's port (one number on a cluster; locally each worker's own)
            port = addr.port(job, "Worker", index if rtype == "Worker" else 0)
            env["WORKER_PORT"] = str(port)
            env["WORKER_ADDRS"] = per_job(job, addr, "xgb-workers", lambda: ",".join(
                addr.host(job, "Worker", i, qualified=False) for i in range(total - 1)))
        return env

    def env_containers(self, job: Defaulted) -> str | None:
        return None  # every container, as upstream (xgboost.go:73)

    def names_looked_up_once(self, job: Defaulted, rtype: str, index: int, addr: Addressing
                             ) -> list[str]:
        # XGBoost's tracker client looks MASTER_ADDR up once and exits 1 when cluster DNS
        # does not have it yet (upstream starts the workers as they are)
        if rtype == "Worker" and resolve(job).present("Master"):
            return [addr.host(job, "Master", 0, qualified=False)]
        return []

    def succeeded(self, job: Defaulted, counts: dict[str, Counts]) -> bool:
        return all_succeeded(counts, "Master")


declare(XGBoost())
