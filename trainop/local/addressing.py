"""Local addressing: every replica on 127.0.0.1, each named port a free port of its own."""

from __future__ import annotations

from collections.abc import Mapping

from trainop.api import Job
from trainop.api.resolved import resolve
from trainop.api.templates import container
from trainop.api.types import Defaulted
from trainop.local.ports import free_port


def port_names(job: Job, rtype: str) -> list[str]:
    """The port names a replica of `rtype` answers on: the kind's default one, then those
    its main container declares."""
    names = [job.info.default_port_name]
    rspec = job.spec.replica_specs.get(rtype)
    main = container(rspec.template if rspec else None, job.main_container)
    for port in (main or {}).get("ports") or []:
        if isinstance(port, dict) and isinstance(port.get("name"), str) \
                and port["name"] not in names:
            names.append(port["name"])
    return names


class LocalAddressing:
    """One loopback port per (replica, port name), chosen before the job's first reconcile
    (`for_job`), so that a reconcile only reads them: the engine binds nothing."""

    def __init__(self, ports: Mapping[tuple[str, int, str], int]):
        self._ports = dict(ports)

    @classmethod
    def for_job(cls, job: Defaulted) -> LocalAddressing:
        """A distinct free port for each port name of each replica of `job`."""
        ports: dict[tuple[str, int, str], int] = {}
        for rtype, index in resolve(job).slots():
            for name in port_names(job, rtype):
                ports[(rtype, index, name)] = free_port()
        return cls(ports)

    def host(self, job: Job, rtype: str, index: int, *, qualified: bool = True) -> str:
        return "127.0.0.1"

    def pod_host(self, pod: str) -> str:
        return "127.0.0.1"

    def port(self, job: Job, rtype: str, index: int, name: str | None = None) -> int:
        key = (rtype, index, name or job.info.default_port_name)
        if key not in self._ports:
            # a framework asking for a replica or port the job does not declare: say which
            raise LookupError(f"{job.kind} {job.key} has no port {key[2]!r} on "
                              f"{rtype} replica {index}")
        return self._ports[key]
