"""Kubernetes timestamps (RFC 3339, whole seconds, UTC) to and from datetimes."""

from __future__ import annotations

import datetime as dt


def fmt(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse(s: str) -> dt.datetime:
    return dt.datetime.fromisoformat(s.replace("Z", "+00:00")).astimezone(dt.UTC)


def now() -> dt.datetime:
    """The current time (UTC). For the runtimes, which hand it to the engine: the engine
    itself never reads the clock (a unit test checks)."""
    return dt.datetime.now(dt.UTC)
