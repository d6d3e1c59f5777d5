"""JAXJob: jax.distributed coordinator on worker 0; success when every worker succeeds."""

from __future__ import annotations

from trainop.api.jobs.jaxjob import JAXJob, JAXJobSpec
from trainop.api.resolved import resolve
from trainop.api.types import Defaulted
from trainop.engine import Addressing, Counts, Framework
from trainop.frameworks.common import all_succeeded
from trainop.frameworks.registry import declare


class JAX(Framework[JAXJobSpec]):
    model = JAXJob
    spec_type = JAXJobSpec

    def env(self, job: Defaulted, rtype: str, index: int, addr: Addressing) -> dict[str, str]:
        # upstream's variables, in its order: pkg/controller.v1/jax/envvar.go:36-79
        return {
            "PYTHONUNBUFFERED": "1",
            "COORDINATOR_PORT": str(addr.port(job, "Worker", 0)),
            "COORDINATOR_ADDRESS": addr.host(job, "Worker", 0, qualified=False),
            "NUM_PROCESSES": str(resolve(job).total),
            "PROCESS_ID": str(index),
        }

    def env_containers(self, job: Defaulted) -> str | None:
        return None  # every container, as upstream (envvar.go:48)

    def succeeded(self, job: Defaulted, counts: dict[str, Counts]) -> bool:
        return all_succeeded(counts, "Worker")


declare(JAX())
