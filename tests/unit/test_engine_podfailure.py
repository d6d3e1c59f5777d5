"""runPolicy.podFailurePolicy and --ignore-disruptions: failures that are the cluster's do
not spend the job's retries; the Job API's rules decide, in its words."""

from __future__ import annotations

from typing import Any

import pytest

from tests.jobs import job, manifest
from tests.sim import Cluster
from trainop.api import InvalidJob, load_job
from trainop.engine import EngineConfig, Phase
from trainop.engine import conditions as cond

DISRUPTED = (("DisruptionTarget", "True"), ("Ready", "False"))
IGNORE_DISRUPTION = {"action": "Ignore",
                     "onPodConditions": [{"type": "DisruptionTarget"}]}


def running(rules: list[dict[str, Any]] | None, restart: str = "Never",
            config: EngineConfig | None = None, **run_policy: Any) -> Cluster:
    rp = {**run_policy, **({"podFailurePolicy": {"rules": rules}} if rules else {})}
    c = Cluster(job("PyTorchJob", {"Master": 1, "Worker": 2}, spec={"runPolicy": rp},
                    replica_extra={rt: {"restartPolicy": restart} for rt in ("Master", "Worker")}),
                config=config)
    c.step()
    c.all(Phase.RUNNING)
    c.step()
    return c


def deleted(c: Cluster) -> list[str]:
    return sorted(r.name for r in c.plans[-1].delete if r.kind == "Pod")


def test_an_ignored_disruption_remakes_the_pod_and_counts_nowhere() -> None:
    c = running([IGNORE_DISRUPTION], backoffLimit=0)
    # evicted: a Never pod that would fail the job, past a backoffLimit of 0
    c.set("job-worker-1", phase=Phase.FAILED, exit_code=137, reason="Evicted",
          conditions=DISRUPTED)
    plan = c.step()
    assert not cond.is_finished(c.job.status)
    assert deleted(c) == ["job-worker-1"]
    assert c.condition(cond.RESTARTING) is None
    assert c.job.status is not None and c.job.status.replica_statuses is not None
    assert c.job.status.replica_statuses["Worker"].restarts is None
    assert plan.metrics.get("restarted", 0) == 0
    assert [(e.type, e.reason, e.message) for e in plan.events] == [(
        "Normal", "PodFailurePolicy", "Pod default/job-worker-1 has condition "
        "DisruptionTarget matching Ignore rule at index 0: the pod is made again, not counted")]
    # it is made again once gone, and the job goes on
    plan = c.step()
    assert [o["metadata"]["name"] for o in plan.to_create if o["kind"] == "Pod"] == ["job-worker-1"]


def test_without_a_policy_the_same_eviction_fails_the_job() -> None:
    c = running(None)
    c.set("job-worker-1", phase=Phase.FAILED, exit_code=137, reason="Evicted",
          conditions=DISRUPTED)
    c.step()
    assert c.condition(cond.FAILED).reason == "PyTorchJobFailed"


def test_the_managers_flag_ignores_disruptions_of_jobs_without_a_policy() -> None:
    c = running(None, config=EngineConfig(ignore_disruptions=True))
    c.set("job-worker-1", phase=Phase.FAILED, exit_code=137, conditions=DISRUPTED)
    c.step()
    assert not cond.is_finished(c.job.status) and deleted(c) == ["job-worker-1"]
    # a job's own policy comes first: here it counts disruptions
    c = running([{"action": "Count", "onPodConditions": [{"type": "DisruptionTarget"}]}],
                config=EngineConfig(ignore_disruptions=True))
    c.set("job-worker-1", phase=Phase.FAILED, exit_code=137, conditions=DISRUPTED)
    c.step()
    assert c.condition(cond.FAILED).reason == "PyTorchJobFailed"


