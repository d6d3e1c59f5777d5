"""Helpers for running `trainop run` as a user does."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "trainop" / "examples"


def trainop_run(*args: str, cwd: Path, timeout: float = 300,
                stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trainop.cli", "run", "--no-live", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=timeout, input=stdin)


def ranks_joined(output: str) -> set[tuple[int, int]]:
    return {(int(r), int(w)) for r, w in re.findall(r"rank (\d+) of world size (\d+) joined",
                                                     output)}


def losses(output: str) -> list[float]:
    return [float(x) for x in re.findall(r"(?:epoch|round|step) \d+ loss ([0-9.]+)", output)]


def processes_with(marker: str) -> list[int]:
    """PIDs of live processes whose environment holds `marker` (our replicas)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker.encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return [p for p in found if p != os.getpid()]
