"""Reading a pod template or a pod (the same `spec.containers` shape) without repeating
the walk through optional fields everywhere."""

from __future__ import annotations

from typing import Any


def containers(obj: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The containers of a pod or pod template (none where the fields are missing; entries
    that are not mappings are left out)."""
    spec = (obj or {}).get("spec")
    found = spec.get("containers") if isinstance(spec, dict) else None
    return [c for c in found if isinstance(c, dict)] if isinstance(found, list) else []


def container(obj: dict[str, Any] | None, name: str) -> dict[str, Any] | None:
    """The container called `name`, or None."""
    return next((c for c in containers(obj) if c.get("name") == name), None)


def main_container(obj: dict[str, Any] | None, name: str) -> dict[str, Any] | None:
    """The container called `name`, else the first one (None when there is none)."""
    found = containers(obj)
    return container(obj, name) or (found[0] if found else None)


def restarting_all(obj: dict[str, Any] | None) -> str | None:
    """The name of a container (or init container) of a pod template whose own
    `restartPolicyRules` restart every container of the pod (`RestartAllContainers`), or
    None."""
    spec = (obj or {}).get("spec")
    if not isinstance(spec, dict):
        return None
    for key in ("initContainers", "containers"):
        found = spec.get(key)
        for c in found if isinstance(found, list) else []:
            rules = c.get("restartPolicyRules") if isinstance(c, dict) else None
            if isinstance(rules, list) and any(
                    isinstance(r, dict) and r.get("action") == "RestartAllContainers"
                    for r in rules):
                return str(c.get("name"))
    return None
