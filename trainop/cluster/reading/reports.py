"""The progress reports the manager's progress server took (cluster/serving/
progress_server.py), for the controllers to read (engine/progress.py), and the CA a pod
reporting there trusts (engine/progress_server.py).

One report per job: the latest. The server stores reports of jobs in the cache only, and
a job's goes with it: the store holds at most one per job the manager knows."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

from trainop.engine.observed import Reported

log = logging.getLogger(__name__)

CA_MOST = 64 << 10
"""The longest CA bundle read (a few certificates)."""


class HeardReports:
    """The latest report of each job (by kind, then job key), who is woken for it, and
    where the CA is."""

    def __init__(self, ca_file: Path | None) -> None:
        self.ca_file = ca_file
        self._reports: dict[tuple[str, str], Reported] = {}
        self._wake: dict[str, Callable[[str], None]] = {}
        self._ca: tuple[tuple[int, int], str | None] | None = None

    def listen(self, kind: str, wake: Callable[[str], None]) -> None:
        """`wake(job key)` for each report of a job of `kind` (the kind's controller)."""
        self._wake[kind] = wake

    def put(self, kind: str, key: str, report: Reported) -> None:
        self._reports[(kind, key)] = report
        if (wake := self._wake.get(kind)) is not None:
            wake(key)

    def of(self, kind: str, key: str) -> tuple[Reported, ...]:
        report = self._reports.get((kind, key))
        return () if report is None else (report,)

    def forget(self, kind: str, key: str) -> None:
        self._reports.pop((kind, key), None)

    def ca(self) -> str | None:
        """The CA bundle the webhook server's certificate chains to (its file, read again
        when it changed: the certificates rotate); None where there is none to read."""
        if self.ca_file is None:
            return None
        try:
            info = os.stat(self.ca_file)
        except OSError:
            return None
        seen = (info.st_mtime_ns, info.st_size)
        if self._ca is None or self._ca[0] != seen:
            text = None
            try:
                data = self.ca_file.read_bytes()[:CA_MOST + 1]
                if len(data) <= CA_MOST and b"-----BEGIN CERTIFICATE-----" in data:
                    text = data.decode("ascii")
            except (OSError, UnicodeDecodeError) as err:
                log.warning("cannot read the progress server's CA %s: %s", self.ca_file, err)
            self._ca = (seen, text)
        return self._ca[1]
