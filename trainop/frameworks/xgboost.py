"""XGBoostJob: the collective tracker on the master (rank 0); success by the master."""

from __future__ import annotations

from trainop.api import KINDS, Job
from trainop.api.types import XGBoostJobSpec
from trainop.engine import Addressing, Counts, Framework
from trainop.frameworks.common import all_succeeded, per_job, replicas


class XGBoost(Framework[XGBoostJobSpec]):
    info = KINDS["XGBoostJob"]
    spec_type = XGBoostJobSpec
    master_role = ("Master",)

    def env(self, job: Job, rtype: str, index: int, addr: Addressing) -> dict[str, str]:
        workers = replicas(job, "Worker")
        rank = index + 1 if rtype == "Worker" else index
        return {
            "MASTER_ADDR": addr.host(job, "Master", 0, qualified=False),
            "MASTER_PORT": str(addr.port(job, "Master", 0)),
            "WORLD_SIZE": str(replicas(job, "Master") + workers),
            "RANK": str(rank),
            "WORKER_PORT": str(addr.port(job, rtype, index)),
            "WORKER_ADDRS": per_job(job, addr, "xgb-workers", lambda: ",".join(
                addr.host(job, "Worker", i, qualified=False) for i in range(workers))),
            "PYTHONUNBUFFERED": "1",
        }

    def succeeded(self, job: Job, counts: dict[str, Counts]) -> bool:
        return all_succeeded(counts, "Master")
