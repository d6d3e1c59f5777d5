"""The rank supervisor in pods that restart in place (engine/supervised.py): the pod as
made (its init container, volume and the main container's command), and which path each
replica type's whole-job restart takes, and why."""

from __future__ import annotations

import base64
from dataclasses import replace
from typing import Any

import pytest

from tests.jobs import job, manifest
from tests.sim import SUPERVISOR_KEY, Cluster
from trainop.api.types import RestartAttempt
from trainop.api.validation import load_job
from trainop.cluster.reading.records import pod_record
from trainop.engine import EngineConfig, ObjectRef, inplace, supervised
from trainop.engine.observed import (
    Ended,
    InPlace,
    NodeState,
    Phase,
    PodState,
    RankEnd,
    RankState,
    Told,
)
from trainop.engine.plan import Plan
from trainop.frameworks.registry import framework_of

IMAGE = "registry.example/trainop:1"
IN_PLACE = {"runPolicy": {"restartScope": "Job", "restartInPlace": True}}
SUPERVISED = EngineConfig(rank_supervisor_image=IMAGE)


def commanded(command: list[str] | None, args: list[str] | None = None
              ) -> dict[str, dict[str, Any]]:
    main: dict[str, Any] = {"name": "pytorch", "image": "trainer",
                            "volumeMounts": [{"name": "data", "mountPath": "/data"}]}
    if command is not None:
        main["command"] = command
    if args is not None:
        main["args"] = args
    template = {"spec": {"containers": [main, {"name": "logs", "image": "shipper",
                                                "command": ["ship"]}],
                         "volumes": [{"name": "data", "emptyDir": {}}]}}
    return {rt: {"restartPolicy": "ExitCode", "template": template}
            for rt in ("Master", "Worker")}


def made(extra: dict[str, dict[str, Any]], config: EngineConfig = SUPERVISED,
         spec: dict[str, Any] | None = None) -> dict[str, Any]:
    c = Cluster(job("PyTorchJob", spec=spec or IN_PLACE, replica_extra=extra), config)
    c.step()
    return c.pod("job-worker-0")


