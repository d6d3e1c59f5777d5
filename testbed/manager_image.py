"""The manager's image, made as the Dockerfile describes but without a container engine.

Two layers, written as a docker-archive tarball for `ctr images import`:
- base: a Debian bookworm root filesystem (debootstrap, minbase) with python3, a virtualenv at
  /opt/trainop holding the pinned requirements of pyproject.toml, and the user 65532. It takes
  a few minutes and needs Debian's archive and PyPI, so it is cached by the requirements;
- app: the `trainop` package of this checkout and its `trainop` command.
The image runs `trainop manager` as 65532, as the Dockerfile's does, named `trainop:0.1.0`
as config/default deploys it.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from pathlib import Path

from testbed.images import write_archive
from trainop import __version__

REPO = Path(__file__).resolve().parents[1]
IMAGE = f"trainop:{__version__}"
PACKAGES = ("python3", "python3-venv", "ca-certificates")
MIRROR = "http://deb.debian.org/debian"
VENV = "/opt/trainop"
SITE = f"{VENV}/lib/python3.11/site-packages"
ENTRY = f"""#!{VENV}/bin/python3
import sys
from trainop.cli import main
sys.exit(main())
"""


def requirements() -> list[str]:
    """The manager's pinned requirements, as pyproject.toml lists them."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return list(project["dependencies"])


def cache_dir() -> Path:
    return Path(os.environ.get("TRAINOP_CACHE", Path.home() / ".cache/trainop")) / "images"


def base_layer() -> Path:
    """The base layer's tar, built once per set of requirements."""
    key = hashlib.sha256("\n".join([*PACKAGES, *requirements()]).encode()).hexdigest()[:16]
    out = cache_dir() / f"manager-base-{key}.tar"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="trainop-rootfs-") as tmp:
        root = Path(tmp) / "rootfs"
        subprocess.run(["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}",
                        "bookworm", str(root), MIRROR], check=True, capture_output=True)
        subprocess.run(["chroot", str(root), "python3", "-m", "venv", "--without-pip", VENV],
                       check=True)
        subprocess.run(["chroot", str(root), "useradd", "--uid", "65532", "--user-group",
                        "--no-create-home", "--shell", "/usr/sbin/nologin", "trainop"],
                       check=True)
        # The requirements are installed by this host's pip (same CPython ABI and glibc as
        # the image's), so that nothing inside the image needs the network.
        pip = subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--no-compile",
             "--disable-pip-version-check", "--target", str(root / SITE.lstrip("/")),
             *requirements()], capture_output=True, text=True)
        if pip.returncode:
            raise RuntimeError(f"pip install for the manager image: {pip.stderr[-2000:]}")
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
            shutil.rmtree(root / junk, ignore_errors=True)
        partial = out.with_suffix(".partial")
        subprocess.run(["tar", "-C", str(root), "--numeric-owner", "-cf", str(partial), "."],
                       check=True)
        partial.replace(out)
    return out


def shipped() -> list[Path]:
    """The files of this checkout's trainop package the image holds: all but the test
    harness (as the Dockerfile's context leaves it out, .dockerignore)."""
    package = REPO / "trainop"
    return [p for p in sorted(package.rglob("*")) if "__pycache__" not in p.parts
            and p.relative_to(package).parts[0] != "testing"]


def app_layer() -> bytes:
    """This checkout's trainop package, installed into the base's virtualenv."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path in shipped():
            tar.add(path, f"{SITE}/{path.relative_to(REPO)}".lstrip("/"), recursive=False)
        entry = tarfile.TarInfo(f"{VENV}/bin/trainop".lstrip("/"))
        entry.size, entry.mode = len(ENTRY), 0o755
        tar.addfile(entry, io.BytesIO(ENTRY.encode()))
    return buf.getvalue()


def build(out: Path) -> Path:
    """Write the manager image archive to `out`."""
    base = base_layer().read_bytes()
    return write_archive(
        out, [IMAGE], [base, app_layer()],
        env=[f"PATH={VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
             "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1"],
        entrypoint=["trainop", "manager"], user="65532:65532")
