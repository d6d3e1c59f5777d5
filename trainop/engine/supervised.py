"""The rank supervisor in a pod that restarts in place (supervisor/, a static binary): the
main container's command runs as the supervisor's child, so that a rank's processes can be
stopped and started again with the container kept.

A pod gets it where its main container names a `command`: an init container from
--rank-supervisor-image copies the supervisor into an emptyDir (`trainop-supervisor
--install`, no shell or cp needed in that image), and the main container's command becomes
`<supervisor> -- <command>`; its args are left as they are, so the process the container
starts is the supervisor, then the template's command and args exactly (`$(VAR)`
references as the kubelet expands them). A main container with no command runs its image's
ENTRYPOINT, which the pod's spec does not show: it keeps the container-level path
(engine/inplace.py), as every pod does where no image is given.

The supervisor serves the manager's channel on the pod's PORT (supervisor/channel.go):
every request and answer is signed with the job's key, which the manager makes (a Secret
of the job's, key_secret) and the pod's main container gets in its environment, where
the supervisor takes it before the command runs. It notes for the pod's agent the attempt
it is in and whether its manager is heard (engine/inplace.py's state volume, mounted in
the main container too): unheard, a pod restarts as one without a supervisor. The lead
pod's supervisor also passes on its rank's progress reports (engine/progress.py).

Which path a job's replicas take, and why, is `paths` (`trainop validate` says it).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, replace
from typing import Any

from trainop.api.resolved import resolve
from trainop.api.resources import SECRETS
from trainop.api.templates import container
from trainop.api.types import Defaulted
from trainop.engine import inplace
from trainop.engine.config import EngineConfig
from trainop.engine.framework import Framework, batch_type
from trainop.engine.labels import job_labels, object_meta
from trainop.engine.observed import Ended, Observed, Phase, PodState, RankState, Told
from trainop.engine.plan import Event, shown

INSTALL = "trainop-supervisor-install"
"""The init container that copies the supervisor into the pod (the first one: the barrier
and the template's own run after it)."""
VOLUME = "trainop-supervisor"
DIR = "/run/trainop/bin"
BINARY = f"{DIR}/trainop-supervisor"
IN_IMAGE = "/usr/local/bin/trainop-supervisor"
"""Where the supervisor is in --rank-supervisor-image (trainop's own image: Dockerfile)."""
PORT = 29611
"""The pod's port the supervisor serves its channel on: none of the frameworks' own (2222,
23456, 29500, 9999, 6666, 37777), below the kernel's ephemeral range. A pod whose own
process holds it first keeps the container-level path."""
PROGRESS_FILE = f"{inplace.STATE_DIR}/progress.json"
"""Where the lead pod's rank writes its progress reports (engine/progress.py): its
supervisor passes them on to the manager."""
KEY_ENV = "TRAINOP_SUPERVISOR_KEY"
KEY = "key"
"""The key in the job's KEY_SECRET: 32 random bytes, base64url unpadded (as KEY_ENV holds
it)."""
GRACE = 30
"""Seconds the rank has to stop for a newer attempt, where its pod's
terminationGracePeriodSeconds does not say (the kubelet's default)."""
GRACE_MOST = 365 * 24 * 3600
"""The longest grace the supervisor is given (a year): one the template makes longer would
not fit its duration flag, and the supervisor would not start."""

# the paths a job's whole-job restart takes, as `paths` says them
PROCESSES = "processes in place"
"""The rank supervisors stop and start the ranks' processes, the containers kept (the
kubelet's path, CONTAINERS, where the manager cannot reach a supervisor)."""
CONTAINERS = "containers in place"
PODS = "pods made again"


@dataclass(frozen=True)
class RestartPath:
    """How one replica type's pods restart when the whole job does, and why."""

    how: str
    why: str


def wraps(template: dict[str, Any] | None, main: str) -> bool:
    """Whether the template's main container can run as the supervisor's child: it names
    its command (a list of strings, as validation holds it to)."""
    c = container(template, main)
    return c is not None and bool(c.get("command"))


def key_secret(job_name: str) -> str:
    """The name of the Secret holding the job's channel key."""
    return f"{job_name}-trainop-ranks"


def supervises(job: Defaulted, fw: Framework[Any], config: EngineConfig,
               pods: list[PodState]) -> bool:
    """Whether some of the job's pods run under the supervisor: they restart in place, the
    manager has its image, and a replica type's main container names its command."""
    return (config.rank_supervisor_image is not None
            and inplace.applies(job, pods, fw, config)
            and any(wraps(spec.template, job.main_container)
                    for spec in job.spec.replica_specs.values()))


def wants_key(job: Defaulted, observed: Observed, fw: Framework[Any],
              config: EngineConfig) -> bool:
    """Whether the job needs its key Secret made: the runtime then offers a fresh key in
    `Observed.supervisor_key`."""
    live = [p for p in observed.pods if not p.terminating]
    return (observed.object(SECRETS.kind, key_secret(job.name)) is None
            and supervises(job, fw, config, live))


def objects(job: Defaulted, observed: Observed, fw: Framework[Any], config: EngineConfig
            ) -> list[dict[str, Any]]:
    """The job's key Secret, where its ranks run under the supervisor and a key is
    offered (made once, never updated: a key that changed would leave the running
    supervisors deaf to their manager)."""
    key = observed.supervisor_key
    if key is None or not wants_key(job, observed, fw, config):
        return []
    return [SECRETS.new(object_meta(job, key_secret(job.name), job_labels(job)), type="Opaque",
                        data={KEY: base64.b64encode(key.encode()).decode()})]


def decorate(pod: dict[str, Any], job: Defaulted, at: inplace.Attempts,
             config: EngineConfig, lead: bool) -> bool:
    """Run `pod`'s main container as the supervisor's child, where it can be (`wraps`) and
    the manager has the supervisor's image: serving the channel, with the job's key; the
    `lead` pod's supervisor also passes its rank's progress reports on (engine/progress.py).
    Whether it does."""
    image = config.rank_supervisor_image
    main = job.main_container
    c = container(pod, main)
    if image is None or c is None or not wraps(pod, main):
        return False
    spec = pod["spec"]
    mount = {"name": VOLUME, "mountPath": DIR, "readOnly": True}
    grace = spec.get("terminationGracePeriodSeconds")
    if not isinstance(grace, int) or isinstance(grace, bool) or grace < 0:
        grace = GRACE
    grace = min(grace, GRACE_MOST)
    reports = [] if not lead else [
        "--progress", PROGRESS_FILE, "--progress-every", f"{config.progress_interval:g}s"]
    c["command"] = [BINARY, "--listen", f":{PORT}", "--pod", pod["metadata"]["name"],
                    "--attempt", str(at.current), "--files", inplace.FILES_DIR,
                    "--state", f"{inplace.STATE_DIR}/attempt", "--heard", inplace.HEARD,
                    "--grace", f"{grace}s", *reports, "--", *c["command"]]
    c["env"] = [*(c.get("env") or []), {"name": KEY_ENV, "valueFrom": {"secretKeyRef": {
        "name": key_secret(job.name), "key": KEY}}}]
    c["volumeMounts"] = [*(c.get("volumeMounts") or []), mount, *inplace.mounts()]
    spec["volumes"] = [*(spec.get("volumes") or []),
                       {"name": VOLUME, "emptyDir": {"sizeLimit": "16Mi"}}]
    install = {**inplace.trainop_container(INSTALL, [IN_IMAGE, "--install", DIR], image),
               "volumeMounts": [{**mount, "readOnly": False}]}
    spec["initContainers"] = [install, *(spec.get("initContainers") or [])]
    return bool(reports)


UNREACHABLE = "RankSupervisorUnreachable"


def unreachable(pods: list[str]) -> Event:
    """The Warning that tells a job the manager cannot reach its pods' supervisors (said
    once per job by the manager that finds it)."""
    return Event("Warning", UNREACHABLE, (
        f"The manager cannot reach the rank supervisor of {shown(pods)} on port {PORT} (a "
        "NetworkPolicy, or the port taken by the pod's own process?): their ranks restart "
        "by restarting their containers"))


def overlay(pod: PodState, rank: RankState, main: str) -> PodState:
    """`pod` as its rank supervisor, heard by the manager, says it is. Its rank's process
    ended: the replica's phase and exit code are that end's, as a main container's end
    would be (the container itself lives on). Held: the pod waits for the attempt it was
    told, as at its barrier. What it was told counts as told to the pod (it acts on that
    itself: no pod is told again for the sake of its files); what its annotations say is
    kept as `written` (they lag while a restart is under way: engine/inplace.py's tell). A
    pod that does not restart in place, or no longer can, is as it was."""
    ip = pod.in_place
    if ip is None or not ip.alive or pod.terminating:
        return pod
    told = rank.told
    in_place = replace(ip, attempt=max(ip.attempt, told.attempt),
                       released=max(ip.released, told.released), finish=ip.finish or told.finish,
                       held=rank.phase == "held", agent_runs=False, heard=True,
                       written=ip.written or Told(ip.attempt, ip.released, ip.finish))
    if rank.phase != "exited" or rank.last is None:
        return replace(pod, in_place=in_place)
    code, at = rank.last.code, rank.last.at
    return replace(pod, phase=Phase.SUCCEEDED if code == 0 else Phase.FAILED, exit_code=code,
                   reason=None if code == 0 else rank.last.reason or "Error",
                   exit_codes=((main, code),),
                   ended=None if code == 0 else Ended(main, at), in_place=in_place)


def paths(job: Defaulted, fw: Framework[Any], config: EngineConfig) -> dict[str, RestartPath]:
    """How each replica type's pods restart when the whole job restarts, and why."""
    if not inplace.asked(job, config):
        return dict.fromkeys(job.spec.replica_specs, RestartPath(PODS, _not_asked(job)))
    why = config.in_place_unavailable
    if (batch := batch_type(fw, job, config)) is not None:
        why = f"its {batch} is a batch/v1 Job, which the Job controller restarts"
    if why is not None:
        return dict.fromkeys(job.spec.replica_specs, RestartPath(PODS, why))
    out = {}
    for rtype, spec in job.spec.replica_specs.items():
        main = job.main_container
        how = CONTAINERS
        if config.rank_supervisor_image is None:
            why = "no rank supervisor: the manager has no --rank-supervisor-image"
        elif wraps(spec.template, main):
            how = PROCESSES
            why = (f"container {main!r} names its command, which runs as the rank "
                   "supervisor's child (containers in place where the manager cannot reach "
                   f"the supervisor on port {PORT})")
        else:
            why = (f"no rank supervisor: container {main!r} names no command, so its image's "
                   "ENTRYPOINT runs, which the pod does not show")
        out[rtype] = RestartPath(how, why)
    return out


def _not_asked(job: Defaulted) -> str:
    rp = job.spec.run_policy
    if rp.restart_scope != "Job":
        return "runPolicy.restartScope is not Job: each pod restarts on its own"
    if rp.restart_in_place is False:
        return "runPolicy.restartInPlace is false"
    if resolve(job).template_restarts_all:
        return "a template's container restarts its pod itself (restartPolicyRules)"
    return "the manager restarts no job in place (its --restart-in-place is off)"
