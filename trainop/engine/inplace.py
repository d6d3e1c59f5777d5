"""Whole-job restarts in place: every pod of the job restarts its containers where it is
(same pod, node, IP, volumes and name) instead of being deleted and made again.

The kubelet does the restarting (Kubernetes 1.35+: a container's `restartPolicyRules`
with the `RestartAllContainers` action ends every container of the pod, keeps the pod and
starts its init containers again); trainop tells each pod which attempt the job is on
through annotations the pod reads back as files (a downward API volume, which the kubelet
writes again a moment after the pod changes). Each pod gets two containers of trainop's:

- the barrier, its first init container, which waits until the attempt the pod was told is
  `released`: no container of the pod's own starts before;
- the agent, a container beside the main one, which ends the pod's attempt: when told a
  newer attempt it exits STOP_EXIT, and its rule restarts every container of the pod
  (barrier first); when told to `finish` it exits 0, and the pod ends as its main container
  did. Where the pod's rank supervisor (engine/supervised.py) says its manager is heard
  (the file HEARD), the agent leaves a newer attempt to it: it stops the rank's processes
  and notes the attempt it then waits in, the container kept.

A main container that fails stays ended (its exit code and message in its status, as the
failure rules read them), and the agent keeps the pod from ending. The engine then tells
every pod the next attempt, and releases it once every pod is held at its barrier. It moves
to a new attempt only once every pod ran the last one (a pod still held for it is made
again instead), so a pod held after the move was restarted by it: every container of the
old attempt has ended (the kubelet ends them all before it starts the barrier), and the
barrier lets the pod go only into the attempt its files name, the newest. No rank of an
old attempt is ever in a collective with a rank of the new one.

Where a pod's rank supervisor is heard, the supervisor is told on its channel and its
pod's annotations are left as they are until the attempt is released: the job's record of
a restart is then one write, its `status.restartAttempt` (what a manager taking over
reads), and the release waits for that write alone, whatever the job's size. A pod whose
annotations lag keeps a floor itself: its supervisor notes the attempt it is held for in
the pod's state, the barrier never lets the pod into an attempt below it, and the agent
restarts the pod only for an attempt above it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trainop.api.numbers import whole_number
from trainop.api.resolved import resolve
from trainop.api.types import Defaulted, RestartAttempt
from trainop.engine import clock
from trainop.engine import conditions as cond
from trainop.engine.config import EngineConfig
from trainop.engine.framework import Framework, batch_type
from trainop.engine.observed import InPlace, Phase, PodState, Told
from trainop.engine.plan import shown

if TYPE_CHECKING:
    from trainop.engine.round import Round

PREFIX = "trainop.kubeflow.org"
ATTEMPT = f"{PREFIX}/attempt"
RELEASED = f"{PREFIX}/attempt-released"
FINISH = f"{PREFIX}/finish"
"""Set on a pod whose main container ended for good: its agent exits and the pod ends."""
TOLD_AT = f"{PREFIX}/told-at"
"""When the manager last told the pod something: it tells it again where it has not acted
within NUDGE seconds."""
TOLD_AGAIN = f"{PREFIX}/told-again"
"""How many times the pod was told again what it was last told (at most NUDGES)."""
BARRIER = "trainop-barrier"
AGENT = "trainop-restart"
FILES = "trainop-attempt"
"""The downward API volume with the files `attempt`, `released` and `finish`."""
STATE = "trainop-attempt-state"
"""An emptyDir (kept through restarts in place): the attempt the barrier let the pod into,
which the agent watches."""
STOP_EXIT = 88
"""The agent's exit code when it stops the pod for a newer attempt."""
NUDGE = 5.0
"""Seconds a pod has to act on what it was told before it is told again. The kubelet writes
a pod's downward API files again as it syncs the pod after a change, and may miss one (a
remount under way with the pod as it was clears the request of the newer: its
actual_state_of_world, MarkVolumeAsMounted after MarkRemountRequired); the files then wait
for its periodic sync, a minute or more. Any change to the pod syncs it again."""
NUDGES = 3
MOST_ATTEMPTS = 2**31 - 1
"""The largest attempt a pod's annotations are read as (a restart count is an int32): an
annotation past it, or not ASCII digits, makes the pod one not restarted in place."""
"""Times a pod is told again: a pod whose node is gone shows its agent running for ever."""
RECORD_AGAIN = 1.0
"""Seconds until a job whose record of its attempt was not stored is looked at again."""
STOP_GRACE = 30.0
"""Seconds a pod has to come to the barrier of a new attempt; one that has not (its node's
kubelet does not restart pods in place) is deleted and made again."""

