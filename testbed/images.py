"""Container images made without a container engine or a registry, for the test cluster.

An image is written as a docker-archive tarball (manifest.json, a config and one tar per
layer), which `ctr images import` loads into containerd. The images the tests use:

- `pause`: a static C program that sleeps until it is told to stop (the pod sandbox);
- `python`: only the merged-usr links and a minimal /etc; pods mount the host's /usr, the
  Python installation and the virtualenv read-only (`python_volumes`), so they run the same
  interpreter and frameworks as the tests;
- `tools`: busybox, kubectl and a script that copies kubectl where the MPI launcher expects
  it, then waits for the job's workers, as upstream's kubectl-delivery image does. It is
  imported under the names the manager's defaults use for its init containers (alpine:3.10
  for PyTorch's wait for the master, kubeflow/kubectl-delivery:latest for MPI), so the
  manager runs with its defaults, and as the image of the containers with which pods restart
  in place (alpine:3.22).
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from trainop.engine.config import EngineConfig

REGISTRY = "trainop.test"
PAUSE = f"{REGISTRY}/pause:1"
PYTHON = f"{REGISTRY}/python:1"
TOOLS = (EngineConfig.pytorch_init_image, EngineConfig.mpi_kubectl_delivery_image,
         EngineConfig.restart_agent_image)

PAUSE_C = r"""
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
static void stop(int sig) { (void)sig; _exit(0); }
static void reap(int sig) { (void)sig; while (waitpid(-1, 0, WNOHANG) > 0) {} }
int main(void) {
  signal(SIGINT, stop); signal(SIGTERM, stop); signal(SIGCHLD, reap);
  for (;;) pause();
}
"""

# alpine:3.10's nslookup (busybox's small one) resolves through the C library, search path
# included, and exits 0 when the name resolves; Debian's busybox has the other nslookup,
# which fails a short name when any search domain does not hold it. This one behaves as
# alpine's, so that upstream's `until nslookup <master>` init loop works as it does there.
# (The image's shell is dash: busybox's own sh would run its applet in its place.)
NSLOOKUP_C = r"""
#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
  struct addrinfo hints, *res, *p;
  char ip[INET6_ADDRSTRLEN];
  int n = 0;
  if (argc < 2) { fprintf(stderr, "usage: nslookup NAME\n"); return 2; }
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(argv[1], NULL, &hints, &res) != 0) {
    fprintf(stderr, "nslookup: can't resolve '%s'\n", argv[1]);
    return 1;
  }
  printf("Name:      %s\n", argv[1]);
  for (p = res; p; p = p->ai_next) {
    inet_ntop(AF_INET, &((struct sockaddr_in *)p->ai_addr)->sin_addr, ip, sizeof ip);
    printf("Address %d: %s\n", ++n, ip);
  }
  freeaddrinfo(res);
  return 0;
}
"""

# Upstream's kubectl-delivery copies kubectl into TARGET_DIR, then waits until every worker
# named in the hostfile runs, so that mpirun's first `kubectl exec` finds them.
DELIVER_SH = r"""#!/bin/sh
set -e
cp /kubectl "$TARGET_DIR/kubectl"
chmod 0755 "$TARGET_DIR/kubectl"
for pod in $(cut -d' ' -f1 /etc/mpi/hostfile); do
  until [ "$(/kubectl get pod "$pod" -o 'jsonpath={.status.phase}' 2>/dev/null)" = Running ]; do
    sleep 0.5
  done
done
"""

PASSWD = ("root:x:0:0:root:/root:/bin/sh\nsshd:x:100:65534::/run/sshd:/usr/sbin/nologin\n"
          "nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")
GROUP = "root:x:0:\nnogroup:x:65534:\n"
NSSWITCH = "passwd: files\ngroup: files\nhosts: files dns\n"
# For MPI's SSH design, whose workers run the host's /usr/sbin/sshd. The key Secret is
# mounted with the kubelet's folder modes, which StrictModes would refuse.
SSHD_CONFIG = """HostKey /etc/ssh/ssh_host_ed25519_key
PermitRootLogin prohibit-password
StrictModes no
UsePAM no
PrintMotd no
"""
# As mpi-operator's base image: the workers' host keys are not known in advance.
SSH_CONFIG = """Host *
    StrictHostKeyChecking no
    UserKnownHostsFile /dev/null
    LogLevel ERROR
