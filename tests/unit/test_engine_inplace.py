"""Whole-job restarts in place (engine/inplace.py): the pods as made, the attempts told,
and the barrier, on the in-memory cluster whose kubelet runs the barrier, the agent and the
main container as their scripts and rules say (tests/sim.py: InPlaceKubelet)."""

from __future__ import annotations

import copy
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.jobs import job, manifest
from tests.sim import Cluster
from trainop.api.validation import InvalidJob, load_job
from trainop.cluster.reading.records import pod_record
from trainop.engine import EngineConfig, inplace
from trainop.engine.inplace import ATTEMPT, FINISH, RELEASED
from trainop.engine.observed import InPlace, PodState

IN_PLACE = {"runPolicy": {"restartScope": "Job", "restartInPlace": True, "backoffLimit": 5}}
EXIT_CODE = {rt: {"restartPolicy": "ExitCode"} for rt in ("Master", "Worker")}
PODS = ["job-master-0", "job-worker-0", "job-worker-1"]


def started(spec: dict[str, Any] | None = None, **kw: Any) -> Cluster:
    """A PyTorchJob restarting in place, its three pods running attempt 0."""
    c = Cluster(job("PyTorchJob", spec=spec or IN_PLACE, replica_extra=EXIT_CODE), **kw)
    c.step()
    c.in_place.settle()
    c.step()
    assert c.in_place.running() == dict.fromkeys(PODS, 0)
    return c


def told_lagging(name: str) -> Cluster:
    """`started`, then `name` fails and the next attempt is told, the pods' files lagging."""
    c = started()
    c.in_place.lagging = True
    c.in_place.fail(name, 137)
    c.in_place.report(name)
    c.step()
    return c


def caught_up(c: Cluster, *names: str) -> None:
    """The kubelet writes the files of pods `names` again, they act on them, and it reports
    them."""
    for name in names:
        c.in_place.refresh(name)
        c.in_place.settle([name])
        c.in_place.report(name)


def told(plan: Any) -> dict[str, tuple[str, str]]:
    """Pod -> the (attempt, released) a plan tells it."""
    return {o["metadata"]["name"]: (o["metadata"]["annotations"][ATTEMPT],
                                    o["metadata"]["annotations"][RELEASED])
            for o in plan.update if o["kind"] == "Pod" and ATTEMPT in o["metadata"]["annotations"]}


def told_again(plan: Any) -> list[str]:
    """The pods a plan tells again what they were told."""
    return sorted(o["metadata"]["name"] for o in plan.update if o["kind"] == "Pod"
                  and ATTEMPT not in o["metadata"]["annotations"])


def finished(plan: Any) -> list[str]:
    """The pods a plan tells to finish."""
    return sorted(o["metadata"]["name"] for o in plan.update
                  if o["kind"] == "Pod" and o["metadata"]["annotations"].get(FINISH) == "true")


def reasons(plan: Any) -> list[str]:
    return [e.reason for e in plan.events]


def one_attempt(c: Cluster) -> None:
    assert len(set(c.in_place.running().values())) <= 1, c.in_place.running()


# -- the pods as made ----------------------------------------------------------------------

