"""MXJob: DMLC parameter-server environment and MX_CONFIG."""

from __future__ import annotations

from trainop.api.jobs.mxjob import MXJob, MXJobSpec
from trainop.api.resolved import resolve
from trainop.api.types import Defaulted
from trainop.engine import Addressing, Counts, Framework
from trainop.frameworks.common import all_succeeded, compact_json, per_job
from trainop.frameworks.registry import declare


class MXNet(Framework[MXJobSpec]):
    model = MXJob
    spec_type = MXJobSpec

    def env(self, job: Defaulted, rtype: str, index: int, addr: Addressing) -> dict[str, str]:
        resolved = resolve(job)

        def shared() -> str:
            cluster = {
                rt.lower(): [{"url": addr.host(job, rt, i), "port": addr.port(job, rt, i)}
                             for i in range(n)]
                for rt, n in resolved.replicas.items()
            }
            labels = {rt: "" for rt in cluster}
            return f'{{"cluster":{compact_json(cluster)},"labels":{compact_json(labels)},'
        # {"cluster":...,"labels":...,"task":...}, all but the task made once per job
        task = compact_json({"type": rtype.lower(), "index": index})
        env = {
            "MX_CONFIG": f'{per_job(job, addr, "mx-config", shared)}"task":{task}}}',
            "DMLC_ROLE": rtype.lower(),
            "DMLC_NUM_SERVER": str(resolved.replicas_of("Server")),
            "DMLC_NUM_WORKER": str(resolved.replicas_of("Worker")),
            "DMLC_USE_KUBERNETES": "1",
        }
        if resolved.present("Scheduler"):
            env["DMLC_PS_ROOT_URI"] = addr.host(job, "Scheduler", 0)
            env["DMLC_PS_ROOT_PORT"] = str(addr.port(job, "Scheduler", 0))
        return env

    def succeeded(self, job: Defaulted, counts: dict[str, Counts]) -> bool:
        resolved = resolve(job)
        if resolved.present("Scheduler"):
            return all_succeeded(counts, "Scheduler")
        if resolved.present("Tuner"):  # MXTune: the tuner decides
            return all_succeeded(counts, "Tuner")
        return resolved.replicas_of("Worker") == 1 and all_succeeded(counts, "Worker")


declare(MXNet())