# the events' reasons
RESTARTING = "RestartingInPlace"
RELEASED_REASON = "AttemptReleased"
LATE = "NotRestartedInPlace"
TOLD_AGAIN_REASON = "AttemptToldAgain"
UNAVAILABLE = "InPlaceRestartUnavailable"
DROPPED = ("The API server drops containers' restartPolicyRules (its feature gate "
           "ContainerRestartRules is off)")
REFUSED = ("The API server refuses the RestartAllContainers action (its feature gate "
           "RestartAllContainersOnContainerExits is off)")
FALLBACK = "the job restarts by making its pods again"

FILES_DIR = "/run/trainop/attempt"
STATE_DIR = "/run/trainop/state"
"""Where the STATE volume is mounted: `attempt` (the barrier's, then the supervisor's) and
HEARD."""
HEARD = f"{STATE_DIR}/heard"
"""Exists while the pod's rank supervisor hears its manager (its --heard)."""
# POSIX sh (busybox or dash); the files are written whole (the kubelet swaps a link). The
# state's attempt is the pod's floor: the files may lag behind what its supervisor was told.
BARRIER_SCRIPT = f"""\
f={FILES_DIR}
until a=$(cat $f/attempt) && [ "$(cat $f/released)" = "$a" ] &&
  [ "$a" -ge "$(cat {STATE_DIR}/attempt 2>/dev/null || echo 0)" ]; do sleep 0.2; done
echo "$a" >{STATE_DIR}/attempt
echo "attempt $a"
"""
AGENT_SCRIPT = f"""\
f={FILES_DIR}
while a=$(cat {STATE_DIR}/attempt); [ "$(cat $f/attempt)" -le "$a" ] || [ -e {HEARD} ]; do
  [ "$(cat $f/attempt)" = "$a" ] && [ "$(cat $f/finish)" = true ] && exit 0
  sleep 0.2
done
echo "attempt $(cat $f/attempt): stopping attempt $a"
exit {STOP_EXIT}
"""
RESTART_POD = {"action": "RestartAllContainers",
               "exitCodes": {"operator": "In", "values": [STOP_EXIT]}}


def applies(job: Defaulted, pods: tuple[PodState, ...] | list[PodState], fw: Framework[Any],
            config: EngineConfig) -> bool:
    """Whether the job's pods restart in place: it asks for it (`enabled`), or pods made to
    are still there (the job goes on as it started: a pod held at its barrier is released
    by this module only); never where a replica is a batch/v1 Job (mpi-operator's
    launcher, whose API has no restartScope: its own controller restarts it)."""
    return batch_type(fw, job, config) is None and (
        enabled(job, config) or any(p.in_place is not None for p in pods))


def enabled(job: Defaulted, config: EngineConfig) -> bool:
    """Whether the job's whole-job restarts are in place: it restarts as a whole
    (`restartScope: Job`), asks for it (`runPolicy.restartInPlace`) or leaves it to the
    manager (--restart-in-place), and the cluster can."""
    return asked(job, config) and config.in_place_unavailable is None


def asked(job: Defaulted, config: EngineConfig) -> bool:
    """Whether the job's whole-job restarts are to be in place, where the cluster can (a
    job whose template restarts its pods itself is not, by the manager's flag: validation
    refuses it with the field)."""
    return resolve(job).restarts_in_place(config.restart_in_place)


@dataclass(frozen=True)
class Attempts:
    """The job's attempts as its pods are told them."""

    current: int = 0
    released: int = 0

    @property
    def under_way(self) -> bool:
        """A restart is under way: the pods stop the old attempt, the new one waits."""
        return self.current > self.released


def attempts(pods: list[PodState], record: RestartAttempt | None = None) -> Attempts:
    """The job's attempt and the one released: the highest any pod was told or the job's
    record (`record_of`) says (a round that told only some pods, the manager stopped in
    between, is finished by the next)."""
    told = [(t.attempt, t.released) for p in pods if (t := p.in_place) is not None]
    if record is not None:
        told.append((record.attempt, record.released))
    return Attempts(max((a for a, _ in told), default=0), max((r for _, r in told), default=0))


