"""The local runtime: every replica of a job as a process on this machine."""

from trainop.local.runner import LocalRun, RunOptions, RunResult

__all__ = ["LocalRun", "RunOptions", "RunResult"]
