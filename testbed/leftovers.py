"""What a test run left running: every process that carries the run's mark in its
environment (TRAINOP_TEST_RUN, which hack/run-tests.sh sets and everything the suites
start inherits: API servers, etcd, the node's daemons, the operators) once the run's
lanes have ended. Each is named, then stopped; the exit code says whether any was left.

    TRAINOP_TEST_RUN=<mark> python -m testbed.leftovers
"""

from __future__ import annotations

import os
import sys

import psutil  # type: ignore[import-untyped]

MARK = "TRAINOP_TEST_RUN"


def left(mark: str) -> list[psutil.Process]:
    """The processes of run `mark` but this one and those it runs under."""
    me = psutil.Process()
    mine = {me.pid, *(p.pid for p in me.parents())}
    out = []
    for proc in psutil.process_iter():
        if proc.pid in mine:
            continue
        try:
            if proc.status() != psutil.STATUS_ZOMBIE and proc.environ().get(MARK) == mark:
                out.append(proc)
        except psutil.Error:
            continue  # gone meanwhile, or not ours to read
    return out


def main() -> int:
    mark = os.environ.get(MARK)
    if not mark:
        print(f"testbed.leftovers: {MARK} is not set", file=sys.stderr)
        return 2
    procs = left(mark)
    for proc in procs:
        try:
            print(f"left running by the tests: pid {proc.pid} (parent {proc.ppid()}): "
                  f"{' '.join(proc.cmdline())[:200]}")
        except psutil.Error:
            continue
    for proc in procs:
        try:
            proc.kill()
        except psutil.Error:
            continue
    psutil.wait_procs(procs, timeout=10)
    return 1 if procs else 0


if __name__ == "__main__":
    sys.exit(main())
