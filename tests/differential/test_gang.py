"""Gang scheduling side by side: upstream and trainop, each run with
--gang-scheduler-name (Volcano's PodGroup, or scheduler-plugins' for any other name),
given the same jobs; the gang scheduler itself is played by the test (it sets the
PodGroup's phase as Volcano would)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.differential.conftest import start_trainop, start_upstream
from tests.differential.peers import Pair, Side
from tests.differential.test_side_by_side import check, job, submit
from tests.integration.kube import Kube

pytestmark = pytest.mark.differential


@pytest.fixture(scope="module", params=["volcano", "scheduler-plugins-scheduler"])
def gang(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[tuple[str, Kube, Kube]]:
    name = request.param
    logs = tmp_path_factory.mktemp(f"gang-{name}")
    up = start_upstream(logs, "--gang-scheduler-name", name)
    ours = start_trainop(logs, "--gang-scheduler-name", name)
    (up_api, _), (our_api, _) = next(up), next(ours)
    try:
        ns = f"g-{uuid.uuid4().hex[:8]}"
        yield name, Kube(up_api, ns), Kube(our_api, ns)
    finally:
        for started in (ours, up):
            started.close()


def test_a_gang_job_gets_its_pod_group_and_runs(gang: tuple[str, Kube, Kube]) -> None:
    name, up, ours = gang
    pair = Pair(Side("upstream", up), Side("trainop", ours))
    doc = job("PyTorchJob", spec={"runPolicy": {"schedulingPolicy": {
        "minAvailable": 3, "queue": "research", "priorityClass": "high"}}})
    submit(pair, doc)
    found = pair.compare("PyTorchJob", f"{name} created")
    if name == "volcano":
        for side in pair.sides:  # Volcano admits the gang
            side.kube.api.kubectl("patch", "podgroups.scheduling.volcano.sh", "job", "-n",
                                  side.kube.ns, "--subresource=status", "--type=merge", "-p",
                                  '{"status": {"phase": "Inqueue"}}', check=False)
        found += pair.compare("PyTorchJob", f"{name} admitted")
    pair.set_all("Running")
    found += pair.compare("PyTorchJob", f"{name} running")
    pair.set_all("Succeeded", exit_code=0)
    found += pair.compare("PyTorchJob", f"{name} succeeded")
    check(found)

