"""How deep a job may be nested, and reading JSON that is nested deeper than that.

One limit for every job wherever it comes from (a manifest, the API server, a webhook
review). A pod template needs about fifteen levels; the API server takes ten thousand,
orjson refuses more than 1,024 and Python's own parsers overflow their recursion near a
thousand. A document too deep for orjson is read again by an event parser that keeps no
recursion, and each container past the limit becomes the string TOO_DEEP: one such job
is then refused by `deepest` (through validation), instead of every response it is part
of (a whole list page, a watch stream) being unreadable.
"""

from __future__ import annotations

from typing import Any

import ijson  # type: ignore[import-untyped]
import orjson

MAX_DEPTH = 100
"""Levels of nesting a job may have (a pod template needs about fifteen)."""
TOO_DEEP = f"(nested more than {MAX_DEPTH} levels deep: left out)"
"""What stands in for a container past MAX_DEPTH in what `loads` returns."""


def loads(raw: bytes | str) -> Any:
    """The JSON value of `raw` (orjson.JSONDecodeError for what is not JSON); a document
    nested past orjson's limit is read with every container deeper than MAX_DEPTH cut."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as err:
        if "depth" not in str(err):
            raise
    try:
        return _read_cut(raw.encode() if isinstance(raw, str) else raw)
    except ijson.JSONError as err:
        raise orjson.JSONDecodeError(str(err).splitlines()[0], "", 0) from None


def _read_cut(raw: bytes) -> Any:
    # the containers being filled, outermost first, each with the key it goes under
    stack: list[tuple[dict[str, Any] | list[Any], str | None]] = []
    key: str | None = None  # the pending key of the innermost map
    skipping = 0  # levels open inside a container that is left out
    result: Any = None

    def add(value: Any) -> None:
        nonlocal result
        if not stack:
            result = value
        elif isinstance(parent := stack[-1][0], dict):
            parent[str(key)] = value
        else:
            parent.append(value)

    for event, value in ijson.basic_parse(raw, use_float=True):
        if skipping:
            skipping += event in ("start_map", "start_array")
            skipping -= event in ("end_map", "end_array")
            if not skipping:
                add(TOO_DEEP)  # `key` was left as it was when the container opened
        elif event in ("start_map", "start_array"):
            if len(stack) >= MAX_DEPTH:
                skipping = 1
                continue
            container: dict[str, Any] | list[Any] = {} if event == "start_map" else []
            add(container)
            stack.append((container, key))
            key = None
        elif event in ("end_map", "end_array"):
            _, key = stack.pop()
        elif event == "map_key":
            key = value
        else:
            add(value)
    return result


def deepest(value: Any) -> tuple[str | int, ...] | None:
    """Where the first container nested deeper than MAX_DEPTH (or cut by `loads`) is, as
    the keys and indexes leading to it; None when there is none. Walked without recursion."""
    if value == TOO_DEEP:
        return ()
    todo: list[tuple[Any, tuple[str | int, ...]]] = [(value, ())]
    while todo:
        item, loc = todo.pop()
        if len(loc) >= MAX_DEPTH:
            return loc
        pairs = item.items() if isinstance(item, dict) else enumerate(item)
        for k, v in pairs:
            if v == TOO_DEEP:
                return (*loc, k)
            if isinstance(v, dict | list):
                todo.append((v, (*loc, k)))
    return None