def by_name(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {i["name"]: i for i in items}


def test_a_main_container_with_a_command_runs_as_the_supervisors_child() -> None:
    pod = made(commanded(["python", "train.py"], ["--epochs", "$(EPOCHS)"]))
    spec = pod["spec"]
    main, logs = spec["containers"][0], spec["containers"][1]
    # the supervisor serves its channel on the pod's port, for this pod, from the attempt
    # it was made for, reading and noting the attempts where the barrier and agent do;
    # the template's command and args follow its `--` exactly, as written
    assert main["command"] == [
        "/run/trainop/bin/trainop-supervisor", "--listen", ":29611", "--pod", "job-worker-0",
        "--attempt", "0", "--files", "/run/trainop/attempt",
        "--state", "/run/trainop/state/attempt", "--heard", "/run/trainop/state/heard",
        "--grace", "30s", "--", "python", "train.py"]
    assert main["args"] == ["--epochs", "$(EPOCHS)"]
    # its key from the job's Secret, last in the environment (a same-named variable of
    # the template's does not take its place)
    assert main["env"][-1] == {"name": "TRAINOP_SUPERVISOR_KEY", "valueFrom": {
        "secretKeyRef": {"name": "job-trainop-ranks", "key": "key"}}}
    assert main["volumeMounts"] == [
        {"name": "data", "mountPath": "/data"},
        {"name": "trainop-supervisor", "mountPath": "/run/trainop/bin", "readOnly": True},
        {"name": inplace.FILES, "mountPath": "/run/trainop/attempt", "readOnly": True},
        {"name": inplace.STATE, "mountPath": "/run/trainop/state"}]
    assert logs["command"] == ["ship"] and "volumeMounts" not in logs  # not the main one
    # copied in by the first init container, from the manager's image, before the barrier
    assert [i["name"] for i in spec["initContainers"]] == [
        "trainop-supervisor-install", inplace.BARRIER, "init-pytorch"]
    install = spec["initContainers"][0]
    assert install["image"] == IMAGE
    assert install["command"] == ["/usr/local/bin/trainop-supervisor", "--install",
                                  "/run/trainop/bin"]
    assert install["volumeMounts"] == [{"name": "trainop-supervisor",
                                        "mountPath": "/run/trainop/bin", "readOnly": False}]
    assert install["securityContext"]["runAsNonRoot"] is True
    assert by_name(spec["volumes"])["trainop-supervisor"] == {
        "name": "trainop-supervisor", "emptyDir": {"sizeLimit": "16Mi"}}


@pytest.mark.parametrize(("grace", "given"), [
    (90, "90s"),
    (10**12, "31536000s"),  # past what the supervisor's flag holds: a year
])
def test_the_rank_has_the_pods_grace_to_stop_for_a_newer_attempt(grace: int,
                                                                 given: str) -> None:
    extra = commanded(["python", "train.py"])
    for spec in extra.values():
        spec["template"]["spec"]["terminationGracePeriodSeconds"] = grace
    command = made(extra)["spec"]["containers"][0]["command"]
    assert command[command.index("--grace") + 1] == given


@pytest.mark.parametrize(("replicas", "lead"), [
    ({"Master": 1, "Worker": 2}, "job-master-0"),
    ({"Worker": 3}, "job-worker-0"),
])
def test_only_the_lead_pods_supervisor_passes_progress_on(replicas: dict[str, int],
                                                          lead: str) -> None:
    c = Cluster(job("PyTorchJob", replicas, spec=IN_PLACE,
                    replica_extra=commanded(["python", "train.py"])),
                EngineConfig(rank_supervisor_image=IMAGE, progress_interval=2.5))
    c.step()
    for name in c.pods:
        command = c.pod(name)["spec"]["containers"][0]["command"]
        cut = command.index("--")
        flags = command[command.index("--grace") + 2:cut]
        assert flags == (["--progress", "/run/trainop/state/progress.json",
                          "--progress-every", "2.5s"] if name == lead else []), name


def test_the_job_gets_one_key_secret_made_once() -> None:
    c = Cluster(job("PyTorchJob", spec=IN_PLACE,
                    replica_extra=commanded(["python", "train.py"])), SUPERVISED)
    assert supervised.wants_key(c.job, c.observed, framework_of(c.job), SUPERVISED)
    plan = c.step()
    secrets = [o for o in plan.to_create if o["kind"] == "Secret"]
    owner = c.pod("job-worker-0")["metadata"]["ownerReferences"]  # the job's, as its pods
    assert secrets == [{
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": "job-trainop-ranks", "namespace": "default",
                     "labels": {"training.kubeflow.org/job-name": "job",
                                "training.kubeflow.org/operator-name": "pytorchjob-controller"},
                     "ownerReferences": owner},
        "data": {"key": base64.b64encode(SUPERVISOR_KEY.encode()).decode()}}]
    c.step()  # made: a key that changed would leave the supervisors deaf to the manager
    assert not [o for o in c.plans[-1].to_create + c.plans[-1].update
                if o["kind"] == "Secret"]
    assert not supervised.wants_key(c.job, c.observed, framework_of(c.job), SUPERVISED)


@pytest.mark.parametrize(("config", "command"), [
    (EngineConfig(restart_in_place=True), ["python", "train.py"]),  # no image
    (SUPERVISED, None),  # no command: no supervisor
], ids=["no-image", "no-command"])
def test_no_key_secret_where_no_rank_runs_under_the_supervisor(
        config: EngineConfig, command: list[str] | None) -> None:
    c = Cluster(job("PyTorchJob", spec=IN_PLACE, replica_extra=commanded(command)), config)
    assert not [o for o in c.step().to_create if o["kind"] == "Secret"]


def test_a_main_container_with_no_command_keeps_its_image_entrypoint() -> None:
    # what would run is the image's ENTRYPOINT, which the pod does not show
    pod = made(commanded(None, ["--epochs", "3"]))
    main = pod["spec"]["containers"][0]
    assert "command" not in main and main["args"] == ["--epochs", "3"]
    assert "trainop-supervisor-install" not in by_name(pod["spec"]["initContainers"])
    assert "trainop-supervisor" not in by_name(pod["spec"]["volumes"])
    # the container-level path is still the pod's
    assert inplace.AGENT in by_name(pod["spec"]["containers"])


