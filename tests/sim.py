"""A tiny in-memory cluster for engine tests: apply plans, move pods between phases."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from trainop.api import Job
from trainop.engine import (
    BatchJob,
    ClusterAddressing,
    EngineConfig,
    Held,
    Observed,
    OwnedObject,
    Plan,
    PodState,
    SSHKeyPair,
    clock,
    inplace,
    reconcile,
)
from trainop.engine.labels import replica_of, replica_type_of
from trainop.engine.objects import content_of
from trainop.engine.observed import InPlace, NodeState, Reported
from trainop.frameworks import framework_of

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
KEY = SSHKeyPair("PRIVATE", "PUBLIC")
SUPERVISOR_KEY = "c3VwZXJ2aXNvci1rZXktb2YtdGhlLXNpbXVsYXRlZC1jbHVzdGVy"
"""The key the simulated runtime offers a job whose ranks run under the supervisor."""


class Cluster:
    """Holds one job, its objects and the clock; `step()` reconciles and applies."""

    def __init__(self, job: Job, config: EngineConfig | None = None, now: dt.datetime = T0,
                 addr: ClusterAddressing | None = None):
        self.job = job
        self.config = config or EngineConfig()
        self.addr = addr or ClusterAddressing()
        self.now = now
        self.pods: dict[str, PodState] = {}
        self.objects: dict[tuple[str, str], OwnedObject] = {}
        self.created: dict[str, dict[str, Any]] = {}
        self.deleted_job = False
        self.plans: list[Plan] = []
        self.held: tuple[Held, ...] = ()
        """Names other jobs' objects hold (the runtime finds them in its caches)."""
        self.in_place = InPlaceKubelet(self)
        self.lost_nodes: tuple[NodeState, ...] = ()
        """Nodes that stopped reporting: a pod on one is not gone when deleted, only
        Terminating (no kubelet confirms), unless deleted with grace 0."""
        self.reclaimed: tuple[tuple[str, int], ...] = ()
        """What the job's Workload gave back to Kueue as done, by pod set."""
        self.reports: dict[str, Reported] = {}
        """The latest progress report heard of each pod."""

    @property
    def observed(self) -> Observed:
        return Observed(pods=tuple(self.pods.values()), objects=tuple(self.objects.values()),
                        ssh_key=KEY, supervisor_key=SUPERVISOR_KEY, held=self.held,
                        lost_nodes=self.lost_nodes, reclaimed=self.reclaimed,
                        reports=tuple(self.reports.values()))

    def plan(self) -> Plan:
        return reconcile(self.job, self.observed, self.now, framework_of(self.job),
                         self.addr, self.config)

    def step(self) -> Plan:
        plan = self.plan()
        self.apply(plan)
        return plan

    def apply(self, plan: Plan) -> None:
        self.plans.append(plan)
        for ref in plan.delete:
            pod = self.pods.get(ref.name) if ref.kind == "Pod" else None
            if pod is not None and ref.grace != 0 and \
                    pod.node in {n.name for n in self.lost_nodes}:
                self.pods[ref.name] = dataclasses.replace(pod, terminating=True)
            elif ref.kind == "Pod":
                self.pods.pop(ref.name, None)
                self.in_place.pods.pop(ref.name, None)
            else:
                self.objects.pop((ref.kind, ref.name), None)
        for obj in plan.update:
            meta = obj["metadata"]
            if obj["kind"] == "Job":  # patched: suspended or resumed
                self.set_job(meta["name"], suspended=bool(obj["spec"]["suspend"]))
            elif obj["kind"] == "Pod":  # told its attempts (engine/inplace.py)
                self.in_place.tell(meta["name"], meta["annotations"])
            else:
                self.created[f"{obj['kind']}/{meta['name']}"] = obj
                key = (obj["kind"], meta["name"])  # what else it says (a phase) stays
                self.objects[key] = dataclasses.replace(
                    self.objects[key], content=content_of(obj["kind"], obj))
        for obj in plan.to_create:
            meta = obj["metadata"]
            self.created[f"{obj['kind']}/{meta['name']}"] = obj
            if obj["kind"] == "Pod":
                replica = replica_of(meta["labels"], meta["name"])
                rtype = replica_type_of(self.job, replica[0]) if replica else None
                assert replica is not None and rtype is not None
                self.pods[meta["name"]] = PodState(meta["name"], rtype, replica[1],
                                                   created=clock.fmt(self.now))
                self.in_place.made(meta["name"], meta.get("annotations") or {})
            else:
                content = content_of(obj["kind"], obj)
                self.objects[(obj["kind"], meta["name"])] = OwnedObject(
                    obj["kind"], meta["name"], content=content,
                    job=BatchJob(suspended=bool(obj["spec"].get("suspend")))
                    if obj["kind"] == "Job" else None)
        self.job = self.job.model_copy(update={"status": plan.status})
        self.deleted_job = self.deleted_job or plan.delete_job

    def set_job(self, name: str, **changes: Any) -> None:
        """Change what a batch/v1 Job of the job's says (as its controller would)."""
        seen = self.objects[("Job", name)]
        assert seen.job is not None
        state = dataclasses.replace(seen.job, **changes)
        self.objects[("Job", name)] = dataclasses.replace(
            seen, job=state, content=content_of("Job", {"spec": {"suspend": state.suspended}}))

    def set(self, name: str, **changes: Any) -> None:
        self.pods[name] = dataclasses.replace(self.pods[name], **changes)
        if name in self.in_place.pods:  # what its kubelet reports now
            self.in_place.overridden(name, self.pods[name])

    def all(self, phase: str, rtype: str | None = None, **changes: Any) -> None:
        for name, pod in list(self.pods.items()):
            if rtype is None or pod.replica_type == rtype:
                self.set(name, phase=phase, **changes)

    def advance(self, seconds: float) -> None:
        self.now += dt.timedelta(seconds=seconds)

    def condition(self, ctype: str) -> Any:
        for c in (self.job.status.conditions if self.job.status else None) or []:
            if c.type == ctype:
                return c
        return None

    def last_condition(self) -> str:
        assert self.job.status and self.job.status.conditions
        return self.job.status.conditions[-1].type

    def pod(self, name: str) -> dict[str, Any]:
        """Pod `name` as made, or as the template of the Job of that name."""
        if f"Pod/{name}" not in self.created and f"Job/{name}" in self.created:
            template = self.created[f"Job/{name}"]["spec"]["template"]
            return {"metadata": {**template["metadata"], "name": name},
                    "spec": template["spec"]}
        return self.created[f"Pod/{name}"]

    def env(self, name: str, container: int = 0) -> dict[str, Any]:
        """Name -> value (or the `valueFrom` of a variable the kubelet fills in)."""
        c = self.pod(name)["spec"]["containers"][container]
        return {e["name"]: e["value"] if "value" in e else e["valueFrom"]
                for e in c.get("env", [])}


