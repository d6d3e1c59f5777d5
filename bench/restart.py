"""A whole job restarted after one rank fails, on the real node (testbed/node.py: kubelet,
containerd, scheduler): the time from the failed rank's exit until every rank of the job
runs its next attempt, for upstream v1.9.4 and for trainop, side by side in one run.

    python -m bench.restart [--sizes 4 16 32] [--repeat 1]

A job is a TFJob of N workers, each a sleeping rank (busybox sh); worker 1 exits 143 when
the benchmark tells it to. Each rank notes the host's uptime as it starts, and the failed
rank as it exits (one clock: every container reads the host's /proc/uptime). Four ways:

- upstream OnFailure: the kubelet restarts the failed container; the other ranks go on in
  the old attempt (a real job would hang in its collective until a timeout);
- upstream ExitCode: the failed pod is deleted and made again; the others go on too;
- trainop recreating (restartScope Job): every pod deleted and made again;
- trainop in place (restartScope Job, restartInPlace): every pod's containers restarted
  where it is, by the kubelet;
- trainop, processes in place: the same job under a manager with --rank-supervisor-image:
  every rank's process stopped and started again by its supervisor, the containers kept
  (the supervisor from an image of it alone, built from this checkout).

For upstream the time is until the failed rank runs again (the only one that does). Pods
have a termination grace of 1 s (the default 30 s would only add to recreation). Needs
root and what the real-node suite needs (hack/node-deps.sh, hack/test-assets.sh).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.lib import REPO, RESULTS, machine, wait
from testbed import images, supervisor, upstream
from testbed.manager import ManagerProcess
from testbed.node import TestCluster

FAILING = 1
"""The worker that fails."""
RANK = """\
s=/state; read up rest </proc/uptime; echo "$up" >>"$s/$POD"
if [ "$POD" = "$FAILING" ]; then
  until mv "$s/fail" "$s/failed" 2>/dev/null; do sleep 0.1; done
  read up rest </proc/uptime; echo "$up" >"$s/exit"; exit 143
