"""The wall clock, which the runtimes read and hand to the engine as `now`: the engine
itself never reads it (tests/unit/test_engine_outcomes.py checks)."""

from __future__ import annotations

import datetime as dt


def now() -> dt.datetime:
    """The current time, in UTC."""
    return dt.datetime.now(dt.UTC)