def test_a_pod_that_restarts_in_place_is_made_with_its_barrier_agent_and_files() -> None:
    template_rule = {"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}
    extra = {rt: {"restartPolicy": "ExitCode", "template": {"spec": {
        "initContainers": [{"name": "fetch", "image": "busybox"}],
        "containers": [{"name": "pytorch", "image": "trainer", "restartPolicy": "Never",
                        "restartPolicyRules": [template_rule]},
                       {"name": "logs", "image": "shipper"}]}}}
        for rt in ("Master", "Worker")}
    c = Cluster(job("PyTorchJob", spec=IN_PLACE, replica_extra=extra))
    c.step()
    pod = c.pod("job-worker-1")
    assert {k: v for k, v in pod["metadata"]["annotations"].items()
            if k.startswith("trainop")} == {ATTEMPT: "0", RELEASED: "0", FINISH: "false"}
    spec = pod["spec"]
    # the barrier first: it holds the template's init containers too
    assert [i["name"] for i in spec["initContainers"]] == [
        inplace.BARRIER, "fetch", "init-pytorch"]
    assert [c["name"] for c in spec["containers"]] == ["pytorch", "logs", inplace.AGENT]
    agent = spec["containers"][-1]
    assert agent["restartPolicy"] == "Never"
    assert agent["restartPolicyRules"] == [inplace.RESTART_POD]
    assert agent["image"] == EngineConfig().restart_agent_image
    # the template's containers as written: a main container that fails stays ended
    assert spec["containers"][0]["restartPolicyRules"] == [template_rule]
    assert "restartPolicyRules" not in spec["containers"][1]
    assert spec["restartPolicy"] == "Never"
    volumes = {v["name"]: v for v in spec["volumes"]}
    paths = {i["path"]: i["fieldRef"]["fieldPath"]
             for i in volumes[inplace.FILES]["downwardAPI"]["items"]}
    assert paths == {"attempt": f"metadata.annotations['{ATTEMPT}']",
                     "released": f"metadata.annotations['{RELEASED}']",
                     "finish": f"metadata.annotations['{FINISH}']"}
    assert "emptyDir" in volumes[inplace.STATE]


@pytest.mark.parametrize(("run_policy", "flag", "in_place"), [
    ({"restartScope": "Job", "restartInPlace": True}, False, True),
    ({"restartScope": "Job"}, True, True),
    ({"restartScope": "Job"}, False, False),  # upstream's behaviour by default
    ({"restartScope": "Job", "restartInPlace": False}, True, False),  # the job's word wins
    ({}, True, False),  # only a whole-job restart restarts in place
], ids=["field", "flag", "neither", "field-off-flag-on", "replica-scope"])
def test_who_restarts_in_place(run_policy: dict[str, Any], flag: bool, in_place: bool) -> None:
    c = Cluster(job("PyTorchJob", spec={"runPolicy": run_policy}),
                EngineConfig(restart_in_place=flag))
    c.step()
    pod = c.pod("job-worker-0")
    assert (ATTEMPT in (pod["metadata"].get("annotations") or {})) is in_place
    assert any(i["name"] == inplace.AGENT for i in pod["spec"]["containers"]) is in_place


def test_restart_in_place_without_a_whole_job_restart_is_refused() -> None:
    with pytest.raises(InvalidJob) as err:
        load_job(manifest("PyTorchJob", {"Master": 1},
                          spec={"runPolicy": {"restartInPlace": True}}))
    assert "spec.runPolicy.restartInPlace: needs restartScope: Job" in str(err.value)


OWN_RULE = {"Worker": {"template": {"spec": {"containers": [{
    "name": "pytorch", "image": "x", "restartPolicy": "Never", "restartPolicyRules": [
        {"action": "RestartAllContainers",
         "exitCodes": {"operator": "In", "values": [42]}}]}]}}}}


def test_a_template_that_restarts_its_pod_itself_is_refused_with_the_field() -> None:
    with pytest.raises(InvalidJob) as err:
        load_job(manifest("PyTorchJob", {"Master": 1, "Worker": 1}, replica_extra=OWN_RULE,
                          spec=IN_PLACE))
    assert ("spec.pytorchReplicaSpecs[Worker].template.spec: container 'pytorch' restarts "
            "every container of the pod itself") in str(err.value)


def test_a_template_that_restarts_its_pod_itself_keeps_its_rules_under_the_flag() -> None:
    # the manager's flag does not refuse a job: the job restarts by recreation, its own
    # rules as it wrote them (one that restarts a single container is in place as well)
    c = Cluster(job("PyTorchJob", spec={"runPolicy": {"restartScope": "Job"}},
                    replica_extra=OWN_RULE), EngineConfig(restart_in_place=True))
    c.step()
    worker = c.pod("job-worker-0")
    assert ATTEMPT not in (worker["metadata"].get("annotations") or {})
    assert worker["spec"]["containers"][0]["restartPolicyRules"] == \
        OWN_RULE["Worker"]["template"]["spec"]["containers"][0]["restartPolicyRules"]
    assert [ctr["name"] for ctr in worker["spec"]["containers"]] == ["pytorch"]


def test_a_cluster_that_cannot_restart_in_place_is_said_once_per_job() -> None:
    config = EngineConfig(restart_in_place=True, in_place_unavailable=inplace.REFUSED)
    c = Cluster(job("PyTorchJob", spec={"runPolicy": {"restartScope": "Job"}}), config)
    first = c.step()
    assert [e.message for e in first.events if e.reason == inplace.UNAVAILABLE] == [
        f"{inplace.REFUSED}: {inplace.FALLBACK}"]
    assert ATTEMPT not in (c.pod("job-worker-0")["metadata"].get("annotations") or {})
    assert inplace.UNAVAILABLE not in reasons(c.step())


# -- a restart in place --------------------------------------------------------------------

def test_a_failed_rank_restarts_every_pod_in_place_and_they_start_together() -> None:
    c = started()
    c.in_place.fail("job-worker-1", 137)
    c.in_place.lagging = True
    plan = c.step()
    # the next attempt, told to every pod; nothing deleted or made
    assert told(plan) == dict.fromkeys(PODS, ("1", "0"))
    assert not plan.delete and not plan.to_create
    assert c.job.status.replica_statuses["Worker"].restarts == 1  # counted as one restart
    assert c.condition("Restarting").status == "True"
    assert "job-worker-1 exited with code 137" in c.condition("Restarting").message
    assert c.job.status.last_failure.pod == "job-worker-1"
    assert c.job.status.last_failure.exit_code == 137
    assert inplace.RESTARTING in reasons(plan)
    # the agents stop their pods, one of them late: not released until all have
    caught_up(c, "job-master-0", "job-worker-1")
    assert told(c.step()) == {}
    assert c.in_place.running() == {"job-worker-0": 0}  # its files do not say 1 yet
    c.in_place.lagging = False
    c.in_place.settle(["job-worker-0"])
    plan = c.step()
    assert told(plan) == dict.fromkeys(PODS, ("1", "1"))
    assert inplace.RELEASED_REASON in reasons(plan)
    assert c.in_place.running() == dict.fromkeys(PODS, 1)
    c.step()
    assert c.condition("Running").status == "True"
    assert c.job.status.replica_statuses["Worker"].restarts == 1  # not counted again
    assert c.job.status.replica_statuses["Worker"].active == 2


def test_while_pods_wait_at_their_barrier_the_job_is_not_running() -> None:
    c = told_lagging("job-worker-0")
    caught_up(c, *PODS)
    c.step()  # released; their files do not say so yet
    assert c.job.status.replica_statuses["Worker"].active == 0
    assert c.condition("Running") is None


def test_a_permanent_failure_fails_the_job_and_its_pods_finish() -> None:
    c = started()
    c.in_place.fail("job-worker-0", 1)  # ExitCode: 1-127 is the program's own verdict
    plan = c.step()
    assert c.condition("Failed").status == "True"
    assert "job-worker-0 exited with code 1" in c.condition("Failed").message
    assert {a for a, _ in told(plan).values()} == {"0"}  # no new attempt
    assert finished(plan) == PODS  # cleanPodPolicy None: they end as their mains do
    c.in_place.settle()
    assert c.in_place.pods["job-worker-0"].ended == "Failed"
    assert c.in_place.running() == {"job-master-0": 0, "job-worker-1": 0}


def test_a_pod_whose_main_container_succeeded_finishes() -> None:
    c = started()
    c.in_place.fail("job-worker-1", 0)
    plan = c.step()
    assert finished(plan) == ["job-worker-1"]
    c.in_place.settle()
    assert c.in_place.pods["job-worker-1"].ended == "Succeeded"
    c.in_place.fail("job-master-0", 0)
    c.step()
    assert c.condition("Succeeded").status == "True"


def test_a_rank_that_succeeded_as_another_failed_restarts_in_place_with_it() -> None:
    c = started()
    c.in_place.fail("job-worker-1", 0)
    c.in_place.fail("job-master-0", 137)
    plan = c.step()
    # not finished (its pod would end, and be made again): stopped for attempt 1 as well
    assert finished(plan) == [] and not plan.delete
    assert told(plan) == dict.fromkeys(PODS, ("1", "0"))
    c.in_place.settle()
    c.step()
    assert c.in_place.running() == dict.fromkeys(PODS, 1)


def test_the_backoff_limit_counts_restarts_in_place() -> None:
    c = started({"runPolicy": {"restartScope": "Job", "restartInPlace": True,
                               "backoffLimit": 1}})
    c.in_place.fail("job-worker-0", 137)
    c.step()
    c.in_place.settle()
    c.step()
    c.in_place.fail("job-master-0", 137)
    c.step()
    assert c.condition("Failed").reason == "PyTorchJobFailed"


def test_a_failure_while_a_restart_is_under_way_joins_it() -> None:
    c = told_lagging("job-worker-0")
    c.in_place.fail("job-worker-1", 137)  # before its agent saw the new attempt
    c.in_place.report("job-worker-1")
    assert told(c.step()) == {}  # still attempt 1, counted once
    assert c.job.status.replica_statuses["Worker"].restarts == 1
    c.in_place.lagging = False
    c.in_place.settle()
    c.step()
    assert c.in_place.running() == dict.fromkeys(PODS, 1)


def test_a_pod_that_ended_is_made_again_for_the_new_attempt() -> None:
    c = started()
    c.set("job-worker-1", phase="Failed", reason="Evicted")  # the cluster ended it
    plan = c.step()
    assert sorted(told(plan)) == ["job-master-0", "job-worker-0"]
    assert [r.name for r in plan.delete] == ["job-worker-1"]
    c.in_place.settle()
    plan = c.step()
    made = [o for o in plan.to_create if o["kind"] == "Pod"]
    assert [o["metadata"]["name"] for o in made] == ["job-worker-1"]
    assert made[0]["metadata"]["annotations"][ATTEMPT] == "1"  # made for the new attempt
    c.in_place.settle()
    assert told(c.step()) == dict.fromkeys(PODS, ("1", "1"))
    assert c.in_place.running() == dict.fromkeys(PODS, 1)


def test_a_pod_whose_kubelet_ignores_the_rule_is_made_again() -> None:
    # its agent ends and nothing restarts the pod: it cannot restart in place
    c = started()
    c.in_place.pods["job-worker-1"].node_restarts = False
    c.in_place.fail("job-worker-0", 137)
    c.step()
    c.in_place.settle()
    plan = c.step()
    assert [r.name for r in plan.delete] == ["job-worker-1"]
    assert told(plan) == {}  # not released while its main container may run
    c.step()
    c.in_place.settle()
    assert told(c.step()) == dict.fromkeys(PODS, ("1", "1"))
    assert c.in_place.running() == dict.fromkeys(PODS, 1)


def test_a_pod_that_does_not_stop_is_made_again_after_the_grace() -> None:
    c = started()
    c.in_place.fail("job-worker-0", 137)
    c.in_place.lagging = True
    c.step()
    caught_up(c, "job-master-0", "job-worker-0")  # worker 1's files are never written
    plan = c.step()
    assert told(plan) == {}
    one_attempt(c)
    assert plan.requeue_after is not None and plan.requeue_after <= inplace.STOP_GRACE
    c.advance(inplace.STOP_GRACE)
    plan = c.step()
    assert [r.name for r in plan.delete] == ["job-worker-1"]
    assert inplace.LATE in reasons(plan)
    assert [o["metadata"]["name"] for o in c.step().to_create if o["kind"] == "Pod"] == [
        "job-worker-1"]
    # made for the attempt, it has not come to its barrier yet: it is not late
    c.advance(1)
    plan = c.step()
    assert not plan.delete and inplace.LATE not in reasons(plan)
    c.in_place.lagging = False
    c.in_place.settle()
    assert told(c.step()) == dict.fromkeys(PODS, ("1", "1"))


def test_a_pod_whose_files_missed_the_new_attempt_is_told_again() -> None:
    # its kubelet missed the change (the files wait for its periodic sync): the pod is
    # told again after NUDGE, long before STOP_GRACE would make it again
    c = told_lagging("job-worker-0")
    caught_up(c, "job-master-0", "job-worker-0")
    c.advance(inplace.NUDGE - 1)
    plan = c.step()
    assert told_again(plan) == [] and told(plan) == {}
    assert plan.requeue_after == 1
    c.advance(1)
    plan = c.step()
    assert told_again(plan) == ["job-worker-1"]  # not those held at their barrier
    assert [e.message for e in plan.events if e.reason == inplace.TOLD_AGAIN_REASON] == [
        "job-worker-1 did not act on what it was told within 5s (the kubelet may not have "
        "written the files again): told again"]
    assert not plan.delete
    assert c.step().requeue_after == inplace.NUDGE  # and again, while it does not act
    caught_up(c, "job-worker-1")  # the kubelet, syncing the changed pod
    assert told(c.step()) == dict.fromkeys(PODS, ("1", "1"))


def test_a_pod_is_told_again_a_few_times_only() -> None:
    # a pod whose node is gone shows its agent running for ever: no patch every 5 s
    c = started()
    c.in_place.lagging = True
    c.in_place.fail("job-worker-0", 0)
    c.in_place.report("job-worker-0")
    c.step()  # told to finish, it never does
    again = []
    for _ in range(6):
        c.advance(5)
        plan = c.step()
        again += told_again(plan)
    assert again == ["job-worker-0"] * 3  # the README's "at most 3 times"
    assert plan.requeue_after is None


def test_a_pod_whose_files_missed_the_release_is_told_again() -> None:
    c = told_lagging("job-worker-0")
    caught_up(c, *PODS)
    assert told(c.step()) == dict.fromkeys(PODS, ("1", "1"))
    caught_up(c, "job-master-0", "job-worker-0")
    c.advance(inplace.NUDGE)
    plan = c.step()
    assert told_again(plan) == ["job-worker-1"]
    caught_up(c, "job-worker-1")
    assert told_again(c.step()) == []
    assert c.in_place.running() == dict.fromkeys(PODS, 1)


def test_a_pod_whose_files_missed_its_finish_is_told_again() -> None:
    c = started()
    c.in_place.lagging = True
    c.in_place.fail("job-worker-0", 0)
    c.in_place.report("job-worker-0")
    assert finished(c.step()) == ["job-worker-0"]
    c.advance(inplace.NUDGE)
    assert told_again(c.step()) == ["job-worker-0"]


def test_a_pod_still_held_for_the_last_attempt_is_made_again_for_the_next() -> None:
    """A pod whose files have not shown the last release yet could still start that
    attempt: when the job moves on before it did, it is made again, not restarted."""
    c = started()
    k = c.in_place
    k.lagging = True
    k.fail("job-worker-0", 137)
    k.report("job-worker-0")
    c.step()  # attempt 1
    caught_up(c, *PODS)
    assert told(c.step()) == dict.fromkeys(PODS, ("1", "1"))
    caught_up(c, "job-master-0", "job-worker-0")
    k.fail("job-master-0", 137)  # while worker 1 still waits to start attempt 1
    k.report("job-master-0")
    plan = c.step()
    assert [r.name for r in plan.delete] == ["job-worker-1"]
    assert told(plan) == {"job-master-0": ("2", "1"), "job-worker-0": ("2", "1")}
    k.lagging = False
    for _ in range(3):
        c.step()
        k.settle()
    assert k.running() == dict.fromkeys(PODS, 2)


def test_a_straggler_the_manager_told_before_it_stopped_is_made_again() -> None:
    """The manager stopped after telling the new attempt and before deleting a pod still
    held for the last one: the next finds it told less, and deletes it."""
    c = started()
    k = c.in_place
    k.lagging = True
    k.fail("job-worker-0", 137)
    k.report("job-worker-0")
    c.step()
    caught_up(c, *PODS)
    c.step()  # 1 released; worker 1's files do not say so yet
    caught_up(c, "job-master-0", "job-worker-0")
    k.fail("job-master-0", 137)
    k.report("job-master-0")
    plan = c.plan()
    assert [r.name for r in plan.delete] == ["job-worker-1"]
    plan.delete.clear()  # never sent
    c.apply(plan)
    plan = c.step()
    assert [r.name for r in plan.delete] == ["job-worker-1"]
    assert "job-worker-1" not in told(plan)


def test_a_restart_told_to_some_pods_only_is_told_to_the_rest() -> None:
    # the manager stopped in the middle of telling: the next one finishes from the pods
    c = started()
    c.in_place.fail("job-worker-0", 137)
    c.step()
    c.in_place.tell("job-master-0", {ATTEMPT: "0", RELEASED: "0", FINISH: "false"})
    plan = c.step()
    assert told(plan) == {"job-master-0": ("1", "0")}
    assert c.job.status.replica_statuses["Worker"].restarts == 1


def test_pods_whose_rules_the_api_server_dropped_restart_by_recreation() -> None:
    c = started()
    for name, pod in c.in_place.pods.items():
        pod.rules_kept = False
        c.in_place.show(name)
    c.in_place.fail("job-worker-0", 137)
    plan = c.step()
    assert sorted(r.name for r in plan.delete) == PODS
    assert {a for a, _ in told(plan).values()} <= {"0"}
    assert inplace.UNAVAILABLE in reasons(plan)


def test_an_ignored_failure_restarts_in_place_uncounted() -> None:
    policy = {"rules": [{"action": "Ignore", "onExitCodes": {"operator": "In",
                                                             "values": [143]}}]}
    c = started({"runPolicy": {**IN_PLACE["runPolicy"], "podFailurePolicy": policy}})
    c.in_place.fail("job-worker-0", 143)
    plan = c.step()
    assert told(plan) == dict.fromkeys(PODS, ("1", "0"))
    assert not plan.delete
    assert (c.job.status.replica_statuses["Worker"].restarts or 0) == 0


# -- the barrier: no rank of an old attempt beside one of a new ----------------------------

@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["fail", "refresh", "settle", "report", "step"]),
                          st.sampled_from(PODS)), max_size=60))