def record_of(job: Defaulted) -> RestartAttempt | None:
    """The job's record of its attempts (its status as stored); None where it has none, or
    one that is not one (released past its attempt, or past MOST_ATTEMPTS: a status someone
    else wrote)."""
    record = job.status.restart_attempt if job.status else None
    if record is None or not 0 <= record.released <= record.attempt <= MOST_ATTEMPTS:
        return None
    return record


def recorded(job: Defaulted) -> int:
    """The attempt the job's record says it is on (0: none)."""
    record = record_of(job)
    return record.attempt if record is not None else 0


def on_channels(r: Round) -> bool:
    """Whether the restart under way is told to heard supervisors on their channels alone:
    the job's record of the attempt is stored, or this round moved to the attempt (and
    writes the record). Where the stored status does not keep it (a CRD of before, which
    the API server prunes the field by), the pods' annotations are the record, as for
    pods without a supervisor."""
    assert r.attempts is not None
    return recorded(r.job) >= r.attempts.current or r.attempts.current > attempts(
        r.observed.live_pods(), record_of(r.job)).current


def annotated(ip: InPlace) -> int:
    """The attempt a pod's annotations tell (where a supervisor's word is laid over them,
    theirs)."""
    return ip.written.attempt if ip.written is not None else ip.attempt


def decorate(pod: dict[str, Any], config: EngineConfig, at: Attempts) -> None:
    """Make `pod` restart in place: the annotations and the files they become, the barrier
    (before the template's init containers) and the agent."""
    meta = pod["metadata"]
    meta["annotations"] = {**(meta.get("annotations") or {}), ATTEMPT: str(at.current),
                           RELEASED: str(at.released), FINISH: "false"}
    spec = pod["spec"]
    spec["volumes"] = [*(spec.get("volumes") or []), {
        "name": FILES, "downwardAPI": {"items": [
            {"path": name, "fieldRef": {"fieldPath": f"metadata.annotations['{key}']"}}
            for name, key in (("attempt", ATTEMPT), ("released", RELEASED),
                              ("finish", FINISH))]}},
        {"name": STATE, "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}}]
    spec["initContainers"] = [_container(BARRIER, BARRIER_SCRIPT, config),
                              *(spec.get("initContainers") or [])]
    agent = _container(AGENT, AGENT_SCRIPT, config)
    agent.update(restartPolicy="Never", restartPolicyRules=[RESTART_POD])
    spec["containers"] = [*(spec.get("containers") or []), agent]


def _container(name: str, script: str, config: EngineConfig) -> dict[str, Any]:
    return {**trainop_container(name, ["sh", "-c", script], config.restart_agent_image),
            "volumeMounts": mounts()}


def mounts() -> list[dict[str, Any]]:
    """The attempt files (read only) and the state, as the barrier and agent mount them."""
    return [{"name": FILES, "mountPath": FILES_DIR, "readOnly": True},
            {"name": STATE, "mountPath": STATE_DIR}]


def trainop_container(name: str, command: list[str], image: str) -> dict[str, Any]:
    """A small container of trainop's own in a job's pod."""
    return {
        "name": name, "image": image, "imagePullPolicy": "IfNotPresent", "command": command,
        "resources": {"limits": {"cpu": "100m", "memory": "20Mi"},
                      "requests": {"cpu": "10m", "memory": "10Mi"}},
        # what a namespace of the restricted Pod Security level admits
        "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True,
                            "runAsUser": 65534, "capabilities": {"drop": ["ALL"]},
                            "seccompProfile": {"type": "RuntimeDefault"}},
    }


def probe_pod(config: EngineConfig) -> dict[str, Any]:
    """A pod with what restarting in place asks of the API server (the agent and its
    rule), for the manager to create with dryRun as it starts: nothing is stored."""
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod",
                           "metadata": {"generateName": "trainop-restart-in-place-"},
                           "spec": {"restartPolicy": "Never", "containers": []}}
    decorate(pod, config, Attempts())
    return pod