@pytest.mark.parametrize(("config", "spec"), [
    (EngineConfig(), IN_PLACE),  # no image: the manager has no supervisor to give
    (SUPERVISED, {"runPolicy": {"restartScope": "Job"}}),  # not in place
    (EngineConfig(restart_in_place=True, rank_supervisor_image=IMAGE,
                  in_place_unavailable=inplace.REFUSED), IN_PLACE),  # the cluster cannot
], ids=["no-image", "not-in-place", "cluster-cannot"])
def test_no_supervisor_where_the_pod_does_not_restart_in_place_with_one(
        config: EngineConfig, spec: dict[str, Any]) -> None:
    pod = made(commanded(["python", "train.py"]), config, spec)
    assert pod["spec"]["containers"][0]["command"] == ["python", "train.py"]
    assert "trainop-supervisor-install" not in by_name(pod["spec"].get("initContainers")
                                                       or [])


def paths(doc: dict[str, Any], config: EngineConfig) -> dict[str, tuple[str, str]]:
    j = load_job(doc)
    return {rt: (p.how, p.why)
            for rt, p in supervised.paths(j, framework_of(j), config).items()}


def test_each_replica_types_path_is_said_with_its_reason() -> None:
    extra = commanded(["python", "train.py"])
    extra["Worker"] = {"restartPolicy": "ExitCode", "template": {"spec": {"containers": [
        {"name": "pytorch", "image": "trainer"}]}}}
    doc = manifest("PyTorchJob", {"Master": 1, "Worker": 2}, spec=IN_PLACE,
                   replica_extra=extra)
    assert paths(doc, SUPERVISED) == {
        "Master": ("processes in place", "container 'pytorch' names its command, which runs "
                                         "as the rank supervisor's child (containers in place "
                                         "where the manager cannot reach the supervisor on "
                                         "port 29611)"),
        "Worker": ("containers in place", "no rank supervisor: container 'pytorch' names no "
                                          "command, so its image's ENTRYPOINT runs, which the "
                                          "pod does not show")}
    assert paths(doc, EngineConfig())["Master"] == (
        "containers in place", "no rank supervisor: the manager has no --rank-supervisor-image")


@pytest.mark.parametrize(("run_policy", "config", "why"), [
    ({}, SUPERVISED, "runPolicy.restartScope is not Job: each pod restarts on its own"),
    ({"restartScope": "Job", "restartInPlace": False}, SUPERVISED,
     "runPolicy.restartInPlace is false"),
    ({"restartScope": "Job"}, SUPERVISED,
     "the manager restarts no job in place (its --restart-in-place is off)"),
    ({"restartScope": "Job"}, EngineConfig(restart_in_place=True,
                                           in_place_unavailable=inplace.DROPPED),
     inplace.DROPPED),
], ids=["pod-scope", "job-says-no", "flag-off", "cluster-cannot"])
def test_a_job_whose_pods_are_made_again_is_told_why(run_policy: dict[str, Any],
                                                     config: EngineConfig, why: str) -> None:
    doc = manifest("PyTorchJob", {"Master": 1, "Worker": 1},
                   spec={"runPolicy": run_policy}, replica_extra=commanded(["python"]))
    assert paths(doc, config) == {"Master": ("pods made again", why),
                                  "Worker": ("pods made again", why)}


def test_a_template_that_restarts_its_pod_itself_is_told_why() -> None:
    own = {"Worker": {"template": {"spec": {"containers": [{
        "name": "pytorch", "image": "x", "restartPolicy": "Never", "restartPolicyRules": [
            {"action": "RestartAllContainers",
             "exitCodes": {"operator": "In", "values": [42]}}]}]}}}}
    doc = manifest("PyTorchJob", {"Master": 1, "Worker": 1},
                   spec={"runPolicy": {"restartScope": "Job"}}, replica_extra=own)
    config = EngineConfig(restart_in_place=True, rank_supervisor_image=IMAGE)
    assert paths(doc, config)["Worker"] == (
        "pods made again", "a template's container restarts its pod itself "
                           "(restartPolicyRules)")


# -- what a heard supervisor says of its pod -------------------------------------------------

