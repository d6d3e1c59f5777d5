"""A real Kubernetes cluster for tests: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, kubelet and kube-proxy of one release, and containerd 2 (all built by
hack/test-assets.sh from the Go module proxy), Debian's runc, CNI bridge networking and
cluster DNS (dnsmasq and `clusterdns`), with the images of `images` imported. One node, and
a second one on the same host for the tests that shut a node down (`start_second_node`).

It needs root, cgroups and Debian's packages (hack/node-deps.sh); `unavailable()` says why it
cannot run here. `stop()` leaves the host as `start()` found it: the processes it started and
the containers they ran are stopped by pid, and the sysctls, iptables rules, mounts, network
links and folders the cluster changed are put back, also after a failed start.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from testbed import images
from testbed.apiserver import TestAPIServer, find_assets, serves_workload_api
from testbed.clusterdns import DNSWatcher, api_getter
from testbed.nodehost import CGROUP_FS, NodeHost, cgroup_pids, kill, processes_using, remove_cgroups
from testbed.processes import Daemons
from trainop.cluster.serving.certs import CertPair, issue, new_ca
from trainop.engine.lostnode import OUT_OF_SERVICE
from trainop.local.ports import free_port

NODE_NAME = "trainop-node"
POD_CIDR = "10.244.0.0/24"
# a second node, started and shut down by the tests that need one (start_second_node)
SECOND_NODE = "trainop-node-2"
SECOND_POD_CIDR = "10.244.1.0/24"
SECOND_BRIDGE = "cni1"
SECOND_CGROUP = "trainop-node-2"
CLUSTER_CIDR = "10.244.0.0/16"
SERVICE_CIDR = "10.96.0.0/24"
API_SERVICE_IP = "10.96.0.1"
DNS_IP = "10.96.0.10"
DOMAIN = "cluster.local"
BRIDGE = "cni0"
STATE_FILE = Path("/run/trainop-test-node.json")
SCHEDULING_GATES = "GenericWorkload=true,TopologyAwareWorkloadScheduling=true"
"""Kubernetes' own gang (Workload and PodGroup, beta in 1.37, off by default) and its
topology constraint (alpha), on the API server (which serves them at
scheduling.k8s.io/v1beta1, off by default) and the scheduler, on a release that has
them."""
WORKLOAD_API_ARGS = ("--runtime-config=scheduling.k8s.io/v1beta1=true",
                     f"--feature-gates={SCHEDULING_GATES}") if serves_workload_api() else ()
BINARIES = ("kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy",
            "containerd", "containerd-shim-runc-v2", "ctr")
COMMANDS = ("runc", "iptables-save", "iptables-restore", "dnsmasq", "gcc", "busybox", "ip",
            "ssh-keygen", "debootstrap")
CGROUPS = ("cpu", "cpuacct", "cpuset", "memory", "pids")
# Set by kubelet, kube-proxy and the bridge; put back when the cluster stops.
SYSCTLS = ("net.ipv4.ip_forward", "net.bridge.bridge-nf-call-iptables",
           "net.bridge.bridge-nf-call-ip6tables", "net.ipv4.conf.all.route_localnet",
           "vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops",
           "kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes")
# Folders the components make outside the cluster's own; removed if they were not there.
HOST_DIRS = ("/var/log/pods", "/var/log/containers", "/run/netns", "/run/containerd",
             "/var/lib/cni", "/var/lib/kubelet")
COMPONENT_USERS = {
    "kube-controller-manager": ("system:kube-controller-manager", []),
    "kube-scheduler": ("system:kube-scheduler", []),
    "kubelet": (f"system:node:{NODE_NAME}", ["system:nodes"]),
    "kubelet-2": (f"system:node:{SECOND_NODE}", ["system:nodes"]),
    "kube-proxy": ("system:kube-proxy", []),
}


class Unavailable(RuntimeError):
    """The real-node cluster cannot run on this machine; the message says why."""


def unavailable() -> str | None:
    """Why a real node cannot run here, or None where it can."""
    if os.geteuid() != 0:
        return "needs root (kubelet, containerd and CNI change the host's network and mounts)"
    missing_cgroups = [c for c in CGROUPS if not Path("/sys/fs/cgroup", c).is_dir()]
    if missing_cgroups and not Path("/sys/fs/cgroup/cgroup.controllers").exists():
        return f"needs cgroups mounted under /sys/fs/cgroup (missing: {missing_cgroups})"
    if not Path("/proc/sys/net/bridge").is_dir():
        return "needs the kernel's bridge netfilter (/proc/sys/net/bridge)"
    missing = [c for c in COMMANDS if shutil.which(c) is None]
    if missing or not Path("/usr/lib/cni/bridge").exists():
        return f"needs Debian's packages from hack/node-deps.sh (missing: {missing or 'cni'})"
    return None


def node_ip() -> str:
    """The host's address on its default route (loopback if it has none)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.254", 9))  # no packet is sent for a UDP connect
            return str(s.getsockname()[0])
        except OSError:
            return "127.0.0.1"