def told_in(annotations: dict[str, Any]) -> Told | None:
    """The job's attempts as a pod's annotations (or a patch of them) tell them, read
    strictly; None where they tell none (a pod not made to restart in place, an attempt
    past MOST_ATTEMPTS or not ASCII digits)."""
    attempt = whole_number(annotations.get(ATTEMPT), MOST_ATTEMPTS)
    released = whole_number(annotations.get(RELEASED), MOST_ATTEMPTS)
    if attempt is None or released is None:
        return None
    return Told(attempt, released, annotations.get(FINISH) == "true")


def told(pod: PodState, at: Attempts, finish: bool, now: str, on_channel: bool = False
         ) -> dict[str, Any] | None:
    """The patch that tells `pod` the job's attempts (and to finish), where its annotations
    say otherwise; none, `on_channel`, for a pod whose supervisor is heard and not told to
    finish (it is told on its channel: plan.told)."""
    ip = pod.in_place
    if ip is None or (on_channel and ip.heard and not finish):
        return None
    was = ip.written or Told(ip.attempt, ip.released, ip.finish)
    if (was.attempt, was.released, was.finish) == (at.current, at.released, finish):
        return None
    return _patch(pod, {ATTEMPT: str(at.current), RELEASED: str(at.released),
                        FINISH: str(finish).lower(), TOLD_AT: now, TOLD_AGAIN: "0"})


def again_in(pod: PodState, now: dt.datetime) -> float | None:
    """Seconds until `pod` is told again what it was last told (none left: now), where it
    shows it has not acted on it; None where it is not to be."""
    ip = pod.in_place
    if ip is None or ip.told_at is None or ip.told_again >= NUDGES or not unheard(pod):
        return None
    return NUDGE - (now - clock.parse(ip.told_at)).total_seconds()


def told_again(pod: PodState, now: str) -> dict[str, Any]:
    """The patch that tells `pod` again what it was told (again_in): the kubelet, seeing
    the pod change, writes its files afresh."""
    assert pod.in_place is not None
    return _patch(pod, {TOLD_AT: now, TOLD_AGAIN: str(pod.in_place.told_again + 1)})


def _patch(pod: PodState, annotations: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod.name, "annotations": annotations}}


def unheard(pod: PodState) -> bool:
    """Whether the pod shows it has not acted on what it was told, where its files would
    have said so: told a newer attempt or to finish, its agent runs on; released, its
    barrier still holds it."""
    ip = pod.in_place
    if ip is None or not alive(pod):
        return False
    if ip.held:
        return ip.released == ip.attempt
    return ip.agent_runs and (ip.attempt > ip.released or ip.finish)


def alive(pod: PodState) -> bool:
    """Whether the pod can still restart in place: its main container ended (or not), but
    the pod did not (its agent runs)."""
    return pod.in_place is not None and pod.in_place.alive and not pod.terminating


def held(pod: PodState) -> bool:
    """Whether the pod waits at its barrier, none of its own containers running."""
    return alive(pod) and pod.in_place is not None and pod.in_place.held


def ran(pod: PodState) -> bool:
    """Whether the pod, alive, went past its barrier into the attempt it was told (its main
    container runs or ran). One that did not may still start that attempt, however long
    after: the job moves on without it."""
    return alive(pod) and not held(pod) and pod.phase in (
        Phase.RUNNING, Phase.SUCCEEDED, Phase.FAILED)


def restarts_in_place(r: Round, live: list[PodState]) -> bool:
    """Whether the job's pods can restart in place: the API server kept their restart
    rules (else a Normal event says the job restarts by making its pods again)."""
    if all(p.in_place is None or p.in_place.kept_rules for p in live):
        return True
    r.report.event(UNAVAILABLE, f"{DROPPED}: {FALLBACK}")
    return False


def next_attempt(r: Round, live: list[PodState]) -> None:
    """Move the job to its next attempt: every pod stops the one it runs, and waits at
    its barrier until the new one is released. Pods that did not run the last attempt
    (ended, or not past their barrier yet) are made again for it: no pod may start the
    last one late, which makes every pod held after this move one it restarted."""
    assert r.attempts is not None
    if r.attempts.under_way:
        return  # a restart is under way: every pod stops already
    r.attempts = Attempts(r.attempts.current + 1, r.attempts.released)
    again = [p for p in live if not ran(p)]
    r.acts.delete_pods(again, "restarting the whole job")
    made = f"; {len(again)} made again" if again else ""
    r.report.event(RESTARTING, f"Restarting the {len(live) - len(again)} pod(s) of the job in "
                        f"place, attempt {r.attempts.current}{made}")


