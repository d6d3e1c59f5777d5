"""Gangs on the real node (testbed/node.py: kubelet, containerd, kube-scheduler with its
gang plugin): trainop's jobs without a gang and with Kubernetes' own (--gang-scheduler-name
=workload-api), side by side in one run.

    python -m bench.gang [--size 32] [--jobs 4] [--ranks 3] [--slots 5] [--repeat 1]

Slots are an extended resource given to the node (`example.com/slot`); each rank takes one.

- Bind: a job of SIZE ranks, SIZE slots free: seconds from the job's creation until the
  scheduler has bound every pod.
- Contention: JOBS jobs of RANKS ranks for SLOTS slots, their pods reaching the scheduler
  interleaved (as jobs made at the same moment do; scheduling gates let them go in that
  order). A rank notes when it starts, waits until every rank of its job has (as a
  collective does), trains TRAIN seconds and ends. Within WINDOW seconds: the jobs that
  finished, and the slot-seconds held by ranks that could not train (started, waiting for
  a peer that has no slot).

scheduler-plugins' coscheduling and Volcano are not in the comparison: neither module is
served by the Go module proxy this project builds from. Needs root and what the real-node
suite needs (hack/node-deps.sh, hack/test-assets.sh).
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from bench.lib import RESULTS, machine, wait
from testbed import images
from testbed.manager import ManagerProcess
from testbed.node import NODE_NAME, TestCluster

SLOT = "example.com/slot"
HOLD = "example.com/hold"
WAYS = {"no gang": (), "Workload API": ("--gang-scheduler-name", "workload-api")}
RANK = """\
s=/state; now() { read up rest </proc/uptime; echo "$up"; }
now >"$s/$POD.start"
set -- "$s/$JOB"-worker-*.start
until [ $# -ge "$RANKS" ]; do sleep 0.2; set -- "$s/$JOB"-worker-*.start; done
now >"$s/$POD.train"
sleep "$TRAIN"
now >"$s/$POD.end"
"""


def uptime() -> float:
    """The host's /proc/uptime, the clock every container reads."""
    return float(Path("/proc/uptime").read_text().split()[0])


def job_doc(name: str, ranks: int, state: Path, train: float, gated: bool) -> dict[str, Any]:
    env = {"POD": None, "JOB": name, "RANKS": str(ranks), "TRAIN": str(train)}
    pod: dict[str, Any] = {
        "terminationGracePeriodSeconds": 1,
        "containers": [{
            "name": "tensorflow", "image": images.TOOLS[0], "imagePullPolicy": "Never",
            "command": ["sh", "-c", RANK],
            "env": [{"name": k, "value": v} if v is not None else {"name": k, "valueFrom": {
                "fieldRef": {"fieldPath": "metadata.name"}}} for k, v in env.items()],
            "resources": {"limits": {SLOT: "1"}, "requests": {"cpu": "1m", "memory": "4Mi"}},
            "volumeMounts": [{"name": "state", "mountPath": "/state"}]}],
        "volumes": [{"name": "state", "hostPath": {"path": str(state)}}]}
    if gated:
        pod["schedulingGates"] = [{"name": HOLD}]
    return {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": name},
            "spec": {"runPolicy": {"cleanPodPolicy": "None"}, "tfReplicaSpecs": {"Worker": {
                "replicas": ranks, "restartPolicy": "Never", "template": {"spec": pod}}}}}


def give_slots(cluster: TestCluster, count: int) -> None:
    key = SLOT.replace("/", "~1")
    cluster.kubectl("patch", "node", NODE_NAME, "--subresource=status", "--type=json", "-p",
                    json.dumps([{"op": "add", "path": f"/status/{f}/{key}", "value": str(count)}
                                for f in ("capacity", "allocatable")]))


def pods(cluster: TestCluster, ns: str) -> list[dict[str, Any]]:
    return list(json.loads(cluster.kubectl("get", "pods", "-n", ns, "-o", "json").stdout)[
        "items"])



def clear(cluster: TestCluster, ns: str) -> None:
    cluster.kubectl("delete", "-n", ns, "tfjobs", "--all", "--wait=false")
    cluster.kubectl("delete", "-n", ns, "pods", "--all", "--grace-period=0", "--force",
                    check=False)
    wait("the pods to go", lambda: not pods(cluster, ns), 300)


def bind(cluster: TestCluster, ns: str, size: int, root: Path) -> float:
    """Seconds from a SIZE-rank job's creation until every pod of it is bound."""
    give_slots(cluster, size)
    name = f"b{uuid.uuid4().hex[:6]}"
    (root / name).mkdir(parents=True)
    (root / name).chmod(0o777)
    start = time.monotonic()
    cluster.kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(
        job_doc(name, size, root / name, 1000, gated=False)))
    wait(f"{size} pods bound", lambda: len([p for p in pods(cluster, ns)
                                            if p["spec"].get("nodeName")]) == size, 300)
    took = time.monotonic() - start
    clear(cluster, ns)
    return took


