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

Which path a job's replicas take, and why, is `paths` (`trainop validate` says it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainop.api.resolved import resolve
from trainop.api.templates import container
from trainop.api.types import Defaulted
from trainop.engine import inplace
from trainop.engine.config import EngineConfig
from trainop.engine.framework import Framework, batch_type

INSTALL = "trainop-supervisor-install"
"""The init container that copies the supervisor into the pod (the first one: the barrier
and the template's own run after it)."""
VOLUME = "trainop-supervisor"
DIR = "/run/trainop/bin"
BINARY = f"{DIR}/trainop-supervisor"
IN_IMAGE = "/usr/local/bin/trainop-supervisor"
"""Where the supervisor is in --rank-supervisor-image (trainop's own image: Dockerfile)."""

# the paths a job's whole-job restart takes, as `paths` says them (the supervisor's
# channel to the manager, which restarts the processes alone, is not there yet: a pod
# with the supervisor restarts its containers in place as one without)
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


def decorate(pod: dict[str, Any], main: str, config: EngineConfig) -> None:
    """Run `pod`'s main container as the supervisor's child, where it can be (`wraps`) and
    the manager has the supervisor's image."""
    image = config.rank_supervisor_image
    c = container(pod, main)
    if image is None or c is None or not wraps(pod, main):
        return
    spec = pod["spec"]
    mount = {"name": VOLUME, "mountPath": DIR, "readOnly": True}
    c["command"] = [BINARY, "--", *c["command"]]
    c["volumeMounts"] = [*(c.get("volumeMounts") or []), mount]
    spec["volumes"] = [*(spec.get("volumes") or []),
                       {"name": VOLUME, "emptyDir": {"sizeLimit": "16Mi"}}]
    install = {**inplace.trainop_container(INSTALL, [IN_IMAGE, "--install", DIR], image),
               "volumeMounts": [{**mount, "readOnly": False}]}
    spec["initContainers"] = [install, *(spec.get("initContainers") or [])]


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
        if config.rank_supervisor_image is None:
            why = "no rank supervisor: the manager has no --rank-supervisor-image"
        elif wraps(spec.template, main):
            why = f"container {main!r} names its command, which runs as the rank supervisor's child"
        else:
            why = (f"no rank supervisor: container {main!r} names no command, so its image's "
                   "ENTRYPOINT runs, which the pod does not show")
        out[rtype] = RestartPath(CONTAINERS, why)
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
