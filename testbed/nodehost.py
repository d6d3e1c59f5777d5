"""One node of the real test cluster: its containerd and kubelet. The first node is the
host's own; a second one lives on the same host beside it, with its own containerd (a
kubelet ends the sandboxes its runtime has that it did not make), state folders, pod subnet
and bridge, pod log folder and cgroup root, so that it can be shut down and started again
while the first one runs on.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from testbed import images
from testbed.apiserver import TestAPIServer
from testbed.processes import Daemons
from trainop.cluster.serving.certs import CertPair, issue
from trainop.local.ports import free_port

CGROUP_FS = Path("/sys/fs/cgroup")


@dataclass
class NodeHost:
    """A node's containerd and kubelet, their files in `workdir`, their logs in `daemons`."""

    name: str
    workdir: Path
    daemons: Daemons
    pod_cidr: str
    bridge: str
    cgroup_root: str = ""
    """The cgroup its pods go under (kubelet's cgroupRoot); "" for the host's root."""
    images_imported: bool = field(default=False, init=False)

    @property
    def socket(self) -> Path:
        return self.workdir / "containerd.sock"

    @property
    def pods_cgroup(self) -> str:
        """The folder, in each cgroup hierarchy, that holds this node's pods."""
        return f"{self.cgroup_root}/kubepods".lstrip("/")

    def ctr(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["ctr", "--address", str(self.socket), "-n", "k8s.io", *args],
                              check=check, capture_output=True, text=True, timeout=120)

    # -- start ---------------------------------------------------------------------------

    def start_containerd(self, assets: Path, check: Callable[[str], None]) -> None:
        """containerd with the node's CNI bridge; `check` raises when waited for too long."""
        w = self.workdir
        (w / "cni/net.d").mkdir(parents=True, exist_ok=True)
        (w / "cni/net.d/10-trainop.conflist").write_text(json.dumps({
            "cniVersion": "0.4.0", "name": f"trainop-{self.bridge}",
            "plugins": [
                {"type": "bridge", "bridge": self.bridge, "isGateway": True, "ipMasq": True,
                 "hairpinMode": True,
                 "ipam": {"type": "host-local", "ranges": [[{"subnet": self.pod_cidr}]],
                          "routes": [{"dst": "0.0.0.0/0"}],
                          "dataDir": str(w / "cni/ipam")}},
                {"type": "portmap", "capabilities": {"portMappings": True}},
            ]}))
        (w / "containerd.toml").write_text(f"""version = 3
root = "{w}/containerd/root"
state = "{w}/containerd/state"
[grpc]
  address = "{self.socket}"
[plugins."io.containerd.internal.v1.opt"]
  path = "{w}/containerd/opt"
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
[plugins."io.containerd.cri.v1.images".pinned_images]
  sandbox = "{images.PAUSE}"
[plugins."io.containerd.cri.v1.runtime"]
  # this machine withholds CAP_SYS_RESOURCE: no process may lower its oom_score_adj
  restrict_oom_score_adj = true
[plugins."io.containerd.cri.v1.runtime".containerd]
  default_runtime_name = "runc"
[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[plugins."io.containerd.cri.v1.runtime".cni]
  bin_dirs = ["/usr/lib/cni"]
  conf_dir = "{w}/cni/net.d"
""")
        self.socket.unlink(missing_ok=True)  # one left by a node shut down
        # containerd finds its shim (and ctr is run) from the assets folder, first on PATH
        self.daemons.spawn("containerd", [str(assets / "containerd"),
                                          "--config", str(w / "containerd.toml")])
        while not self.socket.exists():
            check("containerd's socket")
            time.sleep(0.1)

    def import_images(self, archives: list[Path]) -> None:
        """Load image archives (once: containerd keeps them across its restarts)."""
        # the kubelet never removes them (its image GC is off): nothing could pull them again
        if not self.images_imported:
            for archive in archives:
                self.ctr("images", "import", str(archive))
            self.images_imported = True

    def start_kubelet(self, assets: Path, api: TestAPIServer, ca: CertPair, node_ip: str,
                      kubeconfig: Path, dns_ip: str, domain: str,
                      feature_gates: dict[str, bool] | None = None) -> None:
        w = self.workdir
        if self.cgroup_root:
            make_cgroup(self.cgroup_root)
        serving = issue(ca, self.name, dns_names=[self.name], ips=[node_ip])
        (w / "kubelet.crt").write_bytes(serving.cert_pem)
        (w / "kubelet.key").write_bytes(serving.key_pem)
        (w / "resolv.conf").write_text("nameserver 127.0.0.1\n")
        config: dict[str, object] = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": False},
                               "x509": {"clientCAFile": str(api.ca_file)}},
            "authorization": {"mode": "AlwaysAllow"},
            "tlsCertFile": str(w / "kubelet.crt"), "tlsPrivateKeyFile": str(w / "kubelet.key"),
            "port": free_port(), "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1", "healthzPort": free_port(),
            "cgroupDriver": "cgroupfs", "failSwapOn": False,
            "clusterDNS": [dns_ip], "clusterDomain": domain,
            "resolvConf": str(w / "resolv.conf"),
            # 10 pods took 6 s to run and 27 s to delete at the defaults (5/10)
            "kubeAPIQPS": 50, "kubeAPIBurst": 100,
            # images cannot be pulled again: never collect them, never evict for disk
            "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
            "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%",
                             "imagefs.available": "1%", "nodefs.inodesFree": "1%"},
            "serializeImagePulls": False,
            "nodeStatusUpdateFrequency": "4s",
            "containerRuntimeEndpoint": f"unix://{self.socket}",
            # this machine mounts cgroup v1, which kubelets from 1.35 refuse by default
            "failCgroupV1": False,
        }
        if self.cgroup_root:
            # the first node's kubelet removes pod log folders of pods it does not know
            config |= {"cgroupRoot": f"/{self.cgroup_root}", "podLogsDir": str(w / "pod-logs")}
        if feature_gates:
            config["featureGates"] = feature_gates
        (w / "kubelet.yaml").write_text(yaml.safe_dump(config))
        self.daemons.spawn("kubelet", [
            str(assets / "kubelet"), "--config", str(w / "kubelet.yaml"),
            "--kubeconfig", str(kubeconfig),
            "--root-dir", str(w / "kubelet"), "--cert-dir", str(w / "kubelet-pki"),
            "--hostname-override", self.name, "--node-ip", node_ip,
        ])

    # -- stop ----------------------------------------------------------------------------

    def pod_pids(self) -> set[int]:
        """The processes of this node's pods (its kubepods cgroups)."""
        return cgroup_pids(self.pods_cgroup)

    def shut_down(self) -> None:
        """Stop the node as a machine that is switched off: its kubelet, its pods'
        processes, containerd and its shims killed at once, their state left on disk."""
        self.daemons.kill("kubelet")
        for _ in range(3):
            for pid in self.pod_pids() | processes_using(str(self.socket)):
                kill(pid)
            self.daemons.kill("containerd")
            time.sleep(0.2)