@dataclasses.dataclass
class InPlacePod:
    """A pod made to restart in place (engine/inplace.py) as its kubelet runs it: what its
    annotations tell and what its files show (written again a moment after: `refresh`),
    its barrier, main container and agent, and what the kubelet last reported of them."""

    told: tuple[int, int, bool]
    """(attempt, released, finish) as the annotations say."""
    files: tuple[int, int, bool]
    barrier: bool = True
    """The barrier runs (the pod's other containers wait)."""
    mains: int | None = None
    """The attempt its main container runs (None: it does not run)."""
    main_exit: int | None = None
    """How its main container ended, where it did (and the pod was not restarted since)."""
    agent: int | None = None
    """The attempt the agent watches, while it runs."""
    ended: str | None = None
    """The pod's phase once it ended (Succeeded, Failed)."""
    node_restarts: bool = True
    """Its kubelet restarts it as the agent's rule says (False: it ignores the rule)."""
    rules_kept: bool = True
    told_at: str | None = None
    """When the manager last told it something (its annotation)."""
    told_again: int = 0
    reported: tuple[PodState, bool, bool, bool] | None = None
    """The pod's status, alive, held, and whether its agent runs: as the kubelet last
    reported them."""

    def restart(self) -> None:
        """RestartAllContainers: every container ends, the barrier starts again."""
        self.barrier, self.mains, self.main_exit, self.agent = True, None, None, None

    def loop(self) -> bool:
        """One turn of the barrier's or the agent's loop; True when something moved."""
        attempt, released, finish = self.files
        if self.ended:
            return False
        if self.barrier:
            if released == attempt:
                self.barrier, self.mains, self.agent = False, attempt, attempt
                return True
            return False
        if self.agent is not None and attempt != self.agent:  # exit 88
            if self.rules_kept and self.node_restarts:
                self.restart()
            else:
                self.agent = None
            return True
        if self.agent is not None and finish:  # exit 0
            self.agent = None
            if self.mains is None:
                self.ended = "Succeeded" if self.main_exit == 0 else "Failed"
            return True
        return False


