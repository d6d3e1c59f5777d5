"""The manager's image, built from the repository's Dockerfile by buildah (no daemon).

The Dockerfile's default base (python:3.11-slim-bookworm) lives on a registry this machine
does not reach, so its stand-in is made here from Debian's packages: bookworm (debootstrap,
minbase) with Debian's python3 in a virtualenv at /usr/local, so that `python` and `pip` come
first on PATH as in the python image. It is cached by its package list (a minute to make).

The Dockerfile's Go stage (golang:1.26, for the rank supervisor) stands on that base with
this machine's Go copied in at /usr/local/go, first on PATH as in the golang image.

Then `buildah build --build-arg BASE=<that image> --build-arg GO=<the Go one>` builds the
Dockerfile as a user would,
its RUN steps in a chroot: pip reaches PyPI as this machine's pip does (this machine's CA
bundle is mounted over the base's for the build's steps only: Debian's pip reads it, and it
stays out of the image). The image is written
as a docker-archive tarball named trainop:0.1.0, as config/default deploys it, for `ctr
images import`. buildah keeps its layers in a folder made for the build and removed after.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from trainop import __version__

REPO = Path(__file__).resolve().parents[1]
IMAGE = f"trainop:{__version__}"
PACKAGES = ("python3", "python3-venv", "ca-certificates")
MIRROR = "http://deb.debian.org/debian"
BASE_PATH = "/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin"
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
"""This machine's CA bundle (PyPI may be reached through a proxy only it trusts), lent to the
build's RUN steps over the base's own file of that path."""


def cache_dir() -> Path:
    return Path(os.environ.get("TRAINOP_CACHE", Path.home() / ".cache/trainop")) / "images"


def available() -> str | None:
    """Why the image cannot be built here, or None."""
    if os.geteuid() != 0:
        return "buildah's chroot builds and debootstrap need root"
    for tool in ("buildah", "debootstrap"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (hack/node-deps.sh installs it)"
    if shutil.which("go") is None:
        return "go is not installed: it builds the rank supervisor"
    return None


def base_rootfs() -> Path:
    """The base's root filesystem as a tar, made once per package list."""
    key = hashlib.sha256("\n".join(PACKAGES).encode()).hexdigest()[:16]
    out = cache_dir() / f"python-base-{key}.tar"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="trainop-rootfs-") as tmp:
        root = Path(tmp) / "rootfs"
        subprocess.run(["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}",
                        "bookworm", str(root), MIRROR], check=True, capture_output=True)
        # python, pip and what pip installs first on PATH, as in the python image
        subprocess.run(["chroot", str(root), "python3", "-m", "venv", "/usr/local"],
                       check=True)
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
            shutil.rmtree(root / junk, ignore_errors=True)
        partial = out.with_suffix(".partial")
        subprocess.run(["tar", "-C", str(root), "--numeric-owner", "-cf", str(partial), "."],
                       check=True)
        partial.replace(out)
    return out


def build(out: Path) -> Path:
    """Build the Dockerfile and write the image, named trainop:<version>, to `out`."""
    with tempfile.TemporaryDirectory(prefix="trainop-buildah-") as tmp:
        buildah = ["buildah", "--root", f"{tmp}/root", "--runroot", f"{tmp}/run",
                   "--storage-driver", "vfs"]

        def run(*args: str) -> str:
            done = subprocess.run([*buildah, *args], capture_output=True, text=True)
            if done.returncode:
                raise RuntimeError(f"buildah {args[0]}: {(done.stdout + done.stderr)[-3000:]}")
            return done.stdout.strip()

        base = "localhost/trainop-python-base:latest"
        container = run("from", "scratch")
        run("add", container, str(base_rootfs()), "/")
        run("config", "--env", f"PATH={BASE_PATH}", "--cmd", "python3", container)
        run("commit", "--quiet", "--rm", container, base)
        go = "localhost/trainop-go:latest"
        goroot = subprocess.run(["go", "env", "GOROOT"], capture_output=True, text=True,
                                check=True).stdout.strip()
        container = run("from", base)
        run("add", container, goroot, "/usr/local/go")
        run("config", "--env", f"PATH=/usr/local/go/bin:{BASE_PATH}", container)
        run("commit", "--quiet", "--rm", container, go)
        mounts = ["--volume", f"{CA_BUNDLE}:{CA_BUNDLE}:ro"] if Path(CA_BUNDLE).exists() \
            else []
        run("build", "--isolation", "chroot", "--pull-never", "--build-arg", f"BASE={base}",
            "--build-arg", f"GO={go}",
            *mounts, "--tag", IMAGE, "--file", str(REPO / "Dockerfile"), str(REPO))
        out.unlink(missing_ok=True)
        run("push", "--quiet", IMAGE, f"docker-archive:{out}:{IMAGE}")
    return out
