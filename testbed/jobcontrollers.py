"""kube-controller-manager with only the batch/v1 Job controllers (`job`,
`ttl-after-finished`) beside a test API server: what a peer that runs its work in Jobs
(mpi-operator's launcher) needs for them to get pods and to end. The kubelet stays the
test's to play (tests.integration.kube.Kube.set_pod); nothing schedules the pods."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Self

from testbed.apiserver import Cluster, find_assets
from testbed.manager import terminate, wait_logged

CONTROLLERS = "job,ttl-after-finished"


class JobControllers:
    """The Job controllers as one process, as the API server's admin."""

    def __init__(self, api: Cluster, log_path: Path):
        self.log_path = log_path
        self.proc = subprocess.Popen(
            [str(find_assets() / "kube-controller-manager"), "--kubeconfig",
             str(api.kubeconfig), f"--controllers={CONTROLLERS}", "--leader-elect=false",
             "--secure-port=0"],
            stdout=open(log_path, "wb"), stderr=subprocess.STDOUT)  # noqa: SIM115

    def wait_ready(self, timeout: float = 60) -> Self:
        """Wait until both controllers have synced their caches."""
        wait_logged(self.proc, lambda log: log.count("Caches are synced") >= 2, timeout,
                    "the Job controllers", self.log)
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        terminate(self.proc)