def test_no_two_attempts_ever_run_together(moves: list[tuple[str, str]]) -> None:
    """Whatever the order in which main containers fail, the kubelet writes files again
    and reports, barriers and agents loop and the manager reconciles, the pods whose main
    containers run all run one attempt."""
    c = started({"runPolicy": {"restartScope": "Job", "restartInPlace": True,
                               "backoffLimit": 1000}})
    kubelet = c.in_place
    kubelet.lagging = True
    for move, pod in moves:
        if pod not in kubelet.pods:
            continue  # deleted, not made again yet
        if move == "fail" and pod in kubelet.running():
            kubelet.fail(pod, 137)
        elif move == "refresh":
            kubelet.refresh(pod)
        elif move == "settle":
            kubelet.settle([pod])
        elif move == "report":
            kubelet.report(pod)
        elif move == "step":
            c.step()
        one_attempt(c)
    kubelet.lagging = False  # and it gets there: every pod runs the newest attempt
    for _ in range(4):
        kubelet.settle()
        c.step()
    assert set(kubelet.running()) == set(PODS)
    assert len(set(kubelet.running().values())) == 1


# -- the barrier's and the agent's scripts, run by sh -------------------------------------

class Script:
    """A script of engine/inplace.py in a shell, its files and state folder in `tmp`."""

    def __init__(self, tmp: Path, script: str):
        self.files, self.state = tmp / "attempt", tmp / "state"
        self.files.mkdir(exist_ok=True)
        self.state.mkdir(exist_ok=True)
        self.script = (script.replace(inplace.FILES_DIR, str(self.files))
                       .replace(inplace.STATE_DIR, str(self.state)))
        self.proc: subprocess.Popen[bytes] | None = None

    def tell(self, attempt: int, released: int, finish: bool = False) -> None:
        # written whole, as the kubelet writes a downward API volume
        for name, value in (("attempt", attempt), ("released", released),
                            ("finish", str(finish).lower())):
            (self.files / f"{name}.new").write_text(str(value))
            (self.files / f"{name}.new").rename(self.files / name)

    def start(self) -> Script:
        self.proc = subprocess.Popen(["sh", "-c", self.script], stdout=subprocess.DEVNULL)
        return self

    def exited(self, within: float = 5.0) -> int | None:
        assert self.proc is not None
        try:
            return self.proc.wait(within)
        except subprocess.TimeoutExpired:
            return None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def scripts(tmp_path: Path) -> Iterator[Callable[[str], Script]]:
    made: list[Script] = []

    def make(script: str) -> Script:
        made.append(Script(tmp_path, script))
        return made[-1]

    yield make
    for s in made:
        s.stop()


