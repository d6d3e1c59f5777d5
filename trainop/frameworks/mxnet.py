"""MXJob: DMLC parameter-server environment and MX_CONFIG."""

from __future__ import annotations

from trainop.api import KINDS, Job
from trainop.api.types import MXJobSpec
from trainop.engine import Addressing, Counts, Framework
from trainop.frameworks.common import all_succeeded, compact_json, per_job, replicas


class MXNet(Framework[MXJobSpec]):
    info = KINDS["MXJob"]
    spec_type = MXJobSpec
    master_role = ("Scheduler",)

    def env(self, job: Job, rtype: str, index: int, addr: Addressing) -> dict[str, str]:
        def shared() -> str:
            cluster = {
                rt.lower(): [{"url": addr.host(job, rt, i), "port": addr.port(job, rt, i)}
                             for i in range(replicas(job, rt))]
                for rt in job.spec.replica_specs
            }
            labels = {rt: "" for rt in cluster}
            return f'{{"cluster":{compact_json(cluster)},"labels":{compact_json(labels)},'
        # {"cluster":...,"labels":...,"task":...}, all but the task made once per job
        task = compact_json({"type": rtype.lower(), "index": index})
        env = {
            "MX_CONFIG": f'{per_job(job, addr, "mx-config", shared)}"task":{task}}}',
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
