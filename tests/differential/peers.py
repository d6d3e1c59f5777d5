"""Upstream's operator and trainop side by side: the same steps on each, what each made.

Each side is its own API server (each with its own CRDs and validating webhook; one API
server cannot serve two definitions of `pytorchjobs.kubeflow.org`), its operator watching
every namespace. trainop runs twice, beside one upstream: at its defaults (`default`) and
with the behaviour flags of the shipped Deployment (`shipped`). A test works in a namespace
of the same name on every side, so that objects compare by name; `Sides.compare()` puts what
a client reads of each side through `normalise` (UIDs, versions, times, cluster IPs left
out) and lists what differs between each trainop and upstream.

A difference reads `VARIANT:SCENARIO STEP: WHAT`, for example
`shipped:a_job_that_succeeds/MPIJob succeeded: event Normal MPIJobSucceeded MPIJob/job:
Job ... : 1 != 0`: the trainop run, the test (its name without `test_`, a parameter after a
`/`), the step, then `object path: trainop's value != upstream's` or `event TYPE REASON
KIND/NAME: MESSAGE: trainop's count != upstream's`. Each must match a pattern of the README's
differences table (`patterns()`), and a full run fails on a pattern that matched nothing.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from prometheus_client.parser import text_string_to_metric_families

from tests.integration.kube import Kube

README = Path(__file__).resolve().parents[2] / "README.md"
RESOURCES = ("pods", "services", "configmaps", "serviceaccounts", "roles.rbac.authorization.k8s.io",
             "rolebindings.rbac.authorization.k8s.io",
             "horizontalpodautoscalers.autoscaling",
             "podgroups.scheduling.volcano.sh", "podgroups.scheduling.x-k8s.io")
"""What a job makes besides itself (every side has both PodGroup kinds' CRDs)."""
DROPPED_META = ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generation",
                "namespace", "deletionTimestamp", "deletionGracePeriodSeconds")
"""What differs between any two API servers in an object's metadata (the namespace is the
same name on every side: one of a RoleBinding's subjects, which is not metadata, stays)."""
TIME_FIELDS = ("lastTransitionTime", "lastUpdateTime", "startTime", "completionTime",
               "lastReconcileTime", "time", "lastProbeTime", "startedAt", "finishedAt",
               "lastScaleTime")
REPORT = os.environ.get("TRAINOP_DIFF_REPORT")
"""A file to which every scenario writes every difference it found, documented or not, and
fails on none: the lines to write a new row's patterns from."""
POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="side")
T = TypeVar("T")
VARIANTS = ("default", "shipped")
"""trainop's runs beside upstream: its defaults, and the shipped Deployment's flags."""


def normalise(obj: dict[str, Any]) -> dict[str, Any]:
    """An object as any two runs of one operator write it: its metadata's UIDs, versions and
    namespace left out, a time that is set as "<time>", an assigned cluster IP as "<ip>"."""
    out: dict[str, Any] = _values(obj)
    meta = obj.get("metadata") or {}
    out["metadata"] = {k: _values(v) for k, v in meta.items() if k not in DROPPED_META}
    if "ownerReferences" in meta:
        out["metadata"]["ownerReferences"] = [{k: v for k, v in ref.items() if k != "uid"}
                                              for ref in meta["ownerReferences"]]
    return out


def _values(obj: Any) -> Any:
    """`obj` with its times and assigned cluster IPs, at any depth, as placeholders."""
    if isinstance(obj, dict):
        out = {}
        for key, value in obj.items():
            if key in TIME_FIELDS:
                out[key] = "<time>"
            elif key in ("clusterIP", "clusterIPs") and value not in ("None", ["None"]):
                out[key] = "<ip>"
            else:
                out[key] = _values(value)
        return out
    if isinstance(obj, list):
        return [_values(v) for v in obj]
    return obj


def differences(ours: Any, theirs: Any, path: str = "") -> list[str]:
    """Where `ours` differs from `theirs`, one line per leaf: `path: ours != theirs`, or
    `path: theirs += what ours adds` for a text that starts with upstream's."""
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
    if isinstance(ours, str) and isinstance(theirs, str) and theirs and \
            ours.startswith(theirs) and ours != theirs:
        # upstream's text, then more: a pattern can document what trainop adds, and a
        # message that does not start with upstream's text stays a plain difference
        return [f"{path}: {_short(theirs)} += {_short(ours[len(theirs):])}"]
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


DENIED = re.compile(r"^(.* denied the request: [^:]+: )(.*)$", re.S)
"""A webhook's refusal as kubectl prints it: up to the first problem's field path, then
the words."""