def test_the_barrier_waits_until_the_attempt_it_is_told_is_released(
        scripts: Callable[[str], Script]) -> None:
    barrier = scripts(inplace.BARRIER_SCRIPT)
    barrier.tell(1, 0)
    barrier.start()
    assert barrier.exited(within=1.0) is None
    barrier.tell(2, 1)  # a newer attempt, the last one released: still not its own
    assert barrier.exited(within=1.0) is None
    barrier.tell(2, 2)
    assert barrier.exited() == 0
    assert (barrier.state / "attempt").read_text().strip() == "2"  # what the agent watches


def test_the_agent_stops_the_pod_when_told_a_newer_attempt(
        scripts: Callable[[str], Script]) -> None:
    agent = scripts(inplace.AGENT_SCRIPT)
    (agent.state / "attempt").write_text("2\n")
    agent.tell(2, 2)
    agent.start()
    assert agent.exited(within=1.0) is None
    agent.tell(3, 2)
    assert agent.exited() == inplace.STOP_EXIT


def test_while_the_rank_supervisor_is_heard_the_agent_leaves_it_the_newer_attempt(
        scripts: Callable[[str], Script]) -> None:
    agent = scripts(inplace.AGENT_SCRIPT)
    (agent.state / "attempt").write_text("2\n")
    (agent.state / "heard").touch()
    agent.tell(2, 2)
    agent.start()
    agent.tell(3, 2)
    assert agent.exited(within=1.0) is None  # the supervisor stops the rank itself
    (agent.state / "attempt").write_text("3\n")  # ... and notes where it waits
    agent.tell(3, 3)
    assert agent.exited(within=1.0) is None
    agent.tell(4, 3)
    (agent.state / "heard").unlink()  # its manager went quiet: the kubelet's path
    assert agent.exited() == inplace.STOP_EXIT


