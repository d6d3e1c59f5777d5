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
    reconcile,
)
from trainop.engine.labels import replica_of, replica_type_of
from trainop.engine.objects import content_of
from trainop.frameworks import framework_for

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
KEY = SSHKeyPair("PRIVATE", "PUBLIC")


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

    @property
    def observed(self) -> Observed:
        return Observed(pods=tuple(self.pods.values()), objects=tuple(self.objects.values()),
                        ssh_key=KEY, held=self.held)

    def plan(self) -> Plan:
        return reconcile(self.job, self.observed, self.now, framework_for(self.job.kind),
                         self.addr, self.config)

    def step(self) -> Plan:
        plan = self.plan()
        self.apply(plan)
        return plan

    def apply(self, plan: Plan) -> None:
        self.plans.append(plan)
        for ref in plan.delete:
            if ref.kind == "Pod":
                self.pods.pop(ref.name, None)
            else:
                self.objects.pop((ref.kind, ref.name), None)
        for obj in plan.update:
            meta = obj["metadata"]
            if obj["kind"] == "Job":  # patched: suspended or resumed
                self.set_job(meta["name"], suspended=bool(obj["spec"]["suspend"]))
            else:
                self.created[f"{obj['kind']}/{meta['name']}"] = obj
                self.objects[(obj["kind"], meta["name"])] = OwnedObject(
                    obj["kind"], meta["name"], content=content_of(obj["kind"], obj))
        for obj in plan.to_create:
            meta = obj["metadata"]
            self.created[f"{obj['kind']}/{meta['name']}"] = obj
            if obj["kind"] == "Pod":
                replica = replica_of(meta["labels"], meta["name"])
                rtype = replica_type_of(self.job, replica[0]) if replica else None
                assert replica is not None and rtype is not None
                self.pods[meta["name"]] = PodState(meta["name"], rtype, replica[1],
                                                   created=clock.fmt(self.now))
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