def contend(cluster: TestCluster, ns: str, args: argparse.Namespace, root: Path
            ) -> tuple[int, float]:
    """Jobs finished and idle slot-seconds within the window, JOBS jobs for SLOTS slots."""
    give_slots(cluster, args.slots)
    run = uuid.uuid4().hex[:4]
    state = root / f"c{run}"
    state.mkdir(parents=True)
    state.chmod(0o777)
    names = [f"c{run}{chr(ord('a') + j)}" for j in range(args.jobs)]
    cluster.kubectl("apply", "-n", ns, "-f", "-", input="\n---\n".join(
        json.dumps(job_doc(n, args.ranks, state, args.train, gated=True)) for n in names))
    order = [f"{n}-worker-{r}" for r in range(args.ranks) for n in names]
    wait("every pod made", lambda: len(pods(cluster, ns)) == len(order), 120)
    begin = uptime()
    for pod in order:  # as the scheduler meets pods of jobs made at the same moment
        cluster.kubectl("patch", "pod", pod, "-n", ns, "--type=json", "-p",
                        '[{"op": "remove", "path": "/spec/schedulingGates"}]')
    ends = [state / f"{p}.end" for p in order]
    deadline = time.monotonic() + args.window
    while time.monotonic() < deadline and not all(e.exists() for e in ends):
        time.sleep(0.2)
    end = min(uptime(), begin + args.window)

    def stamp(pod: str, what: str) -> float | None:
        path = state / f"{pod}.{what}"
        return float(path.read_text()) if path.exists() and path.read_text().strip() else None
    idle = 0.0
    for pod in order:
        started = stamp(pod, "start")
        if started is not None:
            trained = stamp(pod, "train")
            idle += min(trained if trained is not None else end, end) - started
    finished = sum(all(stamp(f"{n}-worker-{r}", "end") is not None for r in range(args.ranks))
                   for n in names)
    clear(cluster, ns)
    return finished, idle


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=32, help="ranks of the job bound at once")
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--ranks", type=int, default=3, help="ranks of each contending job")
    parser.add_argument("--slots", type=int, default=5, help="slots the contending jobs share")
    parser.add_argument("--train", type=float, default=5, help="seconds a job trains")
    parser.add_argument("--window", type=float, default=120)
    parser.add_argument("--repeat", type=int, default=1, help="runs of each (the median)")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    cluster = TestCluster().start()
    managers: list[ManagerProcess] = []
    results: dict[str, tuple[float, float, float]] = {}
    try:
        cluster.kubectl("apply", "--server-side", "-k", str(Path(__file__).resolve().parents[1]
                                                            / "config" / "crd"))
        cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        root = cluster.workdir / "bench-state"
        for way, flags in WAYS.items():
            ns = "bench-" + way.lower().replace(" ", "-")
            cluster.kubectl("create", "namespace", ns)
            managers.append(ManagerProcess(
                cluster.kubeconfig, "--namespace", ns, "--log-level", "warning", *flags,
                log_path=RESULTS.parent / f".manager-{ns}.log").wait_ready())
            binds = [bind(cluster, ns, args.size, root) for _ in range(args.repeat)]
            runs = [contend(cluster, ns, args, root) for _ in range(args.repeat)]
            results[way] = (statistics.median(binds),
                            statistics.median(f for f, _ in runs),
                            statistics.median(i for _, i in runs))
            print(f"{way}: bind {binds}, contention {runs}", flush=True)
    finally:
        for m in managers:
            m.stop()
        cluster.stop()
    write(args, results)


def write(args: argparse.Namespace, results: dict[str, tuple[float, float, float]]) -> None:
    loose, gang = results["no gang"], results["Workload API"]
    lines = [
        "# Gangs: binding a job, and jobs contending for too few slots", "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC on "
        f"{machine().replace(' on loopback', '')}, a real node (kubelet, containerd, "
        f"kube-scheduler 1.37 with GenericWorkload on); `python -m bench.gang --size "
        f"{args.size} --jobs {args.jobs} --ranks {args.ranks} --slots {args.slots} --repeat "
        f"{args.repeat}` (median of {args.repeat}).", "",
        "| figure | no gang | Workload API | Workload API / no gang |", "|---|---|---|---|",
        f"| every pod of a {args.size}-rank job bound, from its creation | {loose[0]:.2f} s | "
        f"{gang[0]:.2f} s | {gang[0] / loose[0]:.2f}x |",
        f"| jobs finished within {args.window:.0f} s ({args.jobs} jobs of {args.ranks} ranks, "
        f"{args.slots} slots) | {loose[1]:.0f} | {gang[1]:.0f} | |",
        f"| slot-seconds held by ranks that could not train, within that window | "
        f"{loose[2]:.1f} | {gang[2]:.1f} | |", "",
        "Without a gang the contending jobs' pods are bound as they come: every slot goes to "
        "some job's first ranks, no job has all of its own, and every rank waits for a peer "
        "that never starts (a collective would wait for its timeout). With the Workload API "
        "kube-scheduler binds a job's pods only when all of them fit: the jobs run one "
        "after another, and the only slot-seconds spent waiting are the moments a job's "
        "ranks take to start. scheduler-plugins' coscheduling and Volcano could not be "
        "built here (their modules are not served by the Go module proxy), so they are not "
        "in the table."]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "gang.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