def answer_difference(case: str, ours: Answer, theirs: Answer) -> str | None:
    """How trainop's answer to a create or update differs from upstream's, if it does: in
    whether it was allowed; or, where both name the same webhook and field path, only in
    the words after them; or in the whole message (warnings included)."""
    if ours.allowed != theirs.allowed:
        return (f"{case}: allowed {ours.allowed} != {theirs.allowed} "
                f"({ours.message} | {theirs.message})")
    if ours.message == theirs.message:
        return None
    a, b = DENIED.match(ours.message), DENIED.match(theirs.message)
    if a and b and a.group(1) == b.group(1):
        return (f"{case}: words after {a.group(1)!r}: {json.dumps(a.group(2))} != "
                f"{json.dumps(b.group(2))}")
    return f"{case}: message {ours.message!r} != {theirs.message!r}"


class Side:
    """One operator's API server, seen in the test's namespace, and the operator's metrics
    (at `metrics_port` on loopback, if it has one there)."""

    resources = RESOURCES

    def __init__(self, name: str, kube: Kube, metrics_port: int | None):
        self.name = name
        self.kube = kube
        self.metrics_port = metrics_port

    def submit(self, doc: dict[str, Any]) -> Answer:
        out = self.kube.api.kubectl("apply", "--server-side", "-n", self.kube.ns, "-f", "-",
                                    input=json.dumps(doc), check=False)
        return Answer(out.returncode == 0, out.stderr.strip())

    def snapshot(self, kind: str) -> dict[str, Any]:
        """Every object of the test's namespace a client of the job would read, and its
        events, in one read (`kind/name` -> object, "events" -> counts)."""
        resources = ",".join((f"{kind.lower()}s.kubeflow.org", *self.resources, "events"))
        out = self.kube.api.kubectl("get", resources, "-n", self.kube.ns, "-o", "json")
        snap: dict[str, Any] = {}
        events = []
        for item in json.loads(out.stdout)["items"]:
            name = item["metadata"]["name"]
            if item["kind"] == "Event":
                if self.keeps(item):
                    events.append(item)
            elif item["kind"] == kind:
                snap[f"{kind}/{name}"] = self.normalise(item)
            elif not (item["kind"] == "ConfigMap" and name == "kube-root-ca.crt"):
                snap[f"{item['kind'].lower()}s/{name}"] = self.normalise(item)
        snap["events"] = counts(events)
        snap["event sources"] = sources(events, kind)
        snap["metrics"] = self.metrics()
        return snap

    def normalise(self, obj: dict[str, Any]) -> dict[str, Any]:
        """An object of the snapshot as `normalise` leaves it."""
        return normalise(obj)

    def keeps(self, event: dict[str, Any]) -> bool:
        """Whether the snapshot counts `event` (every event of the namespace)."""
        return True

    def metrics(self) -> dict[str, float]:
        """The operator's job counters of the test's namespace (`training_operator_jobs_*`,
        by framework); none where its metrics are not on loopback."""
        if self.metrics_port is None:
            return {}
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as r:
            text = r.read().decode()
        return {f"{s.name}{{{s.labels.get('framework')}}}": s.value
                for family in text_string_to_metric_families(text) for s in family.samples
                if s.name.startswith("training_operator_jobs_")
                and s.labels.get("job_namespace") == self.kube.ns}


def counts(events: list[dict[str, Any]]) -> dict[str, int]:
    """How often each event was told: `type reason kind/name: message` -> count."""
    told: Counter[str] = Counter()
    for ev in events:
        obj = ev.get("involvedObject") or ev.get("regarding") or {}
        key = (f"{ev.get('type')} {ev.get('reason')} {obj.get('kind')}/{obj.get('name')}: "
               f"{ev.get('message') or ev.get('note')}")
        told[key] += int(ev.get("count") or (ev.get("series") or {}).get("count") or 1)
    return dict(sorted(told.items()))


def sources(events: list[dict[str, Any]], kind: str) -> dict[str, list[str]]:
    """Who told the job's events, of which object (`kind/name` -> each distinct
    `apiVersion from source (reportingComponent)`): the rest of an event a client reads
    besides its type, reason, message and count (`counts`), which a client that watches
    events by the job's API version or the operator's component filters on. Only the
    events on jobs: the pods' are the kubelet's and the scheduler's."""
    told: dict[str, set[str]] = {}
    for ev in events:
        obj = ev.get("involvedObject") or {}
        if obj.get("kind") != kind:
            continue
        source = ev.get("source") or {}
        told.setdefault(f"{kind}/{obj.get('name')}", set()).add(
            f"{obj.get('apiVersion')} from {json.dumps(source, sort_keys=True)} "
            f"({ev.get('reportingComponent') or ''})")
    return {k: sorted(v) for k, v in sorted(told.items())}


