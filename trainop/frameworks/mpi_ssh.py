"""MPIJob's SSH transport (mpi-operator v2beta1's design), only for jobs that ask for it
with `transport: SSH`.

No kubectl and no RBAC objects in the pods: an SSH key Secret mounted in every pod, workers
running sshd, a headless service giving every pod a DNS name (hostname + subdomain), and a
ConfigMap with the hostfile in the format of the MPI implementation.
"""

from __future__ import annotations

import base64
from typing import Any

from trainop.api.jobs.mpijob import SSH_AUTH_MOUNT_PATH, MPIJobSpec
from trainop.api.model import settled
from trainop.api.resolved import resolve
from trainop.api.resources import CONFIGMAPS, SECRETS, SERVICES
from trainop.api.templates import containers
from trainop.api.types import Defaulted
from trainop.engine import Addressing, EngineConfig, Observed, Phase
from trainop.engine.framework import spec_of
from trainop.engine.labels import REPLICA_INDEX, app_labels, job_labels, object_meta
from trainop.engine.pods import wait_for_dns_container
from trainop.frameworks import mpi_exec
from trainop.frameworks.common import host_slots
from trainop.frameworks.mpi_exec import config_map_name

CONFIG_MOUNT = mpi_exec.CONFIG_MOUNT
HOSTFILE = f"{CONFIG_MOUNT}/hostfile"
SSH_ARGS = "-o ConnectionAttempts=10"


def secret_name(job: Defaulted) -> str:
    return f"{job.name}-ssh"


def _spec(job: Defaulted) -> MPIJobSpec:
    return spec_of(job, MPIJobSpec)


def _as_worker(job: Defaulted) -> bool:
    """runLauncherAsWorker: the launcher hosts rank 0."""
    return settled(_spec(job).run_launcher_as_worker, "spec.runLauncherAsWorker")


def worker_hosts(job: Defaulted, addr: Addressing) -> list[str]:
    """Every worker's host name, in index order."""
    return [addr.host(job, "Worker", i) for i in range(resolve(job).replicas_of("Worker"))]


def rank_hosts(job: Defaulted, addr: Addressing) -> list[str]:
    """The hosts ranks run on, in the hostfile's order: with runLauncherAsWorker the
    launcher first, then every worker (mpi-operator's newConfigMap)."""
    launcher = [addr.host(job, "Launcher", 0)] if _as_worker(job) else []
    return launcher + worker_hosts(job, addr)


def up_hosts(job: Defaulted, observed: Observed, addr: Addressing) -> list[str]:
    """What discover_hosts.sh prints (Horovod's elastic discovery): the launcher where it
    hosts ranks, then the workers that run, by pod name (mpi-operator's
    updateDiscoverHostsInConfigMap); the hostfile lists every worker."""
    launcher = rank_hosts(job, addr)[:1] if _as_worker(job) else []
    running = sorted((p.name, p.index) for p in observed.pods
                     if p.replica_type == "Worker" and p.phase == Phase.RUNNING)
    return launcher + [addr.host(job, "Worker", i) for _, i in running]


def hostfile(job: Defaulted, addr: Addressing) -> str:
    spec = _spec(job)
    hosts = host_slots(rank_hosts(job, addr), mpi_exec.slots(job))
    if spec.mpi_implementation in ("Intel", "MPICH"):
        lines = [f"{h}:{n}" for h, n in hosts.items()]
    else:
        lines = [f"{h} slots={n}" for h, n in hosts.items()]
    return "".join(line + "\n" for line in lines)


def launcher_env(job: Defaulted) -> dict[str, str]:
    spec = _spec(job)
    slots = str(mpi_exec.slots(job))
    if spec.mpi_implementation == "Intel":
        return {"I_MPI_HYDRA_HOST_FILE": HOSTFILE,
                "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS": SSH_ARGS, "I_MPI_PERHOST": slots}
    if spec.mpi_implementation == "MPICH":
        return {"HYDRA_HOST_FILE": HOSTFILE, "HYDRA_LAUNCH_EXTRA_ARGS": SSH_ARGS}
    return {
        "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
        "OMPI_MCA_orte_default_hostfile": HOSTFILE,
        "OMPI_MCA_plm_rsh_args": SSH_ARGS,
        "OMPI_MCA_orte_set_default_slots": slots,
    }