class InPlaceKubelet:
    """The kubelet and the barriers and agents of a job's pods made to restart in place, one
    step at a time. By default it is prompt: files and status follow every change at once;
    `lagging` leaves them to `refresh` and `report`, as far as a real kubelet's lag goes."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.pods: dict[str, InPlacePod] = {}
        self.lagging = False

    def made(self, name: str, annotations: dict[str, str]) -> None:
        if inplace.ATTEMPT not in annotations:
            return
        told = (int(annotations[inplace.ATTEMPT]), int(annotations[inplace.RELEASED]),
                annotations[inplace.FINISH] == "true")
        self.pods[name] = InPlacePod(told, told)
        if self.lagging:  # nothing reported yet
            self.pods[name].reported = (self.cluster.pods[name], True, False, False)
            self.show(name)
        else:
            self.report(name)

    def tell(self, name: str, annotations: dict[str, str]) -> None:
        """The pod patched (a merge patch of its annotations): the kubelet syncs it."""
        pod = self.pods[name]
        if inplace.ATTEMPT in annotations:  # (else told again what it was told)
            pod.told = (int(annotations[inplace.ATTEMPT]),
                        int(annotations[inplace.RELEASED]),
                        annotations[inplace.FINISH] == "true")
        pod.told_at = annotations.get(inplace.TOLD_AT, pod.told_at)
        pod.told_again = int(annotations.get(inplace.TOLD_AGAIN, pod.told_again))
        if not self.lagging:
            self.settle([name])
        self.show(name)

    def refresh(self, name: str) -> None:
        """The kubelet writes the pod's files again from its annotations."""
        self.pods[name].files = self.pods[name].told

    def fail(self, name: str, code: int) -> None:
        """Pod `name`'s main container ends with `code` (0: it succeeded)."""
        pod = self.pods[name]
        pod.mains, pod.main_exit = None, code
        if pod.agent is None:
            pod.ended = "Succeeded" if code == 0 else "Failed"
        if not self.lagging:
            self.report(name)

    def settle(self, only: list[str] | None = None) -> None:
        """The files of every pod (or of `only`) written again, and its barrier and agent
        looping until nothing moves."""
        for name, pod in self.pods.items():
            if only is None or name in only:
                if not self.lagging:
                    self.refresh(name)
                while pod.loop():
                    pass
                if not self.lagging:
                    self.report(name)

    def running(self) -> dict[str, int]:
        """Pod -> the attempt its main container runs."""
        return {n: p.mains for n, p in self.pods.items()
                if p.mains is not None and n in self.cluster.pods}

    def report(self, name: str) -> None:
        """The kubelet reports the pod's status: the manager's cache shows it."""
        pod = self.pods[name]
        state = self.cluster.pods[name]
        alive = pod.ended is None and (pod.agent is not None or pod.barrier)
        phase = pod.ended or ("Pending" if pod.barrier else "Running")
        if alive and pod.main_exit is not None:  # as the manager reads it: records.py
            phase = "Succeeded" if pod.main_exit == 0 else "Failed"
        pod.reported = (dataclasses.replace(
            state, phase=phase, exit_code=pod.main_exit,
            reason=None if pod.main_exit is None else "Error",
            exit_codes=() if pod.main_exit is None else (("pytorch", pod.main_exit),)),
            alive, pod.barrier and pod.mains is None, alive and pod.agent is not None)
        self.show(name)

    def overridden(self, name: str, state: PodState) -> None:
        """The test sets what the kubelet reports (a pod evicted: it ended)."""
        pod = self.pods[name]
        if state.phase in ("Succeeded", "Failed"):
            pod.ended, pod.mains, pod.agent, pod.barrier = state.phase, None, None, False
        held, agent = pod.reported[2:] if pod.reported else (False, False)
        pod.reported = (state, pod.ended is None, held, agent and pod.ended is None)
        self.show(name)

    def show(self, name: str) -> None:
        """The pod in the manager's cache: its annotations as told, its status as reported."""
        pod = self.pods[name]
        assert pod.reported is not None
        state, alive, held, agent = pod.reported
        self.cluster.pods[name] = dataclasses.replace(state, in_place=InPlace(
            pod.told[0], pod.told[1], pod.told[2], alive=alive, held=held,
            kept_rules=pod.rules_kept, agent_runs=agent, told_at=pod.told_at,
            told_again=pod.told_again))