class Sides:
    """The same namespace on upstream's side and on each of trainop's, in one scenario."""

    def __init__(self, scenario: str, upstream: Side, trainops: dict[str, Side]):
        self.scenario = scenario
        self.upstream, self.trainops = upstream, trainops
        self.sides = (upstream, *trainops.values())

    def each(self, fn: Callable[[Side], T]) -> list[T]:
        """`fn` of every side (upstream's first), the sides at once: each is a kubectl
        process against its own API server, and the suite's time is mostly theirs."""
        return list(POOL.map(fn, self.sides))

    def submit(self, doc: dict[str, Any]) -> tuple[Answer, dict[str, Answer]]:
        """Upstream's answer and each trainop's."""
        theirs, *ours = self.each(lambda side: side.submit(doc))
        return theirs, dict(zip(self.trainops, ours, strict=True))

    def set_pod(self, name: str, phase: str, **kw: Any) -> None:
        self.each(lambda side: side.kube.set_pod(name, phase, **kw))

    def set_all(self, phase: str, prefix: str = "", **kw: Any) -> None:
        self.each(lambda side: side.kube.set_all(phase, prefix, **kw))

    def scoped(self, variant: str, step: str, lines: list[str]) -> list[str]:
        """`lines` as differences of this scenario's `step` in trainop's `variant`."""
        return [f"{variant}:{self.scenario} {step}: {line}" for line in lines]

    def settle(self, kind: str, quiet: float = 2.0, timeout: float = 30) -> list[dict[str, Any]]:
        """Every side's snapshot (upstream's first) once none has changed for `quiet`
        seconds."""
        deadline = time.monotonic() + timeout
        last = self.each(lambda side: side.snapshot(kind))
        since = time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.5)
            now = self.each(lambda side: side.snapshot(kind))
            if now != last:
                last, since = now, time.monotonic()
            elif time.monotonic() - since >= quiet:
                break
        return last

    def compare(self, kind: str, step: str, patience: float = 60) -> list[str]:
        """What differs once every side settled. While a difference the README does not
        document remains, the sides are looked at again once they settle once more, for up
        to `patience` seconds: on a loaded machine one operator may only be slower to write
        what the other wrote (upstream's requeues back off exponentially: a few failed
        reconciles behind a lagging cache cost it tens of seconds)."""
        if REPORT:
            return self._differences(kind, step)
        known = patterns()
        deadline = time.monotonic() + patience
        found = self._differences(kind, step)
        while undocumented(found, known) and time.monotonic() < deadline:
            time.sleep(2)
            found = self._differences(kind, step)
        return found

    def _differences(self, kind: str, step: str) -> list[str]:
        theirs, *ours_by_variant = self.settle(kind)
        out = []
        for variant, ours in zip(self.trainops, ours_by_variant, strict=True):
            out += self.scoped(variant, step, snapshot_differences(ours, theirs))
        return out


def snapshot_differences(ours: dict[str, Any], theirs: dict[str, Any]) -> list[str]:
    """What differs between two sides' snapshots, one line per object path or event."""
    out = []
    for key in sorted(set(ours) | set(theirs)):
        if key == "events":
            for ev in sorted(set(ours["events"]) | set(theirs["events"])):
                a, b = ours["events"].get(ev, 0), theirs["events"].get(ev, 0)
                if a != b:
                    out.append(f"event {ev}: {a} != {b}")
        elif key not in theirs:
            out.append(f"{key}: exists != (none)")
        elif key not in ours:
            out.append(f"{key}: (none) != exists")
        else:
            out.extend(f"{key} {d}" for d in differences(ours[key], theirs[key]))
    return out


@dataclass(frozen=True)
class Pattern:
    """One documented difference: `VARIANT:SCENARIO STEP: WHAT`, globs (`*`, `?`, `[...]`)
    matched against a whole difference line; `VARIANT:{S1,S2} STEP: WHAT` for the same
    difference in several scenarios. Written `?...` in the README when it is a race of
    upstream's that a run may not show (it is then never stale)."""

    text: str
    row: str
    """The row's first cell: what the difference is."""
    optional: bool = False

    @property
    def scenarios(self) -> list[str]:
        """The scenarios (globs of their parameters) this pattern is written for."""
        scope = self.text.split(" ", 1)[0].split(":", 1)[1]
        return scope[1:-1].split(",") if scope.startswith("{") else [scope]

    def matches(self, difference: str) -> bool:
        variant, rest = self.text.split(":", 1)[0], self.text.split(" ", 1)[1]
        return any(fnmatch.fnmatchcase(difference, f"{variant}:{s} {rest}")
                   for s in self.scenarios)

    def covers(self, scenario: str) -> bool:
        """Whether this pattern is written for `scenario` (in some variant)."""
        return any(fnmatch.fnmatchcase(scenario, s) for s in self.scenarios)