RUNNING_POD = PodState("job-worker-0", "Worker", 0, phase=Phase.RUNNING,
                       in_place=InPlace(attempt=1, released=1, agent_runs=True))


def rank(phase: str, attempt: int = 1, told: tuple[int, int] = (1, 1), code: int | None = None
         ) -> RankState:
    last = None if code is None else RankEnd(code, None, "2026-01-01T00:00:05Z")
    return RankState("job-worker-0", 7, phase, attempt, Told(*told), last)


def test_a_rank_that_failed_is_the_replicas_failure_though_its_container_lives() -> None:
    pod = supervised.overlay(RUNNING_POD, rank("exited", code=137), "pytorch")
    assert (pod.phase, pod.exit_code, pod.reason) == (Phase.FAILED, 137, "Error")
    # what podFailurePolicy's onExitCodes and status.lastFailure read
    assert pod.exit_codes == (("pytorch", 137),)
    assert pod.ended == Ended("pytorch", "2026-01-01T00:00:05Z")
    assert pod.in_place is not None and pod.in_place.alive  # still restarts in place


def test_a_rank_the_oom_killer_ended_is_a_replica_oom_killed() -> None:
    oom = replace(rank("exited", code=137), last=RankEnd(137, 9, "2026-01-01T00:00:05Z",
                                                         "OOMKilled"))
    pod = supervised.overlay(RUNNING_POD, oom, "pytorch")
    assert (pod.phase, pod.exit_code, pod.reason) == (Phase.FAILED, 137, "OOMKilled")


def test_a_rank_that_succeeded_is_the_replicas_success() -> None:
    pod = supervised.overlay(RUNNING_POD, rank("exited", code=0), "pytorch")
    assert (pod.phase, pod.exit_code, pod.reason, pod.ended) == (Phase.SUCCEEDED, 0, None, None)


def test_a_held_rank_waits_as_at_its_barrier_for_the_attempt_it_was_told() -> None:
    # told attempt 2 on the channel before its annotations show it
    pod = supervised.overlay(RUNNING_POD, rank("held", attempt=2, told=(2, 1)), "pytorch")
    assert pod.in_place is not None
    assert (pod.in_place.held, pod.in_place.attempt, pod.in_place.released) == (True, 2, 1)
    assert pod.phase == Phase.RUNNING  # its container runs: only the rank waits
    assert not inplace.unheard(pod)  # it acts on what it is told: never told again


@pytest.mark.parametrize("phase", ["running", "stopping"])
def test_a_rank_that_runs_or_stops_leaves_the_pod_as_the_kubelet_says(phase: str) -> None:
    pod = supervised.overlay(RUNNING_POD, rank(phase, told=(2, 1)), "pytorch")
    assert pod.in_place is not None
    assert (pod.phase, pod.exit_code, pod.in_place.held) == (Phase.RUNNING, None, False)
    assert (pod.in_place.attempt, pod.in_place.released) == (2, 1)
    assert not inplace.unheard(pod)  # its agent runs on, but the supervisor acts


def test_what_the_supervisor_was_told_counts_as_told_to_the_pod() -> None:
    # released on the channel before the pod's annotations show it
    pod = supervised.overlay(RUNNING_POD, rank("running", 2, (2, 2)), "pytorch")
    assert pod.in_place is not None
    assert (pod.in_place.attempt, pod.in_place.released) == (2, 2)


@pytest.mark.parametrize("pod", [
    PodState("job-worker-0", "Worker", 0, phase=Phase.RUNNING),  # not in place
    PodState("job-worker-0", "Worker", 0, phase=Phase.FAILED,  # its agent ended too
             in_place=InPlace(attempt=1, released=1, alive=False)),
    PodState("job-worker-0", "Worker", 0, phase=Phase.RUNNING, terminating=True,
             in_place=InPlace(attempt=1, released=1)),
], ids=["not-in-place", "pod-ended", "terminating"])
def test_a_pod_that_cannot_restart_in_place_is_as_it_was(pod: PodState) -> None:
    assert supervised.overlay(pod, rank("exited", code=1), "pytorch") == pod