"""


@dataclass
class Layer:
    """The files of one image layer, built in memory."""

    entries: list[tuple[tarfile.TarInfo, bytes | None]] = field(default_factory=list)

    def dir(self, path: str, mode: int = 0o755) -> None:
        info = tarfile.TarInfo(path.strip("/"))
        info.type, info.mode = tarfile.DIRTYPE, mode
        self.entries.append((info, None))

    def file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        info = tarfile.TarInfo(path.strip("/"))
        info.size, info.mode = len(data), mode
        self.entries.append((info, data))

    def link(self, path: str, target: str) -> None:
        info = tarfile.TarInfo(path.strip("/"))
        info.type, info.linkname = tarfile.SYMTYPE, target
        self.entries.append((info, None))

    def tar(self) -> bytes:
        out = io.BytesIO()
        with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for info, data in self.entries:
                tar.addfile(info, io.BytesIO(data) if data is not None else None)
        return out.getvalue()


def write_archive(path: Path, refs: Iterable[str], layers: Iterable[bytes], *,
                  env: list[str] | None = None, entrypoint: list[str] | None = None,
                  cmd: list[str] | None = None, user: str = "",
                  workdir: str = "/") -> Path:
    """Write one image, named `refs`, of the given layer tars as a docker-archive tarball."""
    blobs = list(layers)
    names = [f"{hashlib.sha256(b).hexdigest()}/layer.tar" for b in blobs]
    config = {
        "architecture": "amd64", "os": "linux",
        "config": {"Env": env or ["PATH=/usr/local/bin:/usr/bin:/bin"],
                   "Entrypoint": entrypoint, "Cmd": cmd, "User": user,
                   "WorkingDir": workdir},
        "rootfs": {"type": "layers",
                   "diff_ids": [f"sha256:{hashlib.sha256(b).hexdigest()}" for b in blobs]},
        "history": [{"created_by": "testbed.images"} for _ in blobs],
    }
    config_bytes = json.dumps(config, sort_keys=True).encode()
    config_name = f"{hashlib.sha256(config_bytes).hexdigest()}.json"
    manifest = [{"Config": config_name, "RepoTags": list(refs), "Layers": names}]
    with tarfile.open(path, "w") as tar:
        for name, data in [(config_name, config_bytes),
                           ("manifest.json", json.dumps(manifest).encode()),
                           *zip(names, blobs, strict=True)]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def merged_usr_layer() -> Layer:
    """The root of a Debian system whose /usr comes from elsewhere (a hostPath volume)."""
    layer = Layer()
    for name in ("bin", "lib", "lib64", "sbin"):
        layer.link(name, f"usr/{name}")
    for d in ("etc", "usr", "proc", "sys", "dev", "run", "var", "root"):
        layer.dir(d)
    layer.dir("tmp", 0o1777)
    layer.dir("var/tmp", 0o1777)
    layer.file("etc/passwd", PASSWD.encode())
    layer.file("etc/group", GROUP.encode())
    layer.file("etc/nsswitch.conf", NSSWITCH.encode())
    layer.dir("etc/ssh")
    # ssh sessions (MPI's ranks) get the image's PATH too, as a user's image with Python in
    # /usr/bin would give them
    sshd_config = SSHD_CONFIG + f"SetEnv {python_env()[0]}\n"
    layer.file("etc/ssh/sshd_config", sshd_config.encode())
    layer.file("etc/ssh/ssh_config", SSH_CONFIG.encode())
    with tempfile.TemporaryDirectory() as tmp:
        key = Path(tmp) / "key"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)],
                       check=True)
        layer.file("etc/ssh/ssh_host_ed25519_key", key.read_bytes(), 0o600)
        layer.file("etc/ssh/ssh_host_ed25519_key.pub", key.with_suffix(".pub").read_bytes())
    layer.dir("run/sshd", 0o755)
    return layer


def python_prefixes() -> list[str]:
    """The folders the running interpreter and its virtualenv live in, outside /usr."""
    prefixes = {str(Path(p).resolve()) for p in (sys.prefix, sys.base_prefix)}
    return sorted(p for p in prefixes if not p.startswith("/usr"))


def python_env() -> list[str]:
    """The python image's environment: the virtualenv's bin first, as when activated."""
    return [f"PATH={Path(sys.prefix).resolve()}/bin:/usr/local/bin:/usr/bin:/bin",
            "PYTHONUNBUFFERED=1"]


def python_volumes() -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """Volumes and mounts that give a pod of the python image the host's interpreter (and
    the programs of /usr, /etc/alternatives naming which of them is mpirun)."""
    paths = ["/usr", "/etc/alternatives", *python_prefixes()]
    volumes: list[dict[str, object]] = []
    mounts: list[dict[str, object]] = []
    for n, path in enumerate(paths):
        name = f"host-python-{n}"
        volumes.append({"name": name, "hostPath": {"path": path, "type": "Directory"}})
        mounts.append({"name": name, "mountPath": path, "readOnly": True})
    return volumes, mounts


def compile_static(workdir: Path, name: str, source: str) -> bytes:
    """A C program built with `gcc -static`, to run in an image without a C library."""
    src = workdir / f"{name}.c"
    src.write_text(source)
    subprocess.run(["gcc", "-static", "-O2", "-o", str(workdir / name), str(src)],
                   check=True, capture_output=True)
    return (workdir / name).read_bytes()


def shared_libraries(binary: Path) -> list[Path]:
    """The shared libraries `binary` loads (as ldd lists them), at their paths."""
    out = subprocess.run(["ldd", str(binary)], check=True, capture_output=True, text=True)
    libs = []
    for line in out.stdout.splitlines():
        path = line.split("=>")[-1].split("(")[0].strip()
        if path.startswith("/"):
            libs.append(Path(path))
    return libs


def tools_layer(workdir: Path) -> bytes:
    """The tools image's one layer (see the module's docstring)."""
    busybox = shutil.which("busybox")
    kubectl = shutil.which("kubectl")
    if not busybox or not kubectl:
        raise RuntimeError("the tools image needs busybox (static) and kubectl")
    layer = Layer()
    for d in ("bin", "etc", "tmp", "opt"):
        layer.dir(d)
    layer.file("bin/busybox", Path(busybox).read_bytes(), 0o755)
    for applet in ("cp", "chmod", "cut", "sleep", "cat", "seq", "mv"):
        layer.link(f"bin/{applet}", "busybox")
    dash = Path("/usr/bin/dash")
    layer.file("bin/sh", dash.read_bytes(), 0o755)
    for lib in shared_libraries(dash):
        layer.file(str(lib), lib.read_bytes(), 0o755)
    layer.file("bin/nslookup", compile_static(workdir, "nslookup", NSLOOKUP_C), 0o755)
    layer.file("etc/nsswitch.conf", NSSWITCH.encode())
    layer.file("kubectl", Path(kubectl).resolve().read_bytes(), 0o755)
    layer.file("deliver.sh", DELIVER_SH.encode(), 0o755)
    layer.file("etc/passwd", PASSWD.encode())
    return layer.tar()


def all_images(outdir: Path) -> dict[str, Path]:
    """Write every image the real-node tests use; returns ref -> archive."""
    outdir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        pause = Layer()
        pause.file("pause", compile_static(Path(tmp), "pause", PAUSE_C), 0o755)
        tools = tools_layer(Path(tmp))
    return {
        PAUSE: write_archive(outdir / "pause.tar", [PAUSE], [pause.tar()],
                             entrypoint=["/pause"]),
        PYTHON: write_archive(outdir / "python.tar", [PYTHON], [merged_usr_layer().tar()],
                              env=python_env(), cmd=["python3"]),
        TOOLS[0]: write_archive(outdir / "tools.tar", TOOLS, [tools],
                                env=["PATH=/bin"], entrypoint=["/bin/sh", "/deliver.sh"]),
    }
