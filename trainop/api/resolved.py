"""A defaulted job's settled facts: one typed view that every reader of a job uses.

Defaulting (trainop.api.defaults) decides every default once; the engine, the frameworks,
the local runtime and `describe` read the outcome here, where nothing is optional any
more: how many replicas each type has, which types are present (one meaning: a type with at
least one replica; validation refuses a leader of none), the leader, each replica's restart
policy as its pod gets it, and every (type, index). A job that was not defaulted is a bug of
its caller, said as model.NotDefaulted, never guessed over.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from trainop.api import templates
from trainop.api.model import settled
from trainop.api.types import Defaulted, RunPolicy


@dataclass(frozen=True)
class Resolved:
    """The replica facts of one defaulted job."""

    replicas: Mapping[str, int]
    """Every replica type the spec gives, in the spec's order, and its number of replicas
    (0 included: TF_CONFIG and MX_CONFIG list such a type, with no address)."""
    restart_policies: Mapping[str, str]
    """Each replica type's restartPolicy as the spec has it (ExitCode included)."""
    leader: str
    """The replica type whose pods make the job Running and are labelled job-role=master:
    the first present type of the kind's master role, else Worker."""
    master_role: tuple[str, ...]
    """The kind's replica types labelled job-role=master (KindInfo.master_role)."""
    led_by_worker_0: bool
    """No master-role type is present and the kind then makes worker 0 its master."""
    whole_job_restarts: bool
    """runPolicy.restartScope Job: trainop restarts the replicas, never the kubelet."""
    in_place: bool | None
    """runPolicy.restartInPlace as written (None: the manager's --restart-in-place
    decides)."""
    template_restarts_all: bool
    """A template's container restarts every container of its pod itself
    (restartPolicyRules RestartAllContainers)."""

    def restarts_in_place(self, flag: bool) -> bool:
        """Whether the job's whole-job restarts are to be in place, where the cluster can,
        `flag` being the manager's --restart-in-place: as the job says where it says, else
        as the flag says, but never for a job whose template restarts its pods itself
        (validation refuses the field on such a job)."""
        if not self.whole_job_restarts:
            return False
        if self.in_place is not None:
            return self.in_place
        return flag and not self.template_restarts_all

    def replicas_of(self, rtype: str) -> int:
        """Replicas of `rtype` (0 where the spec has no such type)."""
        return self.replicas.get(rtype, 0)

    def present(self, rtype: str) -> bool:
        """Whether the job has a replica of `rtype`."""
        return self.replicas_of(rtype) > 0

    @property
    def total(self) -> int:
        return sum(self.replicas.values())

    def slots(self) -> Iterator[tuple[str, int]]:
        """Every (type, index) of the job, types in the spec's order."""
        for rtype, n in self.replicas.items():
            for index in range(n):
                yield rtype, index

    def in_spec(self, rtype: str, index: int) -> bool:
        """Whether replica `index` of `rtype` is one the spec asks for (not scaled away)."""
        return 0 <= index < self.replicas_of(rtype)

    def is_master(self, rtype: str, index: int) -> bool:
        """Whether the replica is labelled job-role=master (upstream's IsMasterRole)."""
        if self.led_by_worker_0:
            return rtype == "Worker" and index == 0
        return rtype in self.master_role

    def pod_restart_policy(self, rtype: str) -> str:
        """The pod's restartPolicy: ExitCode and job-wide restarts leave restarts to
        trainop (the kubelet never restarts such a pod's containers)."""
        policy = self.restart_policies[rtype]
        if policy == "ExitCode" or self.whole_job_restarts:
            return "Never"
        return policy


def resolve(job: Defaulted) -> Resolved:
    """The settled facts of `job`, which must be defaulted (else NotDefaulted)."""
    specs = job.spec.replica_specs
    field = f"{job.kind} {job.key}: spec.{job.info.replica_specs_field}"
    replicas = {rt: settled(r.replicas, f"{field}[{rt}].replicas") for rt, r in specs.items()}
    master = job.info.master_role
    lead = next((rt for rt in master if replicas.get(rt, 0) > 0), None)
    return Resolved(
        replicas=replicas,
        restart_policies={rt: settled(r.restart_policy, f"{field}[{rt}].restartPolicy")
                          for rt, r in specs.items()},
        leader=lead or "Worker",
        master_role=master,
        led_by_worker_0=lead is None and job.info.worker0_is_master,
        whole_job_restarts=job.spec.run_policy.restart_scope == "Job",
        in_place=job.spec.run_policy.restart_in_place,
        template_restarts_all=any(templates.restarting_all(r.template) is not None
                                  for r in specs.values()),
    )


def restarts_every_replica(rp: RunPolicy) -> bool:
    """Whether a rule of the run policy may run every replica again together, those that
    succeeded too: restartScope Job, or a podFailurePolicy rule RestartJob. (Neither field
    has a default: the stored job's policy is the effective one.)"""
    return rp.restart_scope == "Job" or (rp.pod_failure_policy is not None and any(
        rule.action == "RestartJob" for rule in rp.pod_failure_policy.rules))