def supervised_running(config: EngineConfig = SUPERVISED) -> Cluster:
    """A PyTorchJob of a master and two workers under rank supervisors, running attempt 0
    (its pods made, at their barrier, released)."""
    c = Cluster(job("PyTorchJob", spec=IN_PLACE, replica_extra=commanded(["python", "t.py"])),
                config)
    c.step()
    c.in_place.settle()
    c.step()
    return c


def annotated(plan: Plan) -> dict[str, tuple[str, str]]:
    """The attempt and the one released that the plan writes in each pod's annotations."""
    return {o["metadata"]["name"]: (o["metadata"]["annotations"][inplace.ATTEMPT],
                                    o["metadata"]["annotations"][inplace.RELEASED])
            for o in plan.update if o["kind"] == "Pod"}


def test_a_failed_rank_restarts_every_rank_through_the_supervisors_no_pod_made_again() -> None:
    c = supervised_running()
    c.in_place.lagging = True  # the kubelet restarts nothing: the supervisors do
    pods = ["job-master-0", "job-worker-0", "job-worker-1"]

    def say(**ranks: RankState) -> None:
        for name, state in ranks.items():
            c.pods[name] = supervised.overlay(c.pods[name], state, "pytorch")

    say(**{"job-master-0": rank("running", 0, (0, 0)),
           "job-worker-0": rank("exited", 0, (0, 0), code=137),  # retryable (ExitCode)
           "job-worker-1": rank("running", 0, (0, 0))})
    plan = c.step()
    # told on their channels, their pods' annotations left as they are: the restart's
    # record is the job's status, one write whatever the job's size
    assert plan.told == dict.fromkeys(pods, Told(1, 0))
    assert [o for o in plan.update if o["kind"] == "Pod"] == []
    assert plan.status.to_dict()["restartAttempt"] == {"attempt": 1, "released": 0}
    assert not plan.delete
    assert [(e.reason, e.message) for e in plan.events][:1] == [
        ("RestartingInPlace", "Restarting the 3 pod(s) of the job in place, attempt 1")]
    # every supervisor stopped its rank and holds for attempt 1: released together
    say(**dict.fromkeys(pods, rank("held", 1, (1, 0))))
    plan = c.step()
    assert plan.told == dict.fromkeys(pods, Told(1, 1))
    assert inplace.RELEASED_REASON in [e.reason for e in plan.events]
    assert plan.status.to_dict()["restartAttempt"] == {"attempt": 1, "released": 1}
    # ... and the pods' annotations catch up (the kubelet's path reads them later)
    assert annotated(plan) == dict.fromkeys(pods, ("1", "1"))


def test_a_pod_whose_supervisor_is_not_heard_is_told_by_its_annotations_as_before() -> None:
    c = supervised_running()
    c.in_place.lagging = True
    c.pods["job-worker-0"] = supervised.overlay(
        c.pods["job-worker-0"], rank("exited", 0, (0, 0), code=137), "pytorch")
    c.pods["job-worker-1"] = supervised.overlay(
        c.pods["job-worker-1"], rank("running", 0, (0, 0)), "pytorch")
    plan = c.step()  # the master's supervisor is not heard: its files tell it
    assert annotated(plan) == {"job-master-0": ("1", "0")}
    assert set(plan.told) == {"job-master-0", "job-worker-0", "job-worker-1"}


@pytest.mark.parametrize("before", [None, {"attempt": 2**31, "released": 0}],
                         ids=["none", "not-one"])
def test_the_release_waits_until_the_jobs_record_of_the_attempt_is_stored(
        before: dict[str, int] | None) -> None:
    c = supervised_running()
    if before is not None:  # a record someone else wrote, past any attempt: none
        record(c, before)
    c.in_place.lagging = True
    pods = ["job-master-0", "job-worker-0", "job-worker-1"]
    for name in pods:  # held for attempt 1, as a manager before this one told them
        c.pods[name] = supervised.overlay(c.pods[name], rank("held", 1, (1, 0)), "pytorch")
    # (it wrote the master's annotations only, then was lost)
    master = c.pods["job-master-0"]
    assert master.in_place is not None
    c.pods["job-master-0"] = replace(master, in_place=replace(master.in_place,
                                                              written=Told(1, 0)))
    plan = c.step()
    assert inplace.RELEASED_REASON not in [e.reason for e in plan.events]
    assert plan.told == dict.fromkeys(pods, Told(1, 0))
    assert plan.status.to_dict()["restartAttempt"] == {"attempt": 1, "released": 0}
    assert plan.requeue_after is not None and plan.requeue_after <= 1.0
    for name in pods:  # (the supervisors still say so)
        c.pods[name] = supervised.overlay(c.pods[name], rank("held", 1, (1, 0)), "pytorch")
    plan = c.step()  # stored now
    assert inplace.RELEASED_REASON in [e.reason for e in plan.events]
    assert plan.told == dict.fromkeys(pods, Told(1, 1))


