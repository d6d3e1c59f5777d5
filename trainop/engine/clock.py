"""Kubernetes timestamps (RFC 3339, whole seconds, UTC) to and from datetimes."""

from __future__ import annotations

import datetime as dt


def fmt(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse(s: str) -> dt.datetime:
    return dt.datetime.fromisoformat(s.replace("Z", "+00:00")).astimezone(dt.UTC)


def parsed(s: object) -> dt.datetime | None:
    """`s` as `parse` reads it, or None where it is not such a time (an annotation anyone
    may write)."""
    if not isinstance(s, str) or not s.isascii():
        return None
    try:
        return parse(s)
    except ValueError:
        return None
