"""One namespace's storm costs another namespace's jobs a bounded delay: the work queues
hand out keys, and the client its API budget, by fair share among namespaces, and a quiet
namespace's first work goes before a busy one's backlog."""

from __future__ import annotations

import asyncio

from trainop.cluster.acting.workqueue import WorkQueue
from trainop.cluster.fairqueue import FairQueue
from trainop.cluster.reading.client import FairLimiter, _namespace_of


def drain(queue: FairQueue[str], costs: dict[str, float], n: int) -> list[str]:
    """Pop `n` items, charging each its flow's cost."""
    out = []
    for _ in range(n):
        flow, item = queue.pop()
        queue.charge(flow, costs[flow])
        out.append(item)
    return out


def test_flows_that_all_wait_share_by_cost_not_by_count() -> None:
    queue: FairQueue[str] = FairQueue()
    for i in range(50):
        queue.push("storm", f"s{i}")
        queue.push("victim", f"v{i}")
    # a storm item costs twice a victim's: the victim gets two items for each of the storm's
    order = drain(queue, {"storm": 2, "victim": 1}, 30)
    assert sum(item.startswith("v") for item in order) == 20, order


def test_a_quiet_flow_goes_first_up_to_its_credit_then_shares_equally() -> None:
    queue: FairQueue[str] = FairQueue(credit=5)
    for i in range(100):
        queue.push("storm", f"s{i}")
    assert drain(queue, {"storm": 1}, 20) == [f"s{i}" for i in range(20)]
    for i in range(20):
        queue.push("victim", f"v{i}")
    order = drain(queue, {"storm": 1, "victim": 1}, 20)
    # five (its credit) before the storm's next, then one each in turn
    assert order[:6] == ["v0", "v1", "v2", "v3", "v4", "v5"], order
    assert order[6:10] == ["s20", "v6", "s21", "v7"], order


def test_a_flow_back_from_quiet_gets_its_credit_not_its_old_low_use() -> None:
    queue: FairQueue[str] = FairQueue(credit=10)
    queue.push("was-quiet", "early")
    assert drain(queue, {"was-quiet": 1}, 1) == ["early"]  # it has used 1 since
    for i in range(200):
        queue.push("storm", f"s{i}")
    drain(queue, {"storm": 1}, 100)  # the storm has used 100
    for i in range(40):
        queue.push("was-quiet", f"q{i}")
    order = drain(queue, {"storm": 1, "was-quiet": 1}, 40)
    # ten (its credit) first, then one each in turn: 25 of 40, not all 40 for having
    # used little long ago
    assert sum(item.startswith("q") for item in order) == 25, order


def test_credit_comes_back_only_as_the_busy_flows_are_served() -> None:
    queue: FairQueue[str] = FairQueue(credit=3)
    for i in range(100):
        queue.push("storm", f"s{i}")
    drain(queue, {"storm": 1}, 10)
    for i in range(4):
        queue.push("victim", f"v{i}")
    # its credit (three items), and one more while the storm's last one counts
    assert drain(queue, {"storm": 1, "victim": 1}, 4) == ["v0", "v1", "v2", "v3"]
    # back at once: no credit left, the storm's turn comes first
    queue.push("victim", "again")
    assert drain(queue, {"storm": 1, "victim": 1}, 2) == ["s10", "again"]
    # quiet while the storm is served as many as at first: as many go first again
    drain(queue, {"storm": 1}, 4)
    for i in range(4):
        queue.push("victim", f"w{i}")
    assert drain(queue, {"storm": 1, "victim": 1}, 4) == ["w0", "w1", "w2", "w3"]


def test_a_flow_served_without_waiting_is_not_taken_for_a_quiet_one() -> None:
    queue: FairQueue[str] = FairQueue(credit=5)
    for _ in range(1000):  # a thousand requests under the limit: none waited
        queue.serve("steady", 1)
    for i in range(100):
        queue.push("storm", f"s{i}")
    queue.push("steady", "next")
    # the storm, new, has its credit over the steady flow, no more: not a thousand
    order = drain(queue, {"storm": 1, "steady": 1}, 10)
    assert order.index("next") <= 6, order


def test_the_ledger_keeps_only_flows_that_matter() -> None:
    queue: FairQueue[str] = FairQueue(credit=1)
    for i in range(10_000):  # ten thousand namespaces, one key each, come and go
        queue.push(f"ns-{i}", "key")
        queue.push("storm", "key")
        drain(queue, {f"ns-{i}": 1, "storm": 1}, 2)
    assert len(queue._used) < 200 and len(queue._heap) < 200


def test_the_work_queue_charges_a_namespace_the_seconds_its_keys_took() -> None:
    async def scenario() -> list[str]:
        queue = WorkQueue("fair-test")
        for i in range(100):
            queue.add(f"storm/job-{i}")
        for _ in range(3):  # the storm keeps the worker busy a while
            key = await queue.get()
            await asyncio.sleep(0.05)
            queue.done(key)
        for i in range(3):
            queue.add(f"victim/job-{i}")
        assert len(queue) == 100
        out = []
        for _ in range(5):
            key = await queue.get()
            queue.done(key)
            out.append(key)
        return out
    order = asyncio.run(scenario())
    # the victim's keys each wait for none of the storm's
    assert order == ["victim/job-0", "victim/job-1", "victim/job-2",
                     "storm/job-3", "storm/job-4"]


def test_a_key_added_again_while_worked_on_keeps_its_namespaces_place() -> None:
    async def scenario() -> list[str]:
        queue = WorkQueue("fair-test-again")
        queue.add("a/x")
        key = await queue.get()
        queue.add("a/x")  # changed while worked on: queued again once done
        queue.add("b/y")
        queue.done(key)
        return [await queue.get(), await queue.get()]
    assert asyncio.run(scenario()) == ["b/y", "a/x"]


def test_the_api_budget_goes_to_a_quiet_namespace_first() -> None:
    async def scenario() -> tuple[list[str], int]:
        limiter = FairLimiter(qps=200, burst=1)
        granted: list[str] = []

        async def request(flow: str) -> None:
            await limiter.take(flow)
            granted.append(flow)
        storm = [asyncio.ensure_future(request("storm")) for _ in range(60)]
        while len(granted) < 20:
            await asyncio.sleep(0.005)
        victim = [asyncio.ensure_future(request("victim")) for _ in range(3)]
        await asyncio.sleep(0)  # they have asked
        arrived = len(granted)
        await asyncio.gather(*storm, *victim)
        return granted, arrived
    granted, arrived = asyncio.run(scenario())
    assert len(granted) == 63
    # once the victim's requests arrive: at most the storm's request given its token and
    # the one waiting for it, then the victim's three
    victims = [i for i, flow in enumerate(granted) if flow == "victim"]
    assert victims[0] <= arrived + 2 and victims[-1] - victims[0] == 2, granted


def test_a_request_is_of_the_namespace_its_path_names() -> None:
    assert _namespace_of("/api/v1/namespaces/team-a/pods?limit=1") == "team-a"
    assert _namespace_of("/apis/kubeflow.org/v1/namespaces/b/pytorchjobs/x/status") == "b"
    assert _namespace_of("/apis/kubeflow.org/v1/pytorchjobs") == ""
    assert _namespace_of("/api/v1/namespaces") == ""
