"""Reading manifests from files or streams, with errors a user can act on."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import yaml

from trainop.api.nesting import MAX_DEPTH


class ManifestError(ValueError):
    """A manifest that cannot be read: missing file, not YAML, no document."""


def read_documents(source: str) -> list[dict[str, Any]]:
    """The YAML documents of `source` (a path, or '-' for stdin), empty ones skipped."""
    if source == "-":
        text, where = sys.stdin.read(), "stdin"
    else:
        path = Path(source)
        if not path.exists():
            raise ManifestError(f"{source}: no such file")
        if path.is_dir():
            raise ManifestError(f"{source}: is a folder, not a manifest file")
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as err:
            raise ManifestError(f"{source}: cannot be read ({err})") from None
        where = source
    return parse_documents(text, where)


MAX_VALUES = 1_000_000
"""Values a manifest may hold once its YAML aliases are expanded (an alias bomb stops here)."""
MAX_NUMBER_DIGITS = 100


class _KubernetesLoader(yaml.SafeLoader):
    """YAML as the API server reads it: only what JSON can hold. A timestamp stays the text
    it was written as; binary, set and ordered-map tags are refused."""


def _as_text(loader: yaml.SafeLoader, node: yaml.Node) -> str:
    assert isinstance(node, yaml.ScalarNode)  # the only nodes these tags resolve to
    return str(loader.construct_scalar(node))


def _refuse(loader: yaml.SafeLoader, node: yaml.Node) -> None:
    raise ManifestError(f"line {node.start_mark.line + 1}: the YAML tag {node.tag} has no "
                        "JSON form (Kubernetes manifests hold strings, numbers, booleans, "
                        "lists and mappings)")


def _int(loader: yaml.SafeLoader, node: yaml.Node) -> int:
    assert isinstance(node, yaml.ScalarNode)  # the int tag resolves to scalars only
    digits = len(str(node.value))
    if digits > MAX_NUMBER_DIGITS:
        raise ManifestError(f"line {node.start_mark.line + 1}: a number of {digits} digits "
                            f"(at most {MAX_NUMBER_DIGITS})")
    return int(yaml.SafeLoader.construct_yaml_int(loader, node))


_KubernetesLoader.add_constructor("tag:yaml.org,2002:timestamp", _as_text)
_KubernetesLoader.add_constructor("tag:yaml.org,2002:int", _int)
for _tag in ("binary", "set", "omap", "pairs"):
    _KubernetesLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _refuse)


class _Budget:
    """Counts the values copied out of a document, so that aliases cannot multiply it."""

    def __init__(self) -> None:
        self.left = MAX_VALUES

    def copy(self, value: Any, depth: int = 1) -> Any:
        """A plain JSON value: every alias gets its own copy (defaulting one replica type
        must never change another), keys become strings as JSON makes them."""
        self.left -= 1
        if self.left < 0:
            raise ManifestError(f"expands to more than {MAX_VALUES:,} values (YAML aliases "
                                "repeated inside each other?)")
        if depth > MAX_DEPTH and isinstance(value, dict | list):
            raise ManifestError(f"is nested more than {MAX_DEPTH} levels deep")
        if isinstance(value, dict):
            return {_json_key(k): self.copy(v, depth + 1) for k, v in value.items()}
        if isinstance(value, list):
            return [self.copy(v, depth + 1) for v in value]
        if isinstance(value, float) and not math.isfinite(value):
            raise ManifestError(f"holds the number {value}, which JSON cannot")
        return value


def _json_key(key: Any) -> str:
    if isinstance(key, bool) or key is None:
        return json.dumps(key)
    return str(key)


def parse_documents(text: str, where: str = "manifest") -> list[dict[str, Any]]:
    """The documents of a YAML (or JSON) text as JSON values; ManifestError with one
    readable line for anything the API server would not take."""
    try:
        budget = _Budget()
        docs = [budget.copy(d) for d in yaml.load_all(text, Loader=_KubernetesLoader)
                if d is not None]
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ManifestError(f"{where}:{line}: not valid YAML ({problem})") from None
    except ManifestError as err:
        raise ManifestError(f"{where}: {err}") from None
    except RecursionError:
        raise ManifestError(f"{where}: is nested more than {MAX_DEPTH} levels deep") from None
    if not docs:
        raise ManifestError(f"{where}: holds no document")
    for i, doc in enumerate(docs):
        if not isinstance(doc, dict):
            raise ManifestError(
                f"{where}: document {i + 1} is not a Kubernetes object (a mapping with kind)"
            )
    return docs
