"""Upstream's operator and trainop side by side: the same steps on both, what each made.

Each side is its own API server (each with its own CRDs and validating webhook; one API
server cannot serve two definitions of `pytorchjobs.kubeflow.org`), its operator watching
every namespace at its defaults. A test works in a namespace of the same name on both, so
that objects compare by name; `Pair.compare()` puts what a client reads of each side
through `normalise` (names, UIDs, times, cluster IPs left out) and lists what differs.
"""

from __future__ import annotations

import fnmatch
import json
import re
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.integration.kube import Kube

README = Path(__file__).resolve().parents[2] / "README.md"
RESOURCES = ("pods", "services", "configmaps", "serviceaccounts", "roles.rbac.authorization.k8s.io",
             "rolebindings.rbac.authorization.k8s.io",
             "horizontalpodautoscalers.autoscaling",
             "podgroups.scheduling.volcano.sh", "podgroups.scheduling.x-k8s.io")
DROPPED_META = ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generation",
                "namespace", "deletionTimestamp", "deletionGracePeriodSeconds")
TIME_FIELDS = ("lastTransitionTime", "lastUpdateTime", "startTime", "completionTime",
               "lastReconcileTime", "time", "lastProbeTime", "startedAt", "finishedAt")


def normalise(obj: Any) -> Any:
    """`obj` with what differs between any two runs left out: UIDs, versions, times (a
    time that is set becomes "<time>"), assigned cluster IPs."""
    if isinstance(obj, dict):
        out = {}
        for key, value in obj.items():
            if key in DROPPED_META:
                continue
            if key in TIME_FIELDS:
                out[key] = "<time>"
            elif key in ("clusterIP", "clusterIPs") and value not in ("None", ["None"]):
                out[key] = "<ip>"
            elif key == "ownerReferences":
                out[key] = [{k: v for k, v in ref.items() if k != "uid"} for ref in value]
            else:
                out[key] = normalise(value)
        return out
    if isinstance(obj, list):
        return [normalise(v) for v in obj]
    return obj


def differences(ours: Any, theirs: Any, path: str = "") -> list[str]:
    """Where `ours` differs from `theirs`, one line per leaf: `path: ours != theirs`."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        out = []
        for key in sorted(set(ours) | set(theirs)):
            sub = f"{path}.{key}"
            if key not in theirs:
                out.append(f"{sub}: {_short(ours[key])} != (none)")
            elif key not in ours:
                out.append(f"{sub}: (none) != {_short(theirs[key])}")
            else:
                out.extend(differences(ours[key], theirs[key], sub))
        return out
    if isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        return [d for i, (a, b) in enumerate(zip(ours, theirs, strict=True))
                for d in differences(a, b, f"{path}[{i}]")]
    if ours != theirs:
        return [f"{path}: {_short(ours)} != {_short(theirs)}"]
    return []


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 300 else text[:297] + "..."


@dataclass
class Answer:
    """What the API server (and its webhook) answered a create or update."""

    allowed: bool
    message: str


class Side:
    """One operator's API server, seen in the test's namespace."""

    def __init__(self, name: str, kube: Kube):
        self.name = name
        self.kube = kube

    def submit(self, doc: dict[str, Any]) -> Answer:
        out = self.kube.api.kubectl("apply", "--server-side", "-n", self.kube.ns, "-f", "-",
                                    input=json.dumps(doc), check=False)
        return Answer(out.returncode == 0, out.stderr.strip())

    def snapshot(self, kind: str) -> dict[str, Any]:
        """Every object of the test's namespace a client of the job would read."""
        snap: dict[str, Any] = {}
        for job in self.kube.items(f"{kind.lower()}s.kubeflow.org"):
            snap[f"{kind}/{job['metadata']['name']}"] = normalise(job)
        for resource in RESOURCES:
            out = self.kube.api.kubectl("get", resource, "-n", self.kube.ns, "-o", "json",
                                        check=False)
            if out.returncode != 0:
                continue  # a PodGroup kind this side has no CRD for
            for item in json.loads(out.stdout)["items"]:
                if resource == "configmaps" and item["metadata"]["name"] == "kube-root-ca.crt":
                    continue
                short = resource.split(".")[0]
                snap[f"{short}/{item['metadata']['name']}"] = normalise(item)
        snap["events"] = self.events()
        return snap

    def events(self) -> dict[str, int]:
        """How often each event was told: `type reason kind/name: message` -> count."""
        counts: Counter[str] = Counter()
        for ev in self.kube.items("events"):
            obj = ev.get("involvedObject") or ev.get("regarding") or {}
            if obj.get("kind") not in (None, "Pod") and "kubeflow.org" not in obj.get(
                    "apiVersion", "kubeflow.org"):
                continue
            key = (f"{ev.get('type')} {ev.get('reason')} {obj.get('kind')}/{obj.get('name')}: "
                   f"{ev.get('message') or ev.get('note')}")
            counts[key] += int(ev.get("count") or (ev.get("series") or {}).get("count") or 1)
        return dict(sorted(counts.items()))


