"""MPIJob's default transport, as training-operator v1 runs it: the launcher's mpirun starts
the ranks with `kubectl exec` into the workers' pods.

What a job gets (pkg/controller.v1/mpi/ at release-1.9; the tests cite the lines):
- the ConfigMap `{job}-config`: `hostfile` (worker pod names and slots), `kubexec.sh` (the
  remote-shell agent mpirun calls: kubectl exec into the named pod) and `discover_hosts.sh`
  (the running workers, for elastic Horovod), kept current as workers come and go;
- the ServiceAccount, Role and RoleBinding `{job}-launcher`: the launcher may read pods and
  exec into its own job's workers, and nothing else;
- the launcher pod `{job}-launcher`, whose `kubectl-delivery` init container copies kubectl
  into a shared emptyDir, with the config mounted at /etc/mpi;
- workers `{job}-worker-{i}` that sleep (when their container has no command) until the
  launcher execs the ranks into them.
"""

from __future__ import annotations

import shlex
from typing import Any

from trainop.api.jobs.mpijob import MPIJobSpec
from trainop.api.model import settled
from trainop.api.resolved import resolve
from trainop.api.resources import CONFIGMAPS, ROLEBINDINGS, ROLES, SERVICEACCOUNTS
from trainop.api.templates import containers
from trainop.api.types import Defaulted
from trainop.engine import Addressing, EngineConfig, Observed, Phase
from trainop.engine.framework import spec_of
from trainop.engine.labels import app_labels, object_meta, replica_name
from trainop.frameworks.common import host_slots

CONFIG_VOLUME = "mpi-job-config"
CONFIG_MOUNT = "/etc/mpi"
KUBEXEC = "kubexec.sh"
HOSTFILE = "hostfile"
DISCOVER_HOSTS = "discover_hosts.sh"
KUBECTL_VOLUME = "mpi-job-kubectl"
KUBECTL_MOUNT = "/opt/kube"
DELIVERY = "kubectl-delivery"
DELIVERY_RESOURCES = {"cpu": "100m", "memory": "512Mi", "ephemeral-storage": "5Gi"}
SCRIPT_MODE = 0o555
HOSTFILE_MODE = 0o444


def launcher_name(job: Defaulted) -> str:
    """The launcher's pod, and its ServiceAccount, Role and RoleBinding."""
    return f"{job.name}-launcher"


def config_map_name(job: Defaulted) -> str:
    return f"{job.name}-config"


def _spec(job: Defaulted) -> MPIJobSpec:
    return spec_of(job, MPIJobSpec)


def slots(job: Defaulted) -> int:
    """Slots (ranks) per worker."""
    return settled(_spec(job).slots_per_worker, "spec.slotsPerWorker")


def gpu_launcher(job: Defaulted) -> bool:
    """Whether the launcher asks for GPUs (a resource limit named like one): it then
    hosts ranks too, and keeps the NVIDIA_* variables its image sets."""
    template = job.spec.replica_specs["Launcher"].template or {}
    for c in containers(template):
        for name in ((c.get("resources") or {}).get("limits") or {}):
            if str(name).endswith(".com/gpu") or "gpu" in str(name):
                return True
    return False


def service_account(job: Defaulted) -> tuple[str, bool]:
    """The launcher's ServiceAccount, and whether trainop makes it: a template that names
    one brings its own."""
    template = job.spec.replica_specs["Launcher"].template or {}
    named = (template.get("spec") or {}).get("serviceAccountName")
    return (str(named), False) if named else (launcher_name(job), True)


def worker_pods(job: Defaulted) -> list[str]:
    """Every worker's pod name, in index order."""
    return [replica_name(job, "Worker", i) for i in range(resolve(job).replicas_of("Worker"))]


def hostfile(job: Defaulted, addr: Addressing) -> str:
    names = worker_pods(job)
    if gpu_launcher(job):
        names.insert(0, launcher_name(job))
    hosts = host_slots([addr.pod_host(n) for n in names], slots(job))
    return "".join(f"{h} slots={n}\n" for h, n in hosts.items())


def kubexec(job: Defaulted) -> str:
    """The remote-shell agent: mpirun calls it with a host (a pod name) and a command."""
    target = f"{KUBECTL_MOUNT}/kubectl exec ${{POD_NAME}}"
    main = _spec(job).main_container
    if main:
        # validation allows only a container name here; quoted all the same, as anything
        # that goes into a script
        target += f" --container {shlex.quote(main)}"
    return f'#!/bin/sh\nset -x\nPOD_NAME=$1\nshift\n{target} -- /bin/sh -c "$*"'


def discover_hosts(job: Defaulted, observed: Observed, addr: Addressing) -> str:
    """The running workers, by name, with their slots (the launcher too if it has GPUs)."""
    n = slots(job)
    text = "#!/bin/sh"
    if gpu_launcher(job):
        text += f"\necho {addr.pod_host(launcher_name(job))}:{n}\n"
    running = sorted(p.name for p in observed.pods
                     if p.replica_type == "Worker" and p.phase == Phase.RUNNING)
    return text + "".join(f"\necho {addr.pod_host(name)}:{n}" for name in running)


def _config_volume(job: Defaulted, items: list[tuple[str, int]]) -> dict[str, Any]:
    return {"name": CONFIG_VOLUME, "configMap": {
        "name": config_map_name(job),
        "items": [{"key": key, "path": key, "mode": mode} for key, mode in items]}}


