"""runPolicy.podFailurePolicy: what one failed pod means, by the Kubernetes Job API's rules
(k8s.io/kubernetes pkg/controller/job/pod_failure_policy.go), plus trainop's RestartJob.

The first rule that matches decides; a pod no rule matches is counted as without a policy.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainop.api.types import (
    PodFailurePolicy,
    PodFailurePolicyOnExitCodes,
    PodFailurePolicyOnPodCondition,
    PodFailurePolicyRule,
)
from trainop.engine.observed import PodState

REASON = "PodFailurePolicy"
"""The Failed condition's reason of a FailJob rule (the Job API's JobReasonPodFailurePolicy)."""

IGNORE_DISRUPTIONS = PodFailurePolicy(rules=[PodFailurePolicyRule(
    action="Ignore",
    on_pod_conditions=[PodFailurePolicyOnPodCondition(type="DisruptionTarget")])])
"""--ignore-disruptions' policy for jobs that set none: a pod the cluster ended (preempted,
evicted, its node drained or shut down: the DisruptionTarget condition) is made again."""


@dataclass(frozen=True)
class Match:
    action: str
    index: int
    """The rule's index in the policy."""
    why: str
    """The Job API's words: `Container c for pod ns/p failed with exit code 3 matching
    FailJob rule at index 0`, `Pod ns/p has condition DisruptionTarget matching ...`."""


def match(policy: PodFailurePolicy | None, namespace: str, pod: PodState) -> Match | None:
    """The rule of `policy` that decides for failed `pod`, or None (counted as usual)."""
    if policy is None:
        return None
    for index, rule in enumerate(policy.rules):
        if rule.on_exit_codes is not None:
            hit = _exit_code(rule.on_exit_codes, pod)
            if hit is not None:
                name, code = hit
                return Match(rule.action, index, f"Container {name} for pod {namespace}/"
                             f"{pod.name} failed with exit code {code} matching "
                             f"{rule.action} rule at index {index}")
        elif rule.on_pod_conditions:
            ctype = _condition(rule.on_pod_conditions, pod)
            if ctype is not None:
                return Match(rule.action, index, f"Pod {namespace}/{pod.name} has condition "
                             f"{ctype} matching {rule.action} rule at index {index}")
    return None


def _exit_code(req: PodFailurePolicyOnExitCodes, pod: PodState) -> tuple[str, int] | None:
    # containers, then init containers; 0 never matches (a container that succeeded)
    for name, code in pod.exit_codes:
        if code == 0 or (req.container_name is not None and req.container_name != name):
            continue
        if (code in req.values) == (req.operator == "In"):
            return name, code
    return None


def _condition(patterns: list[PodFailurePolicyOnPodCondition], pod: PodState) -> str | None:
    for ctype, status in pod.conditions:
        if any(p.type == ctype and p.status == status for p in patterns):
            return ctype
    return None