class SSH:
    def stops_on_finish(self) -> tuple[str, ...]:
        return ("Worker",)  # their sshd would run forever

    def wants_ssh_key(self, job: Defaulted, observed: Observed) -> bool:
        return observed.object("Secret", secret_name(job)) is None

    def env(self, job: Defaulted, rtype: str, index: int, addr: Addressing) -> dict[str, str]:
        env = {"K_MPI_JOB_ROLE": rtype.lower()}
        if rtype == "Launcher":
            env.update(launcher_env(job))
        return env

    def env_containers(self, job: Defaulted) -> str | None:
        return _spec(job).main_container  # None: every container (names are free in MPI)

    def decorate_pod(self, job: Defaulted, rtype: str, index: int, pod: dict[str, Any],
                     addr: Addressing, config: EngineConfig) -> None:
        self.mount_keys(job, rtype, pod)
        if rtype == "Launcher" and resolve(job).present("Worker"):
            # ssh looks each worker up once: cluster DNS may hold the names a second or two
            # after the workers run, so the launcher starts once they all resolve (always:
            # this pod shape is trainop's own, not upstream's, so no flag is asked; for
            # mpi-operator's, --wait-for-dns asks: names_looked_up_once)
            pod["spec"].setdefault("initContainers", []).append(
                wait_for_dns_container(worker_hosts(job, addr), config))

    def mount_keys(self, job: Defaulted, rtype: str, pod: dict[str, Any]) -> None:
        """The pod's hostname and subdomain, its SSH keys and, for the launcher, the
        hostfile and discover_hosts.sh."""
        spec = pod["spec"]
        spec["hostname"] = pod["metadata"]["name"]
        spec["subdomain"] = job.name
        volumes = spec.setdefault("volumes", [])
        mount_path = settled(_spec(job).ssh_auth_mount_path, "spec.sshAuthMountPath")
        secret: dict[str, Any] = {
            "secretName": secret_name(job),
            "items": [{"key": "ssh-privatekey", "path": "id_rsa"},
                      {"key": "ssh-publickey", "path": "id_rsa.pub"},
                      {"key": "ssh-publickey", "path": "authorized_keys"}],
        }
        if mount_path == SSH_AUTH_MOUNT_PATH:
            # root's sshd wants its keys private; elsewhere the files keep the Secret
            # volume's default mode, for a user that is not root to read them (as
            # mpi-operator's setupSSHOnPod)
            secret["defaultMode"] = 0o600
        volumes.append({"name": "ssh-auth", "secret": secret})
        mounts = [{"name": "ssh-auth", "mountPath": mount_path}]
        if rtype == "Launcher":
            volumes.append({"name": mpi_exec.CONFIG_VOLUME, "configMap": {
                "name": config_map_name(job),
                "items": [{"key": "hostfile", "path": "hostfile", "mode": 0o444},
                          {"key": "discover_hosts.sh", "path": "discover_hosts.sh",
                           "mode": 0o555}],
            }})
            mounts.append({"name": mpi_exec.CONFIG_VOLUME, "mountPath": CONFIG_MOUNT})
        for c in containers(pod):
            c.setdefault("volumeMounts", []).extend(dict(m) for m in mounts)

    def names_looked_up_once(self, job: Defaulted, rtype: str, addr: Addressing) -> list[str]:
        return []

    def objects(self, job: Defaulted, observed: Observed, addr: Addressing
                      ) -> list[dict[str, Any]]:
        discover = "#!/bin/sh\n" + "".join(f"echo {h}\n" for h in up_hosts(job, observed, addr))
        objects: list[dict[str, Any]] = [
            CONFIGMAPS.new(object_meta(job, config_map_name(job), app_labels(job)),
                           data={"hostfile": hostfile(job, addr), "discover_hosts.sh": discover}),
            SERVICES.new(object_meta(job, job.name, app_labels(job)),
                         spec={"clusterIP": "None", "selector": job_labels(job),
                               "publishNotReadyAddresses": True}),
        ]
        key = observed.ssh_key
        if observed.object(SECRETS.kind, secret_name(job)) is None and key is not None:
            objects.append(SECRETS.new(
                object_meta(job, secret_name(job), app_labels(job)),
                type="kubernetes.io/ssh-auth",
                data={"ssh-privatekey": _b64(key.private_key),
                      "ssh-publickey": _b64(key.public_key)}))
        return objects


class MPIOperatorSSH(SSH):
    """The SSH design as mpi-operator shapes its pods (mpi_job_controller.go:
    newLauncherPodTemplate, newWorker, launcherEnvVars)."""

    def env(self, job: Defaulted, rtype: str, index: int, addr: Addressing) -> dict[str, str]:
        env = super().env(job, rtype, index, addr)
        if rtype == "Launcher" and not _as_worker(job):
            # a launcher that hosts no rank is given no GPU
            env.update(NVIDIA_VISIBLE_DEVICES="", NVIDIA_DRIVER_CAPABILITIES="")
        return env

    def decorate_pod(self, job: Defaulted, rtype: str, index: int, pod: dict[str, Any],
                     addr: Addressing, config: EngineConfig) -> None:
        if _as_worker(job):
            # the replica-index counts the hosts from the launcher, rank 0
            pod["metadata"]["labels"][REPLICA_INDEX] = str(
                0 if rtype == "Launcher" else index + 1)
        self.mount_keys(job, rtype, pod)

    def names_looked_up_once(self, job: Defaulted, rtype: str, addr: Addressing) -> list[str]:
        # its launcher has no init container of trainop's: --wait-for-dns asks for one
        return worker_hosts(job, addr) if rtype == "Launcher" else []


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()

