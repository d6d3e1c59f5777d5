"""The rank supervisor (supervisor/, Go), built from the checkout's own source for what
runs it, and cached by a digest of that source: a change to it is built again, and an
unchanged one never is."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
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


def descendants(pid: int) -> list[int]:
    """Every process below `pid`, from the kernel's lists of children."""
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for child in map(int, children):
            found += [child, *descendants(child)]
    return found


def alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie does not)."""
    try:
        os.kill(pid, 0)
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (ProcessLookupError, FileNotFoundError):
        return False


def stop_all(proc: subprocess.Popen[str]) -> None:
    """End a supervisor a test started and every process below it (a rank it holds, a
    daemon a rank left): killed, the supervisor could not end them itself."""
    below = descendants(proc.pid)
    for pid in [proc.pid, *below]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 30
    while any(alive(pid) for pid in below):
        assert time.monotonic() < deadline, f"processes {below} did not end within 30s"
        time.sleep(0.02)
