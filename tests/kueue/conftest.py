"""Fixtures of the Kueue suite: one API server with trainop's CRDs and webhook, trainop's
manager, a real Kueue (built by hack/test-assets.sh) and the batch/v1 Job controllers on it;
each test has its own namespace and its own flavor, ClusterQueue and LocalQueue. The
kubelet is played by the test (tests.integration.kube.Kube.set_pod)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testbed import kueue
from testbed.apiserver import TestAPIServer
from testbed.jobcontrollers import JobControllers
from tests.differential.conftest import start_trainop
from tests.integration.kube import Kube
from tests.kueue.queues import Queues
from tests.require import cannot_run

PODS_READY_TIMEOUT = 45
"""Seconds Kueue's waitForPodsReady gives an admitted job to turn Running before it evicts
it (the tests that do not test it set their pods Running at once)."""


KUEUES: dict[str, kueue.Kueue] = {}
"""The Kueue running on each of the suite's API servers (by URL): a test may restart it."""


def with_kueue(logs: Path, *flags: str, name: str, config: dict[str, Any],
               job_controllers: bool = False, released: bool = False,
               visibility: bool = False) -> Iterator[TestAPIServer]:
    """An API server with trainop (started with `flags`) and a Kueue named `name` (its
    Configuration, the release's own where `released`, given `config` besides
    waitForPodsReady; `visibility`: its visibility API served through the API server) on
    it; Kueue's CRDs are there before trainop starts, which queues with Kueue where it
    finds its API as it starts."""
    if reason := kueue.unavailable(visibility):
        cannot_run(reason)
    trainop = start_trainop(logs, *flags, prepare=kueue.install, aggregation=visibility)
    api, _ = next(trainop)
    try:
        peer = kueue.Kueue(api, logs, name=name, config={"waitForPodsReady": {
            "timeout": f"{PODS_READY_TIMEOUT}s", "blockAdmission": False}, **config},
            released=released, visibility=visibility)
        # a v2beta1 MPIJob's launcher is a batch/v1 Job: its controller makes its pod
        jobs = JobControllers(api, logs / "job-controllers.log") if job_controllers else None
        KUEUES[api.url] = peer
        try:
            peer.wait_ready()
            if jobs is not None:
                jobs.wait_ready()
            yield api
        finally:
            if jobs is not None:
                jobs.stop()
            KUEUES.pop(api.url).stop()
    finally:
        trainop.close()


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestAPIServer]:
    """The suite's API server, with trainop and Kueue on it."""
    yield from with_kueue(tmp_path_factory.mktemp("kueue"), name="kueue", config={},
                          job_controllers=True)


@pytest.fixture
def kube(cluster: TestAPIServer) -> Kube:
    return Kube(cluster)


@pytest.fixture
def queues(kube: Kube) -> Queues:
    return Queues(kube)


EXTERNAL_KINDS = ("TFJob", "PyTorchJob", "XGBoostJob", "PaddleJob", "JAXJob", "MXJob")
"""Kinds trainop keeps the Workloads of on the `external` cluster (`--kueue-workloads all`):
every kind but MPIJob, which Kueue's own `kubeflow.org/mpijob` integration keeps."""


def external_config(multikueue: bool = False) -> dict[str, Any]:
    """What the `external` cluster's Kueue has besides its release's Configuration: the
    README's `externalFrameworks` lines (and, for a MultiKueue manager cluster, the same
    kinds for MultiKueue's generic adapter)."""
    kinds = [f"{kind}.v1.kubeflow.org" for kind in EXTERNAL_KINDS]
    integrations = kueue.as_released()["integrations"]
    config: dict[str, Any] = {"integrations": {**integrations, "externalFrameworks": kinds}}
    if multikueue:
        config["multiKueue"] = {"externalFrameworks": [{"name": kind} for kind in kinds]}
        # MultiKueue watches every integration's kind on its workers, which serve no Ray,
        # JobSet, LeaderWorkerSet, AppWrapper or TrainJob here: those are left out
        config["integrations"]["frameworks"] = [
            f for f in integrations["frameworks"]
            if "/" not in f or f.split("/")[0] in ("batch", "kubeflow.org")]
    return config


@pytest.fixture(scope="session")
def external(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestAPIServer]:
    """A second API server, with Kueue's release as it ships (its own Configuration: the
    v1 kinds' integrations off, kubeflow.org/mpijob, pods, batch Jobs... on) plus only the
    README's `externalFrameworks` lines, and trainop keeping the Workloads of those kinds
    (`--kueue-workloads all`)."""
    yield from with_kueue(tmp_path_factory.mktemp("kueue-external"), "--kueue-workloads",
                          "all", name="kueue-external", released=True,
                          config=external_config(), job_controllers=True)


@pytest.fixture
def ext_kube(external: TestAPIServer) -> Kube:
    return Kube(external)


@pytest.fixture
def ext_queues(ext_kube: Kube) -> Queues:
    return Queues(ext_kube)


@pytest.fixture(scope="session")
def opted_in(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestAPIServer]:
    """A third API server, with what the other two leave off: Kueue as released with
    `manageJobsWithoutQueueName: true` and trainop started to match
    (--kueue-manage-jobs-without-queue-name, --kueue-workloads all), and Kueue's
    visibility API served through the API server's aggregation layer; Kueue's own
    `kubeflow.org/mpijob` off, so that trainop keeps MPIJobs' Workloads too (`--kueue-workloads`
    names every kind, and `externalFrameworks` lists MPIJob); `waitForPodsReady`
    quicker (OPTED_IN_READY_TIMEOUT, and Kueue's requeuing back-off from 1 s)."""
    config = external_config()
    integrations = config["integrations"]
    integrations["frameworks"] = [f for f in integrations["frameworks"]
                                  if f != "kubeflow.org/mpijob"]
    integrations["externalFrameworks"] = [f"{kind}.v1.kubeflow.org" for kind in OPTED_IN_KINDS]
    yield from with_kueue(
        tmp_path_factory.mktemp("kueue-opted-in"),
        *(arg for kind in OPTED_IN_KINDS for arg in ("--kueue-workloads", kind.lower())),
        "--kueue-manage-jobs-without-queue-name", name="kueue-opted-in", released=True,
        config={**config, "manageJobsWithoutQueueName": True,
                "waitForPodsReady": {
                    "timeout": f"{OPTED_IN_READY_TIMEOUT}s", "blockAdmission": False,
                    "requeuingStrategy": {"backoffBaseSeconds": 1}}},
        visibility=True)


OPTED_IN_KINDS = (*EXTERNAL_KINDS, "MPIJob")
OPTED_IN_READY_TIMEOUT = 15
"""Seconds the `opted_in` cluster's Kueue gives an admitted job to turn Running."""
