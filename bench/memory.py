"""Memory of the manager: per 1,000 cached pods, the cost of pods it does not own, one
manager with every kind against seven managers with one kind each, and what one user's
large objects cost it (hostile rows).

    python -m bench.memory [--pods 10000,50000] [--foreign 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import time
from typing import Any

from bench.lib import Cluster, Manager, Row, create_all, desired_objects, job_doc, write_results
from trainop.api import KINDS
from trainop.api.resources import CONFIGMAPS, job_resource
from trainop.cluster.reading.client import Client
from trainop.engine.labels import JOB_NAME


def pods(ns: str, count: int, start: int, foreign: bool = False) -> list[dict[str, Any]]:
    """`count` pods as trainop makes them (labels, env, ports); foreign: no trainop labels."""
    template = next(o for o in desired_objects(job_doc("PyTorchJob", {"Worker": 1}, "mem", ns))
                    if o["kind"] == "Pod")
    out = []
    for i in range(start, start + count):
        pod = {**template, "metadata": {**template["metadata"], "name": f"p{i}"}}
        if foreign:
            pod["metadata"] = {"name": f"f{i}", "namespace": ns, "labels": {"app": "web"}}
        else:
            pod["metadata"]["labels"] = {**template["metadata"]["labels"],
                                         "training.kubeflow.org/job-name": f"mem{i // 100}",
                                         "training.kubeflow.org/replica-index": str(i % 100)}
            pod["metadata"]["ownerReferences"] = [{
                "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": f"mem{i // 100}",
                "uid": f"00000000-0000-0000-0000-{i // 100:012d}", "controller": True}]
        out.append(pod)
    return out


def settle(manager: Manager, pods_cached: int, timeout: float = 300) -> float:
    deadline = time.monotonic() + timeout
    while manager.metric("trainop_cache_objects", resource="pods") < pods_cached:
        if time.monotonic() > deadline:
            raise TimeoutError("the manager did not cache every pod")
        time.sleep(0.5)
    time.sleep(3)
    return manager.rss_mib()


async def add(client: Client, objs: list[dict[str, Any]]) -> None:
    for i in range(0, len(objs), 5000):
        await create_all(client, objs[i:i + 5000])


BIG_ENV = [{"name": f"V{i}", "value": "x" * 1000} for i in range(1300)]
"""A template environment of 1.3 MiB: jobs this large the API server still takes."""


LAYOUTS = {"TFJob": {"Worker": 1}, "PyTorchJob": {"Master": 1},
           "MPIJob": {"Launcher": 1, "Worker": 1}, "XGBoostJob": {"Master": 1},
           "PaddleJob": {"Worker": 1}, "JAXJob": {"Worker": 1},
           "MXJob": {"Scheduler": 1, "Server": 1, "Worker": 1}}
"""A small valid layout of every kind (the hostile jobs are of every kind: the manager's
parsed jobs share one budget, whatever their kinds)."""
BIG_JOBS = 9
"""Hostile jobs of each kind."""


def big_job(kind: str, name: str, ns: str) -> dict[str, Any]:
    """A suspended job of `kind` of about 1.3 MiB: its first replica type's container has
    a long environment."""
    doc = job_doc(kind, LAYOUTS[kind], name, ns, suspend=True)
    first = next(iter(doc["spec"][KINDS[kind].replica_specs_field].values()))
    first["template"] = copy.deepcopy(first["template"])  # job_doc shares one template
    first["template"]["spec"]["containers"][0]["env"] = BIG_ENV
    return doc


async def hostile(cluster: Cluster, client: Client) -> list[Row]:
    """What one user's large objects cost: ConfigMaps their own job controls (labelled as
    trainop's), suspended jobs of 1.3 MiB, and the peak of a manager restarted over them."""
    ns = cluster.namespace("hostile")
    manager = Manager(cluster, "--namespace", ns, name="hostile").wait_ready()
    start = settle(manager, 0)
    owner = await client.create(job_resource("JAXJob").path(ns),
                                big_job("JAXJob", "owner", ns))
    ref = {"apiVersion": "kubeflow.org/v1", "kind": "JAXJob", "name": "owner",
           "uid": owner["metadata"]["uid"], "controller": True}
    with_owner = settle(manager, 0)
    for i in range(40):
        await client.create(CONFIGMAPS.path(ns), {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": f"big-{i}", "labels": {JOB_NAME: "owner"},
                         "ownerReferences": [ref]},
            "data": {"blob": "x" * 1_000_000}})  # the most a ConfigMap may hold
    per_config_map = (settle(manager, 0) - with_owner) / 40 * 1024
    before_jobs = settle(manager, 0)
    for kind in LAYOUTS:
        for i in range(BIG_JOBS):
            await client.create(job_resource(kind).path(ns),
                                big_job(kind, f"big-{kind.lower()}-{i}", ns))
    jobs_growth = settle(manager, 0) - before_jobs
    manager.stop()
    again = Manager(cluster, "--namespace", ns, name="hostile-again").wait_ready(300)
    settle(again, 0)
    restarted_peak = again.peak_rss_mib()
    again.stop()
    jobs = BIG_JOBS * len(LAYOUTS)
    return [
        Row("hostile: growth per 1 MB ConfigMap a user's job controls", per_config_map,
            None, "KiB", "<= 128 KiB"),
        Row(f"hostile: growth from {jobs} suspended jobs of 1.3 MiB, every kind "
            f"({jobs * 1.3:.0f} MiB of JSON)", jobs_growth, None, "MiB", "<= 100 MiB"),
        Row("hostile: peak of a manager restarted over them", restarted_peak, None, "MiB",
            "<= 300 MiB"),
        Row("hostile: resident memory before any of it", start, None, "MiB"),
    ]


