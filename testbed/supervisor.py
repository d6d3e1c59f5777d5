"""The rank supervisor (supervisor/, Go), built from the checkout's own source for what
runs it, and cached by a digest of that source: a change to it is built again, and an
unchanged one never is."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[1] / "supervisor"
BINARY = "trainop-supervisor"


class NoGo(RuntimeError):
    """Go is not installed here: the supervisor cannot be built."""


def digest() -> str:
    h = hashlib.sha256()
    for path in sorted(SOURCE.iterdir()):
        if path.suffix == ".go" or path.name in ("go.mod", "go.sum"):
            h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def built() -> Path:
    """The static supervisor binary of this checkout's source."""
    cache = Path(os.environ.get("TRAINOP_CACHE", Path.home() / ".cache/trainop"))
    out = cache / "supervisor" / digest() / BINARY
    if out.exists():
        return out
    go = shutil.which("go")
    if go is None:
        raise NoGo("go is not installed: it builds the rank supervisor")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        # built aside, then moved: an interrupted build leaves nothing under the name
        subprocess.run([go, "build", "-trimpath", "-ldflags", "-s -w", "-o",
                        str(Path(tmp) / BINARY), "."], cwd=SOURCE, check=True,
                       env={**os.environ, "CGO_ENABLED": "0", "GOTOOLCHAIN": "local",
                            "GOFLAGS": "-buildvcs=false"})
        os.replace(Path(tmp) / BINARY, out)
    return out