fi
exec sleep 100000
"""


@dataclass(frozen=True)
class Way:
    label: str
    side: str  # "upstream" or "trainop"
    restart_policy: str
    run_policy: dict[str, Any]
    whole_job: bool
    """Every rank starts a next attempt (else only the failed one)."""


WAYS = (
    Way("upstream OnFailure", "upstream", "OnFailure", {}, False),
    Way("upstream ExitCode", "upstream", "ExitCode", {}, False),
    Way("trainop recreating", "trainop", "ExitCode",
        {"restartScope": "Job", "restartInPlace": False}, True),
    Way("trainop in place", "trainop", "ExitCode",
        {"restartScope": "Job", "restartInPlace": True}, True),
    Way("trainop, processes in place", "processes", "ExitCode",
        {"restartScope": "Job", "restartInPlace": True}, True),
)
SUPERVISOR_IMAGE = f"{images.REGISTRY}/supervisor:1"


def supervisor_image(workdir: Path) -> Path:
    """An image of the rank supervisor alone, where --rank-supervisor-image looks for it
    (its install needs nothing else: a static binary)."""
    layer = images.Layer()
    for folder in ("usr", "usr/local", "usr/local/bin"):
        layer.dir(folder)
    layer.file("usr/local/bin/trainop-supervisor", supervisor.built().read_bytes(), 0o755)
    return images.write_archive(workdir / "supervisor.tar", [SUPERVISOR_IMAGE], [layer.tar()])


def job_doc(name: str, workers: int, way: Way, state: Path) -> dict[str, Any]:
    pod = {
        "terminationGracePeriodSeconds": 1,
        "containers": [{
            "name": "tensorflow", "image": images.TOOLS[0], "imagePullPolicy": "Never",
            "command": ["sh", "-c", RANK],
            "env": [{"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "FAILING", "value": f"{name}-worker-{FAILING}"}],
            "resources": {"requests": {"cpu": "1m", "memory": "4Mi"}},
            "volumeMounts": [{"name": "state", "mountPath": "/state"}]}],
        "volumes": [{"name": "state", "hostPath": {"path": str(state)}}]}
    return {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": name},
            "spec": {"runPolicy": {"backoffLimit": 10, **way.run_policy},
                     "tfReplicaSpecs": {"Worker": {
                         "replicas": workers, "restartPolicy": way.restart_policy,
                         "template": {"spec": pod}}}}}


def starts(state: Path, pod: str) -> list[float]:
    path = state / pod
    return [float(x) for x in path.read_text().split()] if path.exists() else []


def ready(cluster: TestCluster, ns: str) -> int:
    """The pods of `ns` whose every container is ready."""
    pods = json.loads(cluster.kubectl("get", "pods", "-n", ns, "-o", "json").stdout)["items"]
    return sum(1 for p in pods if p["status"].get("containerStatuses") and all(
        c.get("ready") for c in p["status"]["containerStatuses"]))



def one(cluster: TestCluster, ns: str, workers: int, way: Way, root: Path) -> float:
    """Seconds from the failed rank's exit until every rank that restarts runs again."""
    name = f"r{uuid.uuid4().hex[:6]}"
    state = root / name
    state.mkdir(parents=True)
    state.chmod(0o777)
    pods = [f"{name}-worker-{i}" for i in range(workers)]
    doc = job_doc(name, workers, way, state)
    cluster.kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(doc))
    wait(f"{workers} ranks of {way.label} to start",
         lambda: all(len(starts(state, p)) == 1 for p in pods), 600)
    # the job runs: every pod's every container ready, as the API server shows it
    wait(f"{workers} pods of {way.label} ready", lambda: ready(cluster, ns) == workers, 600)
    (state / "fail").touch()
    exited = float(wait("the failed rank's exit", lambda: (state / "exit").exists() and
                        (state / "exit").read_text().strip(), 60))
    again = pods if way.whole_job else [pods[FAILING]]
    wait(f"{len(again)} ranks of {way.label} to start again",
         lambda: all(len(starts(state, p)) >= 2 for p in again), 600)
    took = max(starts(state, p)[1] for p in again) - exited
    cluster.kubectl("delete", "-n", ns, "tfjob", name, "--wait=false")
    cluster.kubectl("delete", "-n", ns, "pods", "--all", "--grace-period=0", "--force",
                    check=False)
    wait("the pods to go", lambda: not cluster.kubectl(
        "get", "pods", "-n", ns, "-o", "name").stdout.strip(), 300)
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4, 16, 32])
    parser.add_argument("--repeat", type=int, default=1,
                        help="runs of each way and size (the median is reported)")
    parser.add_argument("--kubelet-feature-gates", type=feature_gates, default={},
                        metavar="GATE=BOOL,...",
                        help="the node's kubelet with these feature gates (e.g. EventedPLEG="
                        "true: containers' ends told by containerd's events instead of "
                        "the relist every second); results in restart-GATE....md and .png")
    args = parser.parse_args()
    # `kill` stops the benchmark as Ctrl-C does: the node is taken down, the host put back
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    cluster = TestCluster(kubelet_feature_gates=args.kubelet_feature_gates).start()
    up: upstream.UpstreamOperator | None = None
    manager: ManagerProcess | None = None
    supervising: ManagerProcess | None = None
    try:
        cluster.kubectl("apply", "--server-side", "-k", str(REPO / "config" / "crd"))
        cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd",
                        "--all")
        spaces = {"upstream": "bench-upstream", "trainop": "bench-trainop",
                  "processes": "bench-processes"}
        for ns in spaces.values():
            cluster.kubectl("create", "namespace", ns)
        up = upstream.UpstreamOperator(
            cluster, "--namespace", spaces["upstream"], "--zap-log-level", "error",
            install_crds=False, log_path=RESULTS.parent / ".upstream.log",
            webhook_namespaces={"matchLabels": {
                "kubernetes.io/metadata.name": spaces["upstream"]}}).wait_ready()
        manager = ManagerProcess(cluster.kubeconfig, "--namespace", spaces["trainop"],
                                 "--log-level", "warning",
                                 log_path=RESULTS.parent / ".manager.log").wait_ready()
        cluster.import_image(supervisor_image(cluster.workdir))
        supervising = ManagerProcess(
            cluster.kubeconfig, "--namespace", spaces["processes"], "--log-level", "warning",
            "--rank-supervisor-image", SUPERVISOR_IMAGE,
            log_path=RESULTS.parent / ".manager-processes.log").wait_ready()
        seconds: dict[tuple[str, int], float] = {}
        for workers in args.sizes:
            for way in WAYS:
                runs = [one(cluster, spaces[way.side], workers, way,
                            cluster.workdir / "bench-state") for _ in range(args.repeat)]
                seconds[way.label, workers] = statistics.median(runs)
                print(f"{way.label:20} {workers:3} pods: "
                      + ", ".join(f"{s:.2f}" for s in runs) + " s", flush=True)
    finally:
        if supervising is not None:
            supervising.stop()
        if manager is not None:
            manager.stop()
        if up is not None:
            up.stop()
        cluster.stop()
    write(args.sizes, seconds, args.repeat, args.kubelet_feature_gates)