def test_the_barrier_never_lets_a_pod_into_an_attempt_below_the_one_its_state_notes(
        scripts: Callable[[str], Script]) -> None:
    # its supervisor was held for attempt 3 (told on its channel), and the manager was lost
    # before the pod's annotations said so: its files still say attempt 2, released
    barrier = scripts(inplace.BARRIER_SCRIPT)
    (barrier.state / "attempt").write_text("3\n")
    barrier.tell(2, 2)
    barrier.start()
    assert barrier.exited(within=1.0) is None
    barrier.tell(3, 2)
    assert barrier.exited(within=1.0) is None
    barrier.tell(3, 3)
    assert barrier.exited() == 0


def test_the_agent_leaves_a_pod_whose_files_lag_behind_its_state_as_it_is(
        scripts: Callable[[str], Script]) -> None:
    agent = scripts(inplace.AGENT_SCRIPT)
    (agent.state / "attempt").write_text("3\n")  # what its supervisor noted, unheard now
    agent.tell(2, 2)
    agent.start()
    assert agent.exited(within=1.0) is None
    agent.tell(4, 3)  # a newer attempt than its own
    assert agent.exited() == inplace.STOP_EXIT


def test_the_agent_ends_when_told_to_finish(scripts: Callable[[str], Script]) -> None:
    agent = scripts(inplace.AGENT_SCRIPT)
    (agent.state / "attempt").write_text("0\n")
    agent.tell(0, 0)
    agent.start()
    assert agent.exited(within=1.0) is None
    agent.tell(0, 0, finish=True)
    assert agent.exited() == 0