def run(*args: str, check: bool = True, input: str | None = None
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, check=check, capture_output=True, text=True, input=input,
                          timeout=120)


def dns_answers(server: str, name: str) -> bool:
    """Whether the DNS server at `server` answers a query for `name` (A, any answer)."""
    query = struct.pack(">HHHHHH", 0x7472, 0x0100, 1, 0, 0, 0) + b"".join(
        bytes([len(label)]) + label.encode() for label in name.split(".")) + \
        b"\0" + struct.pack(">HH", 1, 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(0.5)
        try:
            s.sendto(query, (server, 53))
            return s.recv(512)[:2] == query[:2]
        except OSError:
            return False


def mountpoints() -> list[str]:
    """Mount points in the order they were mounted."""
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        points.append(line.split()[4].encode().decode("unicode_escape"))
    return points


def links() -> set[str]:
    out = run("ip", "-o", "link", "show").stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines()}


def read_sysctl(name: str) -> str | None:
    path = Path("/proc/sys", *name.split("."))
    return path.read_text().strip() if path.exists() else None


def write_sysctl(name: str, value: str) -> None:
    Path("/proc/sys", *name.split(".")).write_text(value)


@dataclass
class HostState:
    """What the cluster changes on the host, as it was before, to put back."""

    sysctls: dict[str, str] = field(default_factory=dict)
    iptables: dict[str, str] = field(default_factory=dict)
    mounts: set[str] = field(default_factory=set)
    links: set[str] = field(default_factory=set)
    dirs: set[str] = field(default_factory=set)

    def save(self, workdir: Path) -> None:
        """Write down what to put back, for `recover` after a run that never stopped."""
        STATE_FILE.write_text(json.dumps({
            "workdir": str(workdir), "sysctls": self.sysctls, "iptables": self.iptables,
            "mounts": sorted(self.mounts), "links": sorted(self.links),
            "dirs": sorted(self.dirs)}))

    @classmethod
    def load(cls) -> tuple[Path, HostState]:
        saved = json.loads(STATE_FILE.read_text())
        return Path(saved["workdir"]), cls(
            sysctls=saved["sysctls"], iptables=saved["iptables"], mounts=set(saved["mounts"]),
            links=set(saved["links"]), dirs=set(saved["dirs"]))

    @classmethod
    def capture(cls) -> HostState:
        return cls(
            sysctls={n: v for n in SYSCTLS if (v := read_sysctl(n)) is not None},
            iptables={cmd: run(f"{cmd}-save").stdout for cmd in ("iptables", "ip6tables")
                      if shutil.which(f"{cmd}-save")},
            mounts=set(mountpoints()), links=links(),
            dirs={d for d in HOST_DIRS if Path(d).exists()},
        )

    def restore(self, workdir: Path) -> list[str]:
        """Put everything back; returns what could not be (empty when all went well)."""
        problems: list[str] = []
        for point in reversed(mountpoints()):
            ours = point not in self.mounts or Path(point).is_relative_to(workdir)
            if ours and run("umount", "-l", point, check=False).returncode != 0 and (
                    point in mountpoints()):
                problems.append(f"mount {point}")
        for name in links() - self.links:
            if run("ip", "link", "delete", name, check=False).returncode != 0 and (
                    name in links()):
                problems.append(f"link {name}")
        run("ip", "addr", "del", f"{DNS_IP}/32", "dev", "lo", check=False)
        for cmd, saved in self.iptables.items():
            restored = run(f"{cmd}-restore", input=saved, check=False)
            for table in ("filter", "nat", "mangle", "raw"):
                if f"*{table}\n" not in saved:  # tables the cluster made: empty them
                    run(cmd, "-t", table, "-F", check=False)
                    run(cmd, "-t", table, "-X", check=False)
            if restored.returncode != 0:
                problems.append(f"{cmd}: {restored.stderr.strip()}")
        for name, value in self.sysctls.items():
            try:
                write_sysctl(name, value)
            except OSError as err:
                problems.append(f"sysctl {name}: {err}")
        for d in HOST_DIRS:
            if d not in self.dirs:
                shutil.rmtree(d, ignore_errors=True)
        for controller in CGROUP_FS.iterdir():
            for folder in POD_CGROUPS:
                remove_cgroups(controller / folder)
        return problems


