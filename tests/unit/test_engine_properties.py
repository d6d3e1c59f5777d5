"""Properties of the engine over generated jobs and observed states (hypothesis)."""

from __future__ import annotations

import datetime as dt

from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from tests.jobs import TYPICAL, job
from tests.sim import T0, Cluster
from trainop.api import KINDS, InvalidJob, Job
from trainop.engine import ClusterAddressing, Observed, OwnedObject, PodState, reconcile
from trainop.engine.labels import replica_name
from trainop.frameworks import framework_of

PHASES = ["Pending", "Running", "Succeeded", "Failed", "Unknown"]
POLICIES = ["Always", "OnFailure", "Never", "ExitCode"]


@st.composite
def jobs(draw: st.DrawFn, policies: list[str] = POLICIES) -> Job:
    kind = draw(st.sampled_from(sorted(KINDS)))
    replicas = {rt: draw(st.integers(0, 4)) for rt in TYPICAL[kind]}
    # a leading type of one replica, or of none (which validation refuses, as it refuses
    # any other job that could never run)
    for single in ("Master", "Launcher", "Chief", "Scheduler"):
        if single in replicas:
            replicas[single] = draw(st.integers(0, 1))
    policy = draw(st.sampled_from(policies))
    run_policy = draw(st.fixed_dictionaries({}, optional={
        "backoffLimit": st.integers(0, 5), "activeDeadlineSeconds": st.integers(0, 500),
        "ttlSecondsAfterFinished": st.integers(0, 500),
        "cleanPodPolicy": st.sampled_from(["All", "Running", "None"]),
        "suspend": st.booleans(), "restartScope": st.sampled_from(["Replica", "Job"])}))
    try:
        return job(kind, replicas, spec={"runPolicy": run_policy},  # type: ignore[arg-type]
                   replica_extra={rt: {"restartPolicy": policy} for rt in replicas})
    except InvalidJob:
        reject()  # e.g. no replica at all: validation refuses it, the engine never sees it
        raise


@st.composite
def observed_for(draw: st.DrawFn, j: Job) -> Observed:
    pods, services = [], []
    for rtype, rspec in j.spec.replica_specs.items():
        # also indexes past the replica count: pods and services left from a larger spec
        # (a type of one pod without an index, MPI's launcher, has no other)
        extra = 0 if rtype in j.info.unindexed_types else 2
        for i in range((rspec.replicas or 0) + extra):
            if draw(st.booleans()):
                services.append(OwnedObject("Service", replica_name(j, rtype, i)))
            if draw(st.booleans()):
                pods.append(PodState(
                    replica_name(j, rtype, i), rtype, i, phase=draw(st.sampled_from(PHASES)),
                    terminating=draw(st.booleans()),
                    exit_code=draw(st.one_of(st.none(), st.integers(0, 255))),
                    restarts=draw(st.integers(0, 6)), ready=draw(st.booleans())))
    return Observed(pods=tuple(pods), objects=tuple(services))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_never_raises_and_never_plans_an_object_twice(data: st.DataObject) -> None:
    j = data.draw(jobs())
    observed = data.draw(observed_for(j))
    now = T0 + dt.timedelta(seconds=data.draw(st.integers(0, 1000)))
    plan = reconcile(j, observed, now, framework_of(j), ClusterAddressing())
    created = [(o["kind"], o["metadata"]["name"]) for o in plan.to_create]
    assert len(created) == len(set(created))
    existing = {p.name for p in observed.pods}
    assert not existing & {name for kind, name in created if kind == "Pod"}
    services = {o.name for o in observed.objects}
    assert not services & {name for kind, name in created if kind == "Service"}
    deleted = [(r.kind, r.name) for r in plan.delete]
    assert len(deleted) == len(set(deleted))
    assert not set(created) & set(deleted)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(j=jobs(policies=["Never", "ExitCode"]),
       outcome=st.lists(st.sampled_from(["Succeeded", "Failed"]), min_size=1),
       code=st.integers(1, 127))
def test_terminal_once_every_replica_has_terminated(j: Job, outcome: list[str],
                                                    code: int) -> None:
    """Replicas that end for good (success, or a failure no policy retries) end the job."""
    j.spec.run_policy.suspend = False
    j.spec.run_policy.active_deadline_seconds = None
    c = Cluster(j)
    for step in range(40):
        c.step()
        if c.condition("Succeeded") or c.condition("Failed"):
            break
        for n, name in enumerate(sorted(c.pods)):
            phase = outcome[(n + step) % len(outcome)]
            c.set(name, phase=phase, exit_code=0 if phase == "Succeeded" else code)
    finished = [x for x in ("Succeeded", "Failed") if c.condition(x) and
                c.condition(x).status == "True"]
    assert len(finished) == 1, c.job.status
    c.step()
    assert c.plan().writes == 0 or c.deleted_job
