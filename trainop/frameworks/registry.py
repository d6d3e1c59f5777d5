"""The declared frameworks: a kind is declared by its plugin, in one call."""

from __future__ import annotations

from typing import Any, TypeVar

from trainop.api import declare_kind, withdraw_kind
from trainop.api.persona import TRAINING_OPERATOR, Persona, persona_of
from trainop.api.types import Defaulted
from trainop.engine import Framework

FRAMEWORKS: dict[str, Framework[Any]] = {}
"""Kind -> its plugin (filled by declare only)."""
PERSONA_FRAMEWORKS: dict[tuple[str, Persona], Framework[Any]] = {}
"""(kind, persona) -> the plugin that runs the kind's jobs written in another operator's
API as that operator runs them (declare_persona); the kind's own plugin elsewhere."""

F = TypeVar("F", bound=Framework[Any])


def declare(plugin: F) -> F:
    """Declare a job kind: its facts and model (`plugin.model`, whose `info` are the facts)
    and its plugin, by one call. Each module of this package declares its own kind as it is
    imported; a kind declared outside it (a test's) calls this, and `withdraw` after."""
    declare_kind(plugin.model)
    FRAMEWORKS[plugin.info.kind] = plugin
    return plugin


def declare_persona(persona: Persona, plugin: F) -> F:
    """Declare how a declared kind's jobs written in `persona`'s API run (MPIJob at
    v2beta1: mpi-operator's)."""
    PERSONA_FRAMEWORKS[(plugin.info.kind, persona)] = plugin
    return plugin


def withdraw(kind: str) -> None:
    """Forget a declared kind, its model and its plugins."""
    FRAMEWORKS.pop(kind, None)
    for key in [k for k in PERSONA_FRAMEWORKS if k[0] == kind]:
        del PERSONA_FRAMEWORKS[key]
    withdraw_kind(kind)


def framework_for(kind: str, persona: Persona = TRAINING_OPERATOR) -> Framework[Any]:
    """The plugin of `kind` (its persona's, where it declared one)."""
    return PERSONA_FRAMEWORKS.get((kind, persona)) or FRAMEWORKS[kind]


def framework_of(job: Defaulted) -> Framework[Any]:
    """The plugin that runs `job`: its kind's, as the operator of its API runs it."""
    return framework_for(job.kind, persona_of(job))