def test_fail_job_on_an_exit_code_fails_at_once_in_the_job_apis_words() -> None:
    rules = [{"action": "FailJob", "onExitCodes": {"containerName": "pytorch",
                                                   "operator": "In", "values": [42]}}]
    c = running(rules, restart="ExitCode", backoffLimit=10)  # 42: PyTorchJobFailed without
    c.set("job-worker-0", phase=Phase.FAILED, exit_code=42,
          exit_codes=(("sidecar", 0), ("pytorch", 42)))
    plan = c.step()
    failed = c.condition(cond.FAILED)
    assert (failed.reason, failed.message) == (
        "PodFailurePolicy", "Container pytorch for pod default/job-worker-0 failed with exit "
        "code 42 matching FailJob rule at index 0")
    assert ("Warning", "PodFailurePolicy", failed.message) in [
        (e.type, e.reason, e.message) for e in plan.events]
    assert plan.metrics.get("failed") == 1


@pytest.mark.parametrize(("codes", "action"), [
    ((("pytorch", 3),), "FailJob"),      # NotIn [1, 2]: 3 matches
    ((("pytorch", 1),), None),           # 1 is in the list: no match, counted as usual
    ((("pytorch", 0), ("init", 3)), "FailJob"),  # an init container's code counts
    ((("pytorch", 0),), None),           # 0 never matches
])
def test_not_in_matches_every_other_code_but_0(codes: tuple[tuple[str, int], ...],
                                               action: str | None) -> None:
    from trainop.api.types import PodFailurePolicy
    from trainop.engine import PodState
    from trainop.engine.podfailure import match
    policy = PodFailurePolicy.model_validate({"rules": [
        {"action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": [1, 2]}}]})
    pod = PodState("p", "Worker", 0, phase=Phase.FAILED, exit_codes=codes)
    found = match(policy, "ns", pod)
    assert (found.action if found else None) == action


def test_restart_job_restarts_every_replica_and_counts_once() -> None:
    rules = [{"action": "RestartJob", "onExitCodes": {"operator": "In", "values": [75]}}]
    c = running(rules, backoffLimit=3)
    c.set("job-worker-1", phase=Phase.FAILED, exit_code=75, exit_codes=(("pytorch", 75),))
    c.step()
    assert deleted(c) == ["job-master-0", "job-worker-0", "job-worker-1"]
    assert c.job.status is not None and c.job.status.replica_statuses is not None
    assert c.job.status.replica_statuses["Worker"].restarts == 1
    assert "all replicas restart" in c.condition(cond.RESTARTING).message


def test_the_first_matching_rule_decides() -> None:
    rules = [{"action": "Count", "onExitCodes": {"operator": "In", "values": [137]}},
             IGNORE_DISRUPTION]
    c = running(rules)
    c.set("job-worker-1", phase=Phase.FAILED, exit_code=137, exit_codes=(("pytorch", 137),),
          conditions=DISRUPTED)
    c.step()
    assert c.condition(cond.FAILED).reason == "PyTorchJobFailed"  # counted: Never fails it


@pytest.mark.parametrize(("rule", "problem"), [
    ({"action": "Ignore"}, "rules[0]: must have one of onExitCodes and onPodConditions"),
    ({"action": "Ignore", "onExitCodes": {"operator": "In", "values": [2, 1]},
      "onPodConditions": [{"type": "DisruptionTarget"}]},
     "rules[0]: must have one of onExitCodes and onPodConditions"),
    ({"action": "FailJob", "onExitCodes": {"operator": "In", "values": [2, 1]}},
     "rules[0].onExitCodes.values: must be ordered and unique, got [2, 1]"),
    ({"action": "FailJob", "onExitCodes": {"operator": "In", "values": [0, 1]}},
     "rules[0].onExitCodes.values: must not hold 0 for the In operator"),
    ({"action": "FailJob", "onExitCodes": {"operator": "In", "values": []}},
     "rules[0].onExitCodes.values: must have 1 to 255 exit codes, got 0"),
    ({"action": "FailJob", "onExitCodes": {"containerName": "nope", "operator": "In",
                                           "values": [1]}},
     "rules[0].onExitCodes.containerName: must be one of the containers of the pod "
     "templates, got 'nope'"),
    ({"action": "Ignore", "onPodConditions": [{"type": "not a type"}]},
     "rules[0].onPodConditions[0].type: must be a condition type, got 'not a type'"),
    ({"action": "FailJob", "onExitCodes": {"operator": "In", "values": [1]}, "_policy":
      "OnFailure"}, "rules[0].onExitCodes: cannot match: the kubelet restarts Master in "
     "place (restartPolicy OnFailure or Always), so no exit code fails a pod; use Never or "
     "ExitCode"),
    ({"action": "Drop", "onPodConditions": [{"type": "DisruptionTarget"}]},
     "rules[0].action: must be one of 'FailJob', 'Ignore', 'Count', 'RestartJob'"),
])
def test_a_policy_the_job_api_would_refuse_is_refused(rule: dict[str, Any],
                                                      problem: str) -> None:
    policy = rule.pop("_policy", "Never")
    with pytest.raises(InvalidJob) as err:
        load_job(manifest("PyTorchJob", {"Master": 1},
                          spec={"runPolicy": {"podFailurePolicy": {"rules": [rule]}}},
                          replica_extra={"Master": {"restartPolicy": policy}}))
    assert f"spec.runPolicy.podFailurePolicy.{problem}" in str(err.value)