# -- what the manager reads of a pod -------------------------------------------------------

def kubelet_pod(init: dict[str, Any], main: dict[str, Any], agent: dict[str, Any],
                phase: str = "Running", rules: bool = True) -> dict[str, Any]:
    """A pod made to restart in place as the API server returns it, with the statuses of
    its barrier, main container and agent as a kubelet reports them."""
    c = Cluster(job("PyTorchJob", spec=IN_PLACE, replica_extra=EXIT_CODE))
    c.step()
    pod = copy.deepcopy(c.pod("job-worker-0"))
    if not rules:  # an API server with the feature gate off drops them
        for ctr in pod["spec"]["containers"]:
            ctr.pop("restartPolicyRules", None)
    pod["status"] = {"phase": phase,
                     "initContainerStatuses": [{"name": inplace.BARRIER, **init}],
                     "containerStatuses": [{"name": "pytorch", **main},
                                           {"name": inplace.AGENT, **agent}]}
    return pod


RUNNING = {"state": {"running": {}}}
WAITING = {"state": {"waiting": {"reason": "PodInitializing"}}}
DONE = {"state": {"terminated": {"exitCode": 0}}}


@pytest.mark.parametrize(("init", "main", "agent", "phase", "alive", "held", "agent_runs"), [
    (RUNNING, WAITING, WAITING, "Pending", True, True, False),  # at its barrier
    (DONE, RUNNING, RUNNING, "Running", True, False, True),
    (DONE, {"state": {"terminated": {"exitCode": 3}}}, RUNNING, "Running", True, False, True),
    (DONE, DONE, DONE, "Succeeded", False, False, False),
    # its agent ended: nothing restarts it any more
    (DONE, DONE, DONE, "Running", False, False, False),
    # its agent stopped it for a newer attempt: the kubelet is restarting it
    (DONE, RUNNING, {"state": {"terminated": {"exitCode": 88}}}, "Running", True, False,
     False),
], ids=["held", "running", "main-ended", "ended", "agent-ended", "agent-stopped-it"])
def test_the_manager_reads_a_pod_that_restarts_in_place(
        init: dict[str, Any], main: dict[str, Any], agent: dict[str, Any], phase: str,
        alive: bool, held: bool, agent_runs: bool) -> None:
    pod = kubelet_pod(init, main, agent, phase)
    record = pod_record(pod)
    assert record is not None and record.in_place == InPlace(
        0, 0, finish=False, alive=alive, held=held, kept_rules=True, agent_runs=agent_runs)
    pod["metadata"]["annotations"].update({inplace.TOLD_AT: "2026-01-01T00:00:05Z",
                                           inplace.TOLD_AGAIN: "2"})
    record = pod_record(pod)
    assert record is not None and record.in_place is not None
    assert (record.in_place.told_at, record.in_place.told_again) == (
        "2026-01-01T00:00:05Z", 2)


