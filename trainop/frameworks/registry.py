"""The declared frameworks: a kind is declared by its plugin, in one call."""

from __future__ import annotations

from typing import Any, TypeVar

from trainop.api import declare_kind, withdraw_kind
from trainop.engine import Framework

FRAMEWORKS: dict[str, Framework[Any]] = {}
"""Kind -> its plugin (filled by declare only)."""

F = TypeVar("F", bound=Framework[Any])


def declare(plugin: F) -> F:
    """Declare a job kind: its facts and model (`plugin.model`, whose `info` are the facts)
    and its plugin, by one call. Each module of this package declares its own kind as it is
    imported; a kind declared outside it (a test's) calls this, and `withdraw` after."""
    declare_kind(plugin.model)
    FRAMEWORKS[plugin.info.kind] = plugin
    return plugin


def withdraw(kind: str) -> None:
    """Forget a declared kind, its model and its plugin."""
    FRAMEWORKS.pop(kind, None)
    withdraw_kind(kind)


def framework_for(kind: str) -> Framework[Any]:
    return FRAMEWORKS[kind]