async def main(levels: list[int], foreign: int) -> None:
    with Cluster() as cluster:
        client = cluster.client()
        ns = cluster.namespace("cached")
        try:
            one_kind = Manager(cluster, "--enable-scheme", "pytorchjob", name="one").wait_ready()
            manager = Manager(cluster).wait_ready()
            rss = {0: settle(manager, 0)}
            one_kind_rss = settle(one_kind, 0)
            one_kind.stop()
            have = 0
            for level in levels:
                await add(client, pods(ns, level - have, have))
                have = level
                rss[level] = settle(manager, level)
            before_foreign = manager.rss_mib()
            await add(client, pods(ns, foreign, 0, foreign=True))
            time.sleep(5)
            foreign_growth = manager.rss_mib() - before_foreign
            all_watches = manager.metric("trainop_informer_watches")
            manager.stop()
            sevens = [Manager(cluster, "--enable-scheme", k.lower(), name=f"m-{k}")
                      for k in KINDS]
            for m in sevens:
                m.wait_ready(600)
            seven_rss = sum(settle(m, have) for m in sevens)
            seven_watches = sum(m.metric("trainop_informer_watches") for m in sevens)
            for m in sevens:
                m.stop()
            single = Manager(cluster, name="again").wait_ready(600)
            all_rss = settle(single, have)
            single.stop()
            hostile_rows = await hostile(cluster, client)
        finally:
            await client.close()
    top = levels[-1]
    rows = [Row("resident memory, no pods cached", rss[0], None, "MiB")]
    for level in levels:
        per_1000 = (rss[level] - rss[0]) / level * 1000
        rows.append(Row(f"memory per 1,000 cached pods (at {level:,})", per_1000 * 1024, None,
                        "KiB", "<= 3,000 KiB"))
    rows += [
        Row(f"growth from {foreign:,} pods trainop does not own", foreign_growth, None, "MiB",
            "about 0"),
        Row("one manager, all seven kinds vs one kind (idle)", rss[0], one_kind_rss, "MiB",
            "<= 1.1"),
        Row(f"one manager (all kinds) vs seven managers (one kind each), {top:,} pods",
            all_rss, seven_rss, "MiB", "<= 0.25"),
        Row("watch connections: one manager vs seven managers", all_watches, seven_watches, ""),
        *hostile_rows,
    ]
    write_results("memory", "Memory (python -m bench.memory)", rows, notes=(
        "Pods are trainop-shaped (labels, owner reference, environment, ports) and created "
        "directly, so that only the cache is measured. Foreign pods carry no trainop label; "
        "the API server filters them out of the manager's list and watch. Hostile rows: "
        "one namespace's user creates 40 ConfigMaps of 1 MB labelled as trainop's and "
        "controlled by their own job, then nine suspended jobs of every kind of 1.3 MiB "
        "each (a long environment); then the manager is restarted over them (its peak is "
        "the kernel's VmHWM)."))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pods", default="10000,50000")
    parser.add_argument("--foreign", type=int, default=20000)
    a = parser.parse_args()
    asyncio.run(main([int(x) for x in a.pods.split(",")], a.foreign))