def test_where_the_stored_status_drops_the_record_the_pods_annotations_are_the_record(
        ) -> None:
    # a CRD of before, without the field: the API server prunes it from every write
    c = supervised_running()
    c.in_place.lagging = True
    pods = ["job-master-0", "job-worker-0", "job-worker-1"]

    def say(state: RankState) -> None:
        for name in pods:
            c.pods[name] = supervised.overlay(c.pods[name], state, "pytorch")

    def pruned() -> None:
        assert c.job.status is not None
        c.job = c.job.model_copy(update={"status": c.job.status.model_copy(
            update={"restart_attempt": None})})

    say(rank("running", 0, (0, 0)))
    c.pods["job-worker-0"] = supervised.overlay(
        c.pods["job-worker-0"], rank("exited", 0, (0, 0), code=137), "pytorch")
    plan = c.step()  # the move: told on the channels, the record written (and pruned)
    pruned()
    assert plan.told == dict.fromkeys(pods, Told(1, 0)) and annotated(plan) == {}
    say(rank("held", 1, (1, 0)))
    plan = c.step()
    pruned()
    # no record stored: the pods' annotations are told the attempt, no release yet
    assert inplace.RELEASED_REASON not in [e.reason for e in plan.events]
    assert annotated(plan) == dict.fromkeys(pods, ("1", "0"))
    say(rank("held", 1, (1, 0)))
    plan = c.step()
    assert inplace.RELEASED_REASON in [e.reason for e in plan.events]
    assert plan.told == dict.fromkeys(pods, Told(1, 1))


def record(c: Cluster, attempts: dict[str, int]) -> None:
    """Store `attempts` as the job's record of its restart (its status)."""
    assert c.job.status is not None
    c.job = c.job.model_copy(update={"status": c.job.status.model_copy(
        update={"restart_attempt": RestartAttempt.model_validate(attempts)})})


def test_a_manager_taking_over_reads_the_attempt_from_the_jobs_record() -> None:
    c = supervised_running()
    # the manager before told the supervisors attempt 1 and recorded it, then was lost;
    # this one reaches no supervisor, and the pods' annotations still say attempt 0
    record(c, {"attempt": 1, "released": 0})
    plan = c.step()
    assert plan.told == dict.fromkeys(["job-master-0", "job-worker-0", "job-worker-1"],
                                      Told(1, 0))
    assert {o["metadata"]["annotations"][inplace.ATTEMPT]
            for o in plan.update if o["kind"] == "Pod"} == {"1"}


def test_annotations_left_behind_by_a_lost_manager_catch_up_once_the_attempt_runs() -> None:
    c = supervised_running()
    # released into attempt 1 on their channels; the manager was lost before the pods'
    # annotations were written
    record(c, {"attempt": 1, "released": 1})
    for name in ["job-master-0", "job-worker-0", "job-worker-1"]:
        c.pods[name] = supervised.overlay(c.pods[name], rank("running", 1, (1, 1)), "pytorch")
    plan = c.step()
    assert annotated(plan) == dict.fromkeys(
        ["job-master-0", "job-worker-0", "job-worker-1"], ("1", "1"))


@pytest.mark.parametrize("written", [
    {"attempt": 1, "released": 2},  # released past its attempt
    {"attempt": 2**31, "released": 0},  # past what a pod's annotations are read as
], ids=["released-past-attempt", "past-most"])
def test_a_record_that_is_not_one_is_not_read(written: dict[str, int]) -> None:
    c = supervised_running()
    record(c, written)
    plan = c.step()
    assert set(plan.told.values()) == {Told(0, 0)}
    assert [o for o in plan.update if o["kind"] == "Pod"] == []