def make_cgroup(name: str) -> None:
    """Make a cgroup in every hierarchy (the kubelet checks that its cgroupRoot exists), its
    cpuset that of the root (a new cpuset cgroup has none, and no process could join it)."""
    for hierarchy in CGROUP_FS.iterdir():
        if not (hierarchy / "cgroup.procs").exists():
            continue
        path = hierarchy / name
        path.mkdir(exist_ok=True)
        for knob in ("cpuset.cpus", "cpuset.mems"):
            if (hierarchy / knob).exists() and not (path / knob).read_text().strip():
                (path / knob).write_text((hierarchy / knob).read_text())


def remove_cgroups(root: Path) -> None:
    """rmdir a cgroup tree, deepest first (a cgroup is removed with rmdir, not its files)."""
    if not root.is_dir():
        return
    for path in sorted((p for p in root.rglob("*") if p.is_dir()),
                       key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):
            path.rmdir()
    with contextlib.suppress(OSError):
        root.rmdir()


def cgroup_pids(folder: str) -> set[int]:
    """The processes in a cgroup folder and below (the pids, memory and cpu hierarchies)."""
    pids: set[int] = set()
    for controller in ("pids", "memory", "cpu"):
        root = CGROUP_FS / controller / folder
        if root.is_dir():
            for procs in root.rglob("cgroup.procs"):
                with contextlib.suppress(OSError):  # a pod's cgroup removed meanwhile
                    pids |= {int(p) for p in procs.read_text().split()}
    return pids


def processes_using(marker: str) -> set[int]:
    """Pids whose command line mentions `marker` (containerd's shims name its socket)."""
    pids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    pids.add(int(entry.name))
            except OSError:
                continue
    return pids - {os.getpid()}


def kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
