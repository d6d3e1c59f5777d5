"""Local addressing: every replica on 127.0.0.1, each named port a free port of its own."""

from __future__ import annotations

import socket

from trainop.api import Job


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalAddressing:
    """Hands out one free loopback port per (replica, port name), stable for the run."""

    def __init__(self) -> None:
        self._ports: dict[tuple[str, str, int, str], int] = {}

    def host(self, job: Job, rtype: str, index: int, *, qualified: bool = True) -> str:
        return "127.0.0.1"

    def pod_host(self, pod: str) -> str:
        return "127.0.0.1"

    def port(self, job: Job, rtype: str, index: int, name: str | None = None) -> int:
        key = (job.key, rtype, index, name or job.info.default_port_name)
        if key not in self._ports:
            taken = set(self._ports.values())
            port = free_port()
            while port in taken:
                port = free_port()
            self._ports[key] = port
        return self._ports[key]