# -- where the manager dials ---------------------------------------------------------------

@pytest.mark.parametrize(("ip", "channel"), [
    ("10.1.2.3", "10.1.2.3:29611"),
    ("fd00::5", "[fd00::5]:29611"),
    (None, None),  # no IP yet
    ("10.1.2.3:80", None),  # what the manager dials is the pod's IP, nothing else
    ("169.254.169.254/x", None),
    ("\uff11\uff10.1.2.3", None),  # digits of another script (fullwidth 1 and 0)
    (["10.1.2.3"], None),
], ids=["ipv4", "ipv6", "none", "port", "path", "fullwidth", "list"])
def test_the_manager_dials_a_supervised_pods_ip_on_the_channels_port(
        ip: object, channel: str | None) -> None:
    pod = made(commanded(["python", "train.py"]))
    pod["status"] = {"phase": "Running", "podIP": ip}
    rec = pod_record(pod)
    assert rec is not None and rec.channel == channel


def test_a_pod_with_no_supervisor_has_no_channel() -> None:
    pod = made(commanded(["python", "train.py"]), EngineConfig(restart_in_place=True))
    pod["status"] = {"phase": "Running", "podIP": "10.1.2.3"}
    rec = pod_record(pod)
    assert rec is not None and rec.in_place is not None and rec.channel is None


def test_supervisors_the_manager_cannot_reach_are_told_with_the_way_the_ranks_restart(
        ) -> None:
    event = supervised.unreachable(["job-worker-0", "job-worker-1"])
    assert (event.type, event.reason, event.message) == (
        "Warning", "RankSupervisorUnreachable",
        "The manager cannot reach the rank supervisor of job-worker-0, job-worker-1 on port "
        "29611 (a NetworkPolicy, or the port taken by the pod's own process?): their ranks "
        "restart by restarting their containers")


def test_a_lost_node_restarts_the_job_through_the_heard_supervisors_its_pod_made_again(
        ) -> None:
    c = supervised_running(replace(SUPERVISED, lost_node_grace=60))
    c.in_place.lagging = True
    c.set("job-worker-1", node="n1")
    heard = ["job-master-0", "job-worker-0"]

    def say(state: RankState) -> None:
        for name in heard:
            c.pods[name] = supervised.overlay(c.pods[name], state, "pytorch")

    say(rank("running", 0, (0, 0)))
    c.lost_nodes = (NodeState("n1", "Unknown", "2026-01-01T00:00:00Z", out_of_service=True),)
    plan = c.step()
    # the lost pod goes at once (out of service); the others' supervisors are told
    assert plan.delete == [ObjectRef("Pod", "job-worker-1", grace=0)]
    assert plan.told == dict.fromkeys(heard, Told(1, 0))
    assert [o for o in plan.update if o["kind"] == "Pod"] == []
    c.lost_nodes = ()
    c.in_place.lagging = False
    say(rank("held", 1, (1, 0)))
    plan = c.step()
    # made again for attempt 1: its files tell it (no supervisor runs at its barrier)
    assert [(o["metadata"]["name"], o["metadata"]["annotations"][inplace.ATTEMPT],
             o["metadata"]["annotations"][inplace.RELEASED]) for o in plan.create] == [
        ("job-worker-1", "1", "0")]
    c.in_place.settle(["job-worker-1"])
    say(rank("held", 1, (1, 0)))
    plan = c.step()
    assert inplace.RELEASED_REASON in [e.reason for e in plan.events]
    assert plan.told == {**dict.fromkeys(heard, Told(1, 1)), "job-worker-1": Told(1, 1)}
    assert {o["metadata"]["name"]: o["metadata"]["annotations"][inplace.RELEASED]
            for o in plan.update if o["kind"] == "Pod"} == dict.fromkeys(
        [*heard, "job-worker-1"], "1")
    assert c.job.status is not None and c.job.status.replica_statuses is not None
    assert not any(rs.restarts for rs in c.job.status.replica_statuses.values())