class Pair:
    """The same namespace on both sides."""

    def __init__(self, upstream: Side, trainop: Side):
        self.upstream, self.trainop = upstream, trainop
        self.sides = (upstream, trainop)

    def submit(self, doc: dict[str, Any]) -> tuple[Answer, Answer]:
        up, ours = (side.submit(doc) for side in self.sides)
        return up, ours

    def set_pod(self, name: str, phase: str, **kw: Any) -> None:
        for side in self.sides:
            side.kube.set_pod(name, phase, **kw)

    def set_all(self, phase: str, prefix: str = "", **kw: Any) -> None:
        for side in self.sides:
            side.kube.set_all(phase, prefix, **kw)

    def settle(self, kind: str, quiet: float = 2.0, timeout: float = 30) -> tuple[
            dict[str, Any], dict[str, Any]]:
        """Both sides' snapshots once neither has changed for `quiet` seconds."""
        deadline = time.monotonic() + timeout
        last = (self.upstream.snapshot(kind), self.trainop.snapshot(kind))
        since = time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.5)
            now = (self.upstream.snapshot(kind), self.trainop.snapshot(kind))
            if now != last:
                last, since = now, time.monotonic()
            elif time.monotonic() - since >= quiet:
                break
        return last

    def compare(self, kind: str, step: str, tries: int = 3) -> list[str]:
        """What differs once both sides settled, each line `step: object path: trainop !=
        upstream`. A difference the README does not document is looked at again after the
        sides settle once more (`tries` in all): on a loaded machine one operator may only
        be slower to write what the other wrote."""
        for _ in range(tries - 1):
            found = self._differences(kind, step)
            if not undocumented(found, documented()):
                return found
            time.sleep(2)
        return self._differences(kind, step)

    def _differences(self, kind: str, step: str) -> list[str]:
        theirs, ours = self.settle(kind)
        out = []
        for key in sorted(set(ours) | set(theirs)):
            if key == "events":
                for ev in sorted(set(ours["events"]) | set(theirs["events"])):
                    a, b = ours["events"].get(ev, 0), theirs["events"].get(ev, 0)
                    if a != b:
                        out.append(f"{step}: event {ev}: {a} != {b}")
                continue
            if key not in theirs:
                out.append(f"{step}: {key}: exists != (none)")
            elif key not in ours:
                out.append(f"{step}: {key}: (none) != exists")
            else:
                out.extend(f"{step}: {key} {d}" for d in differences(ours[key], theirs[key]))
        return out


def documented() -> list[str]:
    """The patterns of the README's differences table (its "seen as" column): each
    difference the suite finds must match one (`fnmatch`, `*` for any text)."""
    text = README.read_text()
    start = text.index("### Differences from training-operator v1.9.4")
    table = text[start:text.index("\n## ", start)]
    patterns = []
    for row in table.splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if row.startswith("|") and len(cells) >= 3 and not set(cells[0]) <= {"-"}:
            patterns.extend(re.findall(r"`([^`]+)`", cells[-1]))
    return patterns


def undocumented(found: list[str], patterns: list[str]) -> list[str]:
    """The differences of `found` that no pattern of the README's table covers (the step
    name is left out of the match)."""
    return [d for d in found
            if not any(fnmatch.fnmatchcase(d.split(": ", 1)[1], p) for p in patterns)]