_ONE = r"[a-z][a-z0-9_]*(/[^\s,{}]*)?"
SCOPE = re.compile(rf"^((default|shipped|\*):({_ONE}|\{{{_ONE}(,{_ONE})+\}})|shipped:\*) "
                   r"\S.*: .+$")
"""A pattern's scope: the variant (or `*` for both), then the scenario's test named without
a wildcard (its parameter after a `/`, globs allowed), or several in braces, then a step and
the difference. What a shipped flag changes in every scenario (`--fallback-to-logs-on-error`
in every pod) is scoped `shipped:*`: the shipped run, any scenario."""


def parse(table: str) -> list[Pattern]:
    """The patterns of a differences table (its last column's code spans); a pattern
    without a scope is a ValueError naming it."""
    out = []
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) < 3 or set(cells[0]) <= {"-", " ", ":"}:
            continue
        for text in re.findall(r"`([^`]+)`", cells[-1]):
            optional = text.startswith("?")
            text = text.removeprefix("?")
            if not SCOPE.match(text):
                raise ValueError(f"pattern `{text}` does not name its scope as "
                                 f"VARIANT:SCENARIO STEP: (row: {cells[0][:60]})")
            out.append(Pattern(text, cells[0], optional))
    return out


@cache
def patterns() -> list[Pattern]:
    """The patterns of the README's differences table (its "seen as" column), read once a
    run (every compare needs them)."""
    text = README.read_text()
    start = text.index("### Differences from training-operator v1.9.4")
    return parse(text[start:text.index("\n## ", start)])


def undocumented(found: list[str], known: list[Pattern]) -> list[str]:
    """The differences of `found` that no pattern covers."""
    return [d for d in found if not any(p.matches(d) for p in known)]


class Ledger:
    """Which scenarios compared, and which patterns their differences matched, in a run of
    the scenarios `owns` says are its own (the API-server suite's, or the real node's)."""

    def __init__(self, owns: Callable[[str], bool], every_scenario: bool) -> None:
        """`every_scenario`: whether this run judges the patterns written for every
        scenario (`shipped:*`)."""
        self.owns = owns
        self.every_scenario = every_scenario
        self.ran: set[str] = set()
        self.matched: set[str] = set()

    def record(self, scenario: str, found: list[str], known: list[Pattern]) -> None:
        self.ran.add(scenario)
        self.matched.update(p.text for p in known if any(p.matches(d) for d in found))

    def stale(self, known: list[Pattern]) -> list[str]:
        """The patterns written for a scenario that ran that matched nothing in it. One
        written for every scenario (`shipped:*`) is judged only in a full run: one in which
        every scenario that a pattern names ran."""
        named = {s for p in known for s in p.scenarios if s != "*" and self.owns(s)}
        full = self.every_scenario and all(
            any(fnmatch.fnmatchcase(r, s) for r in self.ran) for s in named)
        return [f"{p.text} (row: {p.row[:60]}...)" for p in known
                if not p.optional and p.text not in self.matched
                and (full if p.scenarios == ["*"] else any(p.covers(s) for s in self.ran))]


NODE_SCENARIOS = "on_the_node_"
"""How the scenarios of the real node (tests/node/test_beside_upstream.py) are named: the
node suite runs them, in its own pytest run."""
LEDGER = Ledger(lambda scenario: not scenario.startswith(NODE_SCENARIOS), every_scenario=True)


def scenario_of(test_name: str) -> str:
    """A test's scenario name: `test_a_job[MPIJob]` -> `a_job/MPIJob`."""
    name = test_name.removeprefix("test_")
    return name.replace("[", "/", 1).removesuffix("]")


def check(sides: Sides, found: list[str], ledger: Ledger) -> None:
    """Fails on a difference the README's table does not cover; tells `ledger` which
    patterns this scenario's differences matched (with TRAINOP_DIFF_REPORT, writes them all
    to that file instead)."""
    if REPORT:
        with open(REPORT, "a") as out:
            out.writelines(f"{line}\n" for line in found)
        return
    known = patterns()
    ledger.record(sides.scenario, found, known)
    missing = undocumented(found, known)
    assert not missing, "differences from upstream not in the README's table:\n" + "\n".join(
        missing)
