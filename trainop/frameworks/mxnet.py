"""MXJob: DMLC parameter-server environment and MX_CONFIG."""

from __future__ import annotations

import json

from trainop.api import KINDS, Job
from trainop.engine import Addressing, Counts, Framework
from trainop.frameworks.common import all_succeeded, replicas


class MXNet(Framework):
    info = KINDS["MXJob"]
    master_role = ("Scheduler",)

    def env(self, job: Job, rtype: str, index: int, addr: Addressing) -> dict[str, str]:
        cluster = {
            rt.lower(): [{"url": addr.host(job, rt, i), "port": addr.port(job, rt, i)}
                         for i in range(replicas(job, rt))]
            for rt in job.spec.replica_specs
        }
        config = {"cluster": cluster, "labels": {rt.lower(): "" for rt in cluster},
                  "task": {"type": rtype.lower(), "index": index}}
        env = {
            "MX_CONFIG": json.dumps(config, separators=(",", ":")),
            "DMLC_ROLE": rtype.lower(),
            "DMLC_NUM_SERVER": str(replicas(job, "Server")),
            "DMLC_NUM_WORKER": str(replicas(job, "Worker")),
            "DMLC_USE_KUBERNETES": "1",
        }
        if replicas(job, "Scheduler") > 0:
            env["DMLC_PS_ROOT_URI"] = addr.host(job, "Scheduler", 0)
            env["DMLC_PS_ROOT_PORT"] = str(addr.port(job, "Scheduler", 0))
        return env

    def succeeded(self, job: Job, counts: dict[str, Counts]) -> bool:
        if replicas(job, "Scheduler") > 0:
            return all_succeeded(counts, "Scheduler")
        if replicas(job, "Tuner") > 0:  # MXTune: the tuner decides
            return all_succeeded(counts, "Tuner")
        return replicas(job, "Worker") == 1 and all_succeeded(counts, "Worker")