EXIT_3_IN = {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [3]}}
MAIN_ONLY = {"action": "FailJob", "onExitCodes": {"containerName": "pytorch",
                                                  "operator": "In", "values": [3]}}
NOT_READY = {"action": "Ignore", "onPodConditions": [{"type": "Ready", "status": "False"}]}


@pytest.mark.parametrize(("rules", "codes", "conditions", "expected"), [
    # k8s.io/kubernetes pkg/controller/job/pod_failure_policy.go, branch by branch
    ([], (("pytorch", 3),), (), None),                             # no rule: counted
    ([EXIT_3_IN], (("pytorch", 3),), (), ("FailJob", 0, "pytorch")),  # In: listed code
    ([EXIT_3_IN], (("pytorch", 4),), (), None),                    # In: another code
    ([MAIN_ONLY], (("sidecar", 3),), (), None),                    # containerName: not it
    ([MAIN_ONLY], (("sidecar", 3), ("pytorch", 3)), (), ("FailJob", 0, "pytorch")),
    ([EXIT_3_IN], (("sidecar", 3), ("pytorch", 3)), (), ("FailJob", 0, "sidecar")),  # first
    ([IGNORE_DISRUPTION], (), (("DisruptionTarget", "True"),), ("Ignore", 0, None)),
    ([IGNORE_DISRUPTION], (), (("DisruptionTarget", "False"),), None),  # status defaults True
    ([NOT_READY], (), (("Ready", "False"),), ("Ignore", 0, None)),  # a status it names
    ([NOT_READY], (), (("Ready", "True"),), None),
    ([EXIT_3_IN, IGNORE_DISRUPTION], (("pytorch", 4),), DISRUPTED, ("Ignore", 1, None)),
    ([IGNORE_DISRUPTION, EXIT_3_IN], (("pytorch", 3),), DISRUPTED, ("Ignore", 0, None)),
], ids=["no-rule", "in", "in-other", "other-container", "named-container", "first-container",
        "condition", "condition-false", "condition-status", "condition-other-status",
        "falls-through", "first-rule"])
def test_match_branch_by_branch(rules: list[dict[str, Any]],
                                codes: tuple[tuple[str, int], ...],
                                conditions: tuple[tuple[str, str], ...],
                                expected: tuple[str, int, str | None] | None) -> None:
    from trainop.api.types import PodFailurePolicy
    from trainop.engine import PodState
    from trainop.engine.podfailure import match
    policy = PodFailurePolicy.model_validate({"rules": rules})
    pod = PodState("p", "Worker", 0, phase=Phase.FAILED, exit_codes=codes,
                   conditions=conditions)
    found = match(policy, "ns", pod)
    if expected is None:
        assert found is None
        return
    action, index, container = expected
    assert found is not None and (found.action, found.index) == (action, index)
    if container:
        assert found.why == (f"Container {container} for pod ns/p failed with exit code 3 "
                             f"matching {action} rule at index {index}")
    else:
        ctype = conditions[0][0]
        assert found.why == (f"Pod ns/p has condition {ctype} matching {action} rule at "
                             f"index {index}")