@pytest.mark.parametrize(("init", "agent", "phase", "attempt", "released", "unheard"), [
    (DONE, RUNNING, "Running", 1, 0, True),  # its agent runs on in the old attempt
    (DONE, RUNNING, "Running", 1, 1, False),  # it runs the attempt released
    # its agent stopped it: the kubelet is restarting it, the files were read
    (DONE, {"state": {"terminated": {"exitCode": 88}}}, "Running", 1, 0, False),
    (RUNNING, WAITING, "Pending", 1, 0, False),  # held, the attempt not released yet
    (RUNNING, WAITING, "Pending", 1, 1, True),  # held, the attempt released
], ids=["told-a-newer-attempt", "steady", "stopping", "held", "held-released"])
def test_a_pod_unheard_is_one_whose_containers_show_its_files_unread(
        init: dict[str, Any], agent: dict[str, Any], phase: str, attempt: int,
        released: int, unheard: bool) -> None:
    main = RUNNING if phase == "Running" else WAITING
    pod = kubelet_pod(init, main, agent, phase)
    pod["metadata"]["annotations"].update({ATTEMPT: str(attempt), RELEASED: str(released)})
    record = pod_record(pod)
    assert record is not None
    assert inplace.unheard(PodState("p", "Worker", 0, in_place=record.in_place)) is unheard


