"""The lead rank's progress reports in a local run: the file its process is told to write
(TRAINOP_PROGRESS_FILE, in the run folder), read again whenever it changed, as a rank
supervisor reads it in a cluster (supervisor/child.go)."""

from __future__ import annotations

import contextlib
import json
import os
import stat
from pathlib import Path

from trainop.engine.observed import Reported
from trainop.engine.progress import LIMIT


class ReportFile:
    """One pod's report file, and what was last read of it."""

    def __init__(self, pod: str, path: Path) -> None:
        self.pod, self.path = pod, path
        self._seen: tuple[int, int] | None = None
        self.last: Reported | None = None

    def read(self) -> Reported | None:
        """The latest report: read again where the file changed (its time or size); None
        while the rank has written none."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return self.last  # none yet, or between a write and its rename
        with contextlib.closing(os.fdopen(fd, "rb")) as f:
            info = os.fstat(fd)
            seen = (info.st_mtime_ns, info.st_size)
            if seen == self._seen:
                return self.last
            self._seen = seen
            if not stat.S_ISREG(info.st_mode):
                self.last = Reported(self.pod, problem="the report is not a regular file")
                return self.last
            data = f.read(LIMIT + 1)
        self.last = heard(self.pod, data)
        return self.last


def heard(pod: str, data: bytes) -> Reported:
    """A report as read: its JSON, or why it is none (in the rank supervisor's words)."""
    if len(data) > LIMIT:
        return Reported(pod, problem=f"a report over the {LIMIT} bytes one may hold")
    try:
        return Reported(pod, json.loads(data))
    except (ValueError, RecursionError):  # bytes not UTF-8, or nested past reading
        return Reported(pod, problem="a report that is not JSON")
