"""Reading manifests from files or streams, with errors a user can act on."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml


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


def parse_documents(text: str, where: str = "manifest") -> list[dict[str, Any]]:
    try:
        # The JSON round trip gives every YAML alias (`template: *pod`) its own copy, so
        # that defaulting one replica type never changes another.
        docs = [json.loads(json.dumps(d)) for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ManifestError(f"{where}:{line}: not valid YAML ({problem})") from None
    if not docs:
        raise ManifestError(f"{where}: holds no document")
    for i, doc in enumerate(docs):
        if not isinstance(doc, dict):
            raise ManifestError(
                f"{where}: document {i + 1} is not a Kubernetes object (a mapping with kind)"
            )
    return docs