def test_a_failed_main_container_of_a_pod_that_lives_on_is_read_as_its_failure() -> None:
    record = pod_record(kubelet_pod(DONE, {"state": {"terminated": {
        "exitCode": 3, "reason": "Error", "message": "boom",
        "finishedAt": "2026-01-01T00:00:00Z"}}}, RUNNING))
    assert record is not None
    assert record.phase == "Running" and record.replica_phase("pytorch") == "Failed"
    assert record.failure is not None and record.failure.exit_codes == (("pytorch", 3),)
    assert record.exit_code("pytorch") == 3


def test_the_agents_exit_is_not_the_pods() -> None:
    # its 88 is no exit of the job's (no ExitedWithCode, no failure), its restarts no
    # restarts of the job's containers
    record = pod_record(kubelet_pod(DONE, RUNNING, {
        "restartCount": 2, "state": {"terminated": {"exitCode": 88}}}, "Running"))
    assert record is not None and record.exit_codes is None and record.failure is None
    assert record.restarts == 0 and record.replica_phase("pytorch") == "Running"


def test_a_main_container_that_cannot_start_again_is_told_as_waiting() -> None:
    # released, its image cannot be pulled any more: the pod runs (its agent does), the
    # replica is not, and why is told as for a pod just made
    record = pod_record(kubelet_pod(DONE, {"state": {"waiting": {
        "reason": "ImagePullBackOff", "message": "Back-off pulling image \"x\""}}},
        RUNNING, "Running"))
    assert record is not None and record.replica_phase("pytorch") == "Pending"
    assert record.waiting is not None and record.waiting.reason == "ImagePullBackOff"
    assert record.waiting.message == 'container pytorch: Back-off pulling image "x"'
    starting = pod_record(kubelet_pod(DONE, WAITING, RUNNING, "Running"))
    assert starting is not None and starting.replica_phase("pytorch") == "Running"


def test_the_manager_sees_the_rules_the_api_server_dropped() -> None:
    record = pod_record(kubelet_pod(RUNNING, WAITING, WAITING, "Pending", rules=False))
    assert record is not None and record.in_place is not None
    assert record.in_place.kept_rules is False