def feature_gates(text: str) -> dict[str, bool]:
    """GATE=true,GATE=false as the kubelet's --feature-gates takes them."""
    gates = {}
    for item in text.split(","):
        name, _, value = item.partition("=")
        if not name or value.lower() not in ("true", "false"):
            raise argparse.ArgumentTypeError(f"{item!r} is not GATE=true or GATE=false")
        gates[name] = value.lower() == "true"
    return gates


def write(sizes: list[int], seconds: dict[tuple[str, int], float], repeat: int,
          gates: dict[str, bool]) -> None:
    name = "restart" + "".join(f"-{g}" if on else f"-no{g}" for g, on in gates.items())
    told = ", ".join(f"{g}={str(on).lower()}" for g, on in gates.items())
    command = "python -m bench.restart" + (f" --kubelet-feature-gates {told}" if gates else "")
    kubelet = f" with the kubelet's feature gates {told}" if gates else ""
    head = ("| pods | " + " | ".join(w.label for w in WAYS)
            + " | recreating / in place | recreating / processes in place |")
    lines = ["# A failed rank: until every rank runs its next attempt", "",
             f"Measured {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC on "
             f"{machine().replace(' on loopback', '')}, a real node (kubelet, containerd, "
             f"scheduler){kubelet}; `{command}` (median of {repeat}).", "",
             head, "|" + "---|" * (len(WAYS) + 3)]
    for n in sizes:
        cells = [f"{seconds[w.label, n]:.2f} s" for w in WAYS]
        recreating = seconds["trainop recreating", n]
        cells += [f"{recreating / seconds[w, n]:.1f}x"
                  for w in ("trainop in place", "trainop, processes in place")]
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    lines += ["", "Upstream's figures are until the failed rank alone runs again: the other "
              "ranks stay in the old attempt (a real job waits in its collective until a "
              "timeout). trainop's are until every rank of the job runs its next attempt. "
              "Goal: processes in place at most 3 s at 32 pods, the 32-pod figure at most "
              "1.5x the 4-pod one, and at least 4x ahead of recreating in the same run."]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for way in WAYS:
        ax.plot(sizes, [seconds[way.label, n] for n in sizes], marker="o", label=way.label,
                linestyle="--" if way.side == "upstream" else "-")
    ax.axhline(5, color="grey", linewidth=1, linestyle=":")
    ax.set_xlabel("pods in the job")
    ax.set_ylabel("seconds from the failed exit")
    ax.set_title("A failed rank: until every rank runs its next attempt"
                 + (f"\n(kubelet: {told})" if gates else ""))
    ax.set_xticks(sizes)
    ax.legend()
    fig.tight_layout()
    fig.savefig(RESULTS / f"{name}.png", dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    if os.geteuid() != 0:
        raise SystemExit("bench.restart needs root (it starts a real node)")
    main()