def carry_on(r: Round) -> bool:
    """Carry on a restart in place under way: release the new attempt once every pod is
    held at its barrier for it; make again the pods that ended, and those that did not
    stop within STOP_GRACE. True while it is under way (the round ends: nothing
    of the old attempt is judged, and the job is not Running)."""
    if r.attempts is None or not r.attempts.under_way:
        return False
    attempt = r.attempts.current
    resolved = r.resolved
    mine = [p for p in r.observed.live_pods() if resolved.in_spec(p.replica_type, p.index)]
    # those that ended are made again, and so are those not told this attempt that did
    # not run the last (the manager stopped before it deleted them: next_attempt)
    r.acts.delete_pods([p for p in mine if not alive(p) or (
        p.in_place is not None and p.in_place.attempt < attempt and not ran(p))],
        "restarting the whole job")
    at_barrier = {(p.replica_type, p.index) for p in mine
                  if held(p) and p.in_place is not None and p.in_place.attempt == attempt}
    if all(slot in at_barrier for slot in resolved.slots()):
        if recorded(r.job) < attempt and any(
                annotated(p.in_place) < attempt for p in mine if p.in_place is not None):
            # no record of the attempt is stored (its write failed, or the stored status
            # drops it): the pods' annotations become the record (tell), and the release
            # waits for one or the other
            r.plan.requeue(RECORD_AGAIN)
            return True
        r.attempts = Attempts(attempt, attempt)
        r.report.event(RELEASED_REASON, f"Every pod stopped for attempt {attempt}, which starts")
        return True
    restarting = cond.get(r.status, cond.RESTARTING)
    since = clock.parse(restarting.last_transition_time) if restarting and \
        restarting.last_transition_time else r.now_dt
    left = STOP_GRACE - (r.now_dt - since).total_seconds()
    # (a pod made since, for this attempt, is on its way to the barrier: not late)
    late = [p for p in mine if alive(p) and (p.replica_type, p.index) not in at_barrier
            and not (p.created and clock.parse(p.created) > since)]
    if left <= 0 and late:
        r.acts.delete_pods(late, "not restarted in place")
        r.report.event(LATE, f"{shown(p.name for p in late)} did not stop for attempt {attempt} "
                      f"within {STOP_GRACE:.0f}s: made again", warning=True)
    elif late:
        r.plan.requeue(left)
    r.acts.create_missing()  # made for the new attempt, they wait at the barrier for it
    return True


def tell(r: Round) -> None:
    """Record the job's attempts in its status; tell every pod that restarts in place the
    job's attempts where it was told otherwise, and to finish where its main container
    succeeded or the job ended (its agent ends, and the pod as its main container did);
    tell again a pod that has not acted on it within NUDGE. The pods this round deletes
    are left alone."""
    at = r.attempts
    if at is None:
        return
    if at.current or r.status.restart_attempt is not None:
        r.status.restart_attempt = RestartAttempt(attempt=at.current, released=at.released)
    doomed = {ref.name for ref in r.plan.delete if ref.kind == "Pod"}
    over = cond.is_finished(r.status)
    steady = not at.under_way  # (else every pod restarts, these too)
    channel = at.under_way and on_channels(r)
    again = []
    for p in r.observed.live_pods():
        if p.name in doomed or p.in_place is None:
            continue
        finish = over or (steady and p.phase == Phase.SUCCEEDED)
        r.plan.told[p.name] = Told(at.current, at.released, finish)
        if (patch := told(p, at, finish, r.now, channel)) is not None:
            r.plan.update.append(patch)
        elif (left := again_in(p, r.now_dt)) is not None:
            if left > 0:
                r.plan.requeue(left)
            else:
                r.plan.update.append(told_again(p, r.now))
                again.append(p.name)
    if again:
        r.report.event(TOLD_AGAIN_REASON, f"{shown(again)} did not act on what "
                                   f"{'it was' if len(again) == 1 else 'they were'} told "
                                   f"within {NUDGE:.0f}s (the kubelet may not have written "
                                   f"the files again): told again")