class KubectlExec:
    def stops_on_finish(self) -> tuple[str, ...]:
        return ()  # as upstream: cleanPodPolicy alone decides

    def wants_ssh_key(self, job: Defaulted, observed: Observed) -> bool:
        return False

    def names_looked_up_once(self, job: Defaulted, rtype: str, addr: Addressing) -> list[str]:
        return []  # kubectl exec names pods, not hosts

    def env(self, job: Defaulted, rtype: str, index: int, addr: Addressing) -> dict[str, str]:
        return {}  # the launcher's variables go to its first container (decorate_pod)

    def env_containers(self, job: Defaulted) -> str | None:
        return None

    def decorate_pod(self, job: Defaulted, rtype: str, index: int, pod: dict[str, Any],
                     addr: Addressing, config: EngineConfig) -> None:
        spec = pod["spec"]
        first = (spec.get("containers") or [None])[0]
        if not isinstance(first, dict):
            return  # validation refuses a replica without containers
        if rtype == "Launcher":
            self._launcher(job, pod, first, config)
            return
        if not first.get("command"):
            first["command"], first["args"] = ["sleep"], ["365d"]
        # Open MPI looks for the agent's path in every rank
        first.setdefault("volumeMounts", []).append(
            {"name": CONFIG_VOLUME, "mountPath": CONFIG_MOUNT})
        spec.setdefault("volumes", []).append(_config_volume(job, [(KUBEXEC, SCRIPT_MODE)]))

    def _launcher(self, job: Defaulted, pod: dict[str, Any], first: dict[str, Any],
                  config: EngineConfig) -> None:
        spec = pod["spec"]
        if not spec.get("serviceAccountName"):
            spec["serviceAccountName"] = launcher_name(job)
        spec.setdefault("initContainers", []).append({
            "name": DELIVERY,
            "image": config.mpi_kubectl_delivery_image,
            "imagePullPolicy": "IfNotPresent",
            "env": [{"name": "TARGET_DIR", "value": KUBECTL_MOUNT},
                    {"name": "NAMESPACE", "value": job.namespace}],
            "volumeMounts": [{"name": KUBECTL_VOLUME, "mountPath": KUBECTL_MOUNT},
                             {"name": CONFIG_VOLUME, "mountPath": CONFIG_MOUNT}],
            "resources": {"limits": dict(DELIVERY_RESOURCES),
                          "requests": dict(DELIVERY_RESOURCES)},
        })
        env = first.setdefault("env", [])
        set_by_user = {e.get("name") for e in env if isinstance(e, dict)}
        # Appended as upstream appends them: after the user's own, so these win.
        added = {"OMPI_MCA_plm_rsh_agent": f"{CONFIG_MOUNT}/{KUBEXEC}",
                 "OMPI_MCA_orte_default_hostfile": f"{CONFIG_MOUNT}/{HOSTFILE}"}
        if not gpu_launcher(job):
            # a launcher without GPUs must not use one its node's runtime would expose
            added |= {"NVIDIA_VISIBLE_DEVICES": "", "NVIDIA_DRIVER_CAPABILITIES": ""}
        # Intel MPI's bootstrap: only where the user has not chosen one
        if "I_MPI_HYDRA_BOOTSTRAP" not in set_by_user:
            added["I_MPI_HYDRA_BOOTSTRAP"] = "rsh"
        if "I_MPI_HYDRA_BOOTSTRAP_EXEC" not in set_by_user:
            added["I_MPI_HYDRA_BOOTSTRAP_EXEC"] = f"{CONFIG_MOUNT}/{KUBEXEC}"
        env.extend({"name": k, "value": v} for k, v in added.items())
        first.setdefault("volumeMounts", []).extend([
            {"name": KUBECTL_VOLUME, "mountPath": KUBECTL_MOUNT},
            {"name": CONFIG_VOLUME, "mountPath": CONFIG_MOUNT}])
        spec.setdefault("volumes", []).extend([
            {"name": KUBECTL_VOLUME, "emptyDir": {}},
            _config_volume(job, [(KUBEXEC, SCRIPT_MODE), (HOSTFILE, HOSTFILE_MODE),
                                 (DISCOVER_HOSTS, SCRIPT_MODE)])])

    def objects(self, job: Defaulted, observed: Observed, addr: Addressing
                      ) -> list[dict[str, Any]]:
        workers = worker_pods(job)
        name = launcher_name(job)
        account, ours = service_account(job)
        objects: list[dict[str, Any]] = [CONFIGMAPS.new(
            object_meta(job, config_map_name(job), app_labels(job)),
            data={HOSTFILE: hostfile(job, addr), KUBEXEC: kubexec(job),
                  DISCOVER_HOSTS: discover_hosts(job, observed, addr)})]
        if ours:
            objects.append(SERVICEACCOUNTS.new(object_meta(job, account, app_labels(job))))
        rules: list[dict[str, Any]] = [
            {"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["pods"]}]
        if workers:
            # (without workers, a rule with no resourceNames would allow exec into any pod)
            rules.append({"verbs": ["create"], "apiGroups": [""], "resources": ["pods/exec"],
                          "resourceNames": workers})
        objects.append(ROLES.new(object_meta(job, name, app_labels(job)), rules=rules))
        objects.append(ROLEBINDINGS.new(
            object_meta(job, name, app_labels(job)),
            subjects=[{"kind": SERVICEACCOUNTS.kind, "name": account,
                       "namespace": job.namespace}],
            roleRef={"apiGroup": ROLES.group, "kind": ROLES.kind, "name": name}))
        return objects
