"""One namespace's storm costs another namespace's jobs a bounded delay: the work queues
hand out keys, and the client its API budget, in turn among namespaces."""

from __future__ import annotations

import asyncio

from trainop.cluster.client import FairLimiter, _namespace_of
from trainop.cluster.workqueue import WorkQueue


def test_the_work_queue_takes_namespaces_in_turn() -> None:
    async def scenario() -> list[str]:
        queue = WorkQueue("fair-test")
        for i in range(100):
            queue.add(f"storm/job-{i}")
        for i in range(3):
            queue.add(f"victim/job-{i}")
        assert len(queue) == 103
        out = []
        for _ in range(8):
            key = await queue.get()
            queue.done(key)
            out.append(key)
        return out
    order = asyncio.run(scenario())
    # the victim's three keys each wait for one of the storm's, not for all hundred
    assert order == ["storm/job-0", "victim/job-0", "storm/job-1", "victim/job-1",
                     "storm/job-2", "victim/job-2", "storm/job-3", "storm/job-4"]


def test_a_key_added_again_while_worked_on_keeps_its_namespaces_turn() -> None:
    async def scenario() -> list[str]:
        queue = WorkQueue("fair-test-again")
        queue.add("a/x")
        key = await queue.get()
        queue.add("a/x")  # changed while worked on: queued again once done
        queue.add("b/y")
        queue.done(key)
        return [await queue.get(), await queue.get()]
    assert asyncio.run(scenario()) == ["b/y", "a/x"]


def test_the_api_budget_is_shared_in_turn_among_namespaces() -> None:
    async def scenario() -> list[str]:
        limiter = FairLimiter(qps=200, burst=1)
        granted: list[str] = []

        async def request(flow: str) -> None:
            await limiter.take(flow)
            granted.append(flow)
        storm = [asyncio.ensure_future(request("storm")) for _ in range(60)]
        await asyncio.sleep(0)  # the storm's requests wait first
        victim = [asyncio.ensure_future(request("victim")) for _ in range(3)]
        await asyncio.gather(*storm, *victim)
        return granted
    granted = asyncio.run(scenario())
    assert len(granted) == 63
    # the victim's 3 requests are among the first 8 granted, not after the storm's 60
    assert [i for i, flow in enumerate(granted) if flow == "victim"][-1] < 8, granted[:10]


def test_a_request_is_of_the_namespace_its_path_names() -> None:
    assert _namespace_of("/api/v1/namespaces/team-a/pods?limit=1") == "team-a"
    assert _namespace_of("/apis/kubeflow.org/v1/namespaces/b/pytorchjobs/x/status") == "b"
    assert _namespace_of("/apis/kubeflow.org/v1/pytorchjobs") == ""
    assert _namespace_of("/api/v1/namespaces") == ""