# the cgroups of the nodes' pods: the first node's under the root, the second's under its own
POD_CGROUPS = ("kubepods", SECOND_CGROUP)


def pod_pids() -> set[int]:
    """The processes of every pod of both nodes."""
    return set().union(*(cgroup_pids(folder) for folder in POD_CGROUPS))


def recover() -> list[str]:
    """Tear down what a test cluster whose process was killed left running and changed
    (from the state it wrote at its start); returns what could not be put back."""
    if not STATE_FILE.exists():
        return []
    workdir, host = HostState.load()
    return teardown(workdir, host)


def teardown(workdir: Path, host: HostState, keep_workdir: bool = False) -> list[str]:
    """Kill what is left of the cluster in `workdir` by pid, then put the host back (the
    workdir's logs are kept where asked)."""
    for _ in range(3):
        # every pod's processes (kubepods cgroups); the daemons and containerd's shims,
        # which name the workdir on their command line
        pids = pod_pids() | processes_using(str(workdir))
        if not pids:
            break
        for pid in pids:
            kill(pid)
        time.sleep(0.5)
    problems = host.restore(workdir)
    if not keep_workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    STATE_FILE.unlink(missing_ok=True)
    return problems


@dataclass
class TestCluster:
    """A running cluster of one node (a second one on demand); `kubectl` runs as cluster
    admin."""

    __test__ = False

    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="trainop-node-")))
    api: TestAPIServer | None = None
    daemons: Daemons | None = None
    host: HostState | None = None
    dns: DNSWatcher | None = None
    ca: CertPair | None = None
    node_ip: str = ""
    started_at: float = 0.0
    node: NodeHost | None = None
    second: NodeHost | None = None
    second_nodes: int = 0
    """How many times a second node was started afresh (each in a folder of its own: one
    removed leaves its containerd's state on disk, which teardown undoes at the end)."""
    image_archives: list[Path] = field(default_factory=list)
    kubelet_feature_gates: dict[str, bool] = field(default_factory=dict)
    """The kubelets' feature gates beside their release's defaults (bench.restart's
    --kubelet-feature-gates)."""

    @property
    def kubeconfig(self) -> Path:
        assert self.api is not None
        return self.api.kubeconfig

    def start(self, timeout: float = 180) -> TestCluster:
        reason = unavailable()
        if reason:
            raise Unavailable(reason)
        assets = find_assets()
        if missing := [b for b in BINARIES if not (assets / b).is_file()]:
            raise Unavailable(f"no {', '.join(missing)} in {assets} (hack/test-assets.sh "
                              "builds them with TRAINOP_REAL_NODE unset)")
        if problems := recover():
            raise RuntimeError(f"a previous test cluster left the host changed: {problems}")
        self.host = HostState.capture()
        self.host.save(self.workdir)
        self.daemons = Daemons(self.workdir)
        self.node_ip = node_ip()
        self.started_at = time.time()
        try:
            self._start(assets, timeout)
        except BaseException:
            self.stop(keep_workdir=True)
            raise
        return self

    def _start(self, assets: Path, timeout: float) -> None:
        assert self.daemons
        deadline = time.monotonic() + timeout
        write_sysctl("net.ipv4.ip_forward", "1")
        write_sysctl("net.bridge.bridge-nf-call-iptables", "1")
        self.node = NodeHost(NODE_NAME, self.workdir, self.daemons, POD_CIDR, BRIDGE)
        self.node.start_containerd(assets, lambda what: self._check(deadline, what))
        self.image_archives = list(images.all_images(self.workdir / "images").values())
        self.node.import_images(self.image_archives)
        self.ca = new_ca("trainop-node-ca")
        tokens = {f"{name}-token": user for name, user in COMPONENT_USERS.items()}
        client_crt, client_key = self._client_cert()
        self.api = TestAPIServer(
            workdir=self.workdir / "api", address=self.node_ip, listen_all=True,
            service_cidr=SERVICE_CIDR, authorization_modes="Node,RBAC", disabled_admission="",
            sans=["kubernetes", "kubernetes.default", "kubernetes.default.svc",
                  f"kubernetes.default.svc.{DOMAIN}", API_SERVICE_IP],
            ca=self.ca, users=tokens,
            extra_args=["--kubelet-client-certificate", str(client_crt),
                        "--kubelet-client-key", str(client_key),
                        "--kubelet-preferred-address-types", "InternalIP",
                        *WORKLOAD_API_ARGS])
        (self.workdir / "api").mkdir()
        self.api.start()
        for name in COMPONENT_USERS:
            self.api.kubeconfig_for(f"{name}-token", self.workdir / f"{name}.kubeconfig")
        self._start_components(assets)
        self._start_dns(deadline)
        self._wait_node_ready(NODE_NAME, lambda what: self._check(deadline, what))

    # -- containerd and images ---------------------------------------------------------

    def import_image(self, archive: Path) -> None:
        """Load one more image archive into the first node's containerd."""
        self.ctr("images", "import", str(archive))

    def ctr(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """ctr on the first node's containerd."""
        assert self.node
        return self.node.ctr(*args, check=check)

    # -- the control plane and the node -------------------------------------------------

    def _client_cert(self) -> tuple[Path, Path]:
        """The API server's client certificate for the kubelet (exec, logs)."""
        assert self.ca
        crt, key = self.workdir / "apiserver-kubelet-client.crt", \
            self.workdir / "apiserver-kubelet-client.key"
        pair = issue(self.ca, "kube-apiserver-kubelet-client", organizations=["system:masters"])
        crt.write_bytes(pair.cert_pem)
        key.write_bytes(pair.key_pem)
        return crt, key

    def _start_components(self, assets: Path) -> None:
        assert self.daemons and self.api and self.ca
        w = self.workdir
        api_dir = self.api.workdir
        self.daemons.spawn("kube-controller-manager", [
            str(assets / "kube-controller-manager"),
            "--kubeconfig", str(w / "kube-controller-manager.kubeconfig"),
            # each controller under its own ServiceAccount's RBAC rights, as kubeadm runs it
            "--use-service-account-credentials=true",
            "--service-account-private-key-file", str(api_dir / "sa.key"),
            "--root-ca-file", str(self.api.ca_file),
            "--leader-elect=false", "--secure-port=0",
            "--node-monitor-period=2s", "--concurrent-gc-syncs=5",
            # a node silent this long is Unknown (50 s by default; the kubelets report every
            # 4 s): the second node's tests shut it down
            "--node-monitor-grace-period=20s",
            # the PodGroups' protection (its finalizer removed once no pod names the group)
            *(("--feature-gates=GenericWorkload=true",) if serves_workload_api() else ()),
        ])
        self.daemons.spawn("kube-scheduler", [
            str(assets / "kube-scheduler"),
            "--kubeconfig", str(w / "kube-scheduler.kubeconfig"),
            "--leader-elect=false", "--secure-port=0",
            # its gang and topology plugins
            *((f"--feature-gates={SCHEDULING_GATES}",) if serves_workload_api() else ()),
        ])
        proxy_conf = w / "kube-proxy.yaml"
        proxy_conf.write_text(yaml.safe_dump({
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(w / "kube-proxy.kubeconfig")},
            "mode": "iptables", "clusterCIDR": CLUSTER_CIDR, "hostnameOverride": NODE_NAME,
            "healthzBindAddress": f"127.0.0.1:{free_port()}",
            "metricsBindAddress": f"127.0.0.1:{free_port()}",
            # leave the host's conntrack table alone
            "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s",
                          "tcpCloseWaitTimeout": "0s"},
        }))
        self.daemons.spawn("kube-proxy", [str(assets / "kube-proxy"),
                                          "--config", str(proxy_conf)])
        assert self.node
        self.node.start_kubelet(assets, self.api, self.ca, self.node_ip,
                                w / "kubelet.kubeconfig", DNS_IP, DOMAIN,
                                self.kubelet_feature_gates)

    def _start_dns(self, deadline: float) -> None:
        assert self.daemons and self.api
        run("ip", "addr", "add", f"{DNS_IP}/32", "dev", "lo")
        hosts = self.workdir / "dns-hosts"
        daemons = self.daemons

        def pid() -> int | None:
            proc = next((p for n, p in daemons.procs if n == "dnsmasq"), None)
            return proc.pid if proc and proc.poll() is None else None

        self.dns = DNSWatcher(api_getter(self.api.url, self.api.admin_token, self.api.ca_file),
                              hosts, pid)
        self.dns.sync()  # the first records, read at dnsmasq's start (no SIGHUP yet)
        pidfile = self.workdir / "dnsmasq.pid"
        self.daemons.spawn("dnsmasq", [
            "dnsmasq", "--keep-in-foreground", "--user=root", "--no-resolv", "--no-hosts",
            f"--listen-address={DNS_IP}", "--bind-interfaces", f"--pid-file={pidfile}",
            f"--addn-hosts={hosts}", f"--local=/{DOMAIN}/", "--no-negcache",
            "--log-facility=-",
        ])
        # a SIGHUP before dnsmasq has set its handler would end it: start telling it of
        # changes once it answers
        while not dns_answers(DNS_IP, f"kubernetes.default.svc.{DOMAIN}"):
            self._check(deadline, "cluster DNS")
            time.sleep(0.1)
        self.dns.start()

    def _check(self, deadline: float, waiting_for: str) -> None:
        assert self.daemons
        exited = self.daemons.exited()
        if exited:
            raise RuntimeError(exited)
        if time.monotonic() > deadline:
            raise RuntimeError(f"test cluster: timed out waiting for {waiting_for}")

    def _wait_node_ready(self, name: str, check: Callable[[str], None],
                         since: float = 0.0) -> None:
        """A Ready heartbeat newer than `since` (this start by default: etcd may keep an old
        Node), no taints but the out-of-service one only whoever put it takes away; `check`
        raises where waited for too long or a daemon ended."""
        since = since or self.started_at
        while True:
            check(f"node {name} to be Ready")
            node = self.get("node", name)
            if node:
                ready = next((c for c in node["status"].get("conditions", [])
                              if c["type"] == "Ready"), None)
                fresh = ready and ready["status"] == "True" and dt.datetime.fromisoformat(
                    ready["lastHeartbeatTime"].replace("Z", "+00:00")).timestamp() >= \
                    int(since)
                taints = [t for t in node["spec"].get("taints", [])
                          if t["key"] != OUT_OF_SERVICE]
                if fresh and not taints:
                    break
            time.sleep(0.5)
        while not self.get("serviceaccount", "default", namespace="default"):
            check("the default ServiceAccount")
            time.sleep(0.5)

    # -- a second node -------------------------------------------------------------------

    def start_second_node(self, timeout: float = 120) -> NodeHost:
        """Start the second node (SECOND_NODE) beside the first, or start it again after it
        was shut down (`NodeHost.shut_down`) with what it had on disk; returns once Ready."""
        assert self.api and self.ca
        deadline = time.monotonic() + timeout
        if self.second is None:
            self.second_nodes += 1
            workdir = self.workdir / f"{SECOND_NODE}-{self.second_nodes}"
            workdir.mkdir()
            self.second = NodeHost(SECOND_NODE, workdir, Daemons(workdir), SECOND_POD_CIDR,
                                   SECOND_BRIDGE, cgroup_root=SECOND_CGROUP)
        node, since = self.second, time.time()

        def check(what: str) -> None:
            if exited := node.daemons.exited():
                raise RuntimeError(exited)
            self._check(deadline, what)
        assets = find_assets()
        node.start_containerd(assets, check)
        node.import_images(self.image_archives)
        node.start_kubelet(assets, self.api, self.ca, self.node_ip,
                           self.workdir / "kubelet-2.kubeconfig", DNS_IP, DOMAIN,
                           self.kubelet_feature_gates)
        self._wait_node_ready(SECOND_NODE, check, since)
        return node

    def remove_second_node(self) -> None:
        """Shut the second node down, delete its Node and its pods' cgroups."""
        if self.second is None:
            return
        self.second.shut_down()
        self.second.daemons.stop()
        self.kubectl("delete", "node", SECOND_NODE, "--ignore-not-found", check=False)
        for controller in CGROUP_FS.iterdir():
            remove_cgroups(controller / SECOND_CGROUP)
        self.second = None

    # -- use -----------------------------------------------------------------------------

    def kubectl(self, *args: str, input: str | None = None, check: bool = True,
                timeout: float = 120) -> subprocess.CompletedProcess[str]:
        out = subprocess.run(["kubectl", "--kubeconfig", str(self.kubeconfig), *args],
                             input=input, capture_output=True, text=True, timeout=timeout)
        if check and out.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {out.stderr.strip()}")
        return out

    def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        args = ["get", kind, name, "-o", "json", *(("-n", namespace) if namespace else ())]
        out = self.kubectl(*args, check=False)
        return dict(json.loads(out.stdout)) if out.returncode == 0 else None

    # -- stop ----------------------------------------------------------------------------

    def stop(self, keep_workdir: bool = False) -> list[str]:
        """Stop everything and put the host back; returns what could not be put back."""
        try:
            if self.dns:
                self.dns.stop()
            if self.second:
                self.second.shut_down()
            if self.daemons:
                for name in ("kubelet", "kube-proxy", "kube-scheduler",
                             "kube-controller-manager", "dnsmasq"):
                    self.daemons.kill(name)
            for pid in pod_pids():  # every pod's processes, before containerd goes
                kill(pid)
            if self.api:
                self.api.stop(keep_workdir=True)
            if self.daemons:
                self.daemons.stop()
        finally:  # whatever failed above, what is left is killed by pid and undone
            problems = teardown(self.workdir, self.host, keep_workdir) if self.host else []
        return problems

