"""What a tenant writes on her own pods, read by the caches every namespace shares: numbers
are read strictly (no crash on "²", no int() of a thousand digits), and an object no record
can be made of is skipped, logged and counted, never taken for a broken stream."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any

import pytest

from tests.unit.test_informer_faults import FlakyServer, listing, run_against
from trainop.api.numbers import go_int, whole_number
from trainop.cluster.reading.informer import UNREADABLE, Informer
from trainop.cluster.reading.records import pod_record
from trainop.engine import inplace
from trainop.engine.labels import replica_of

HOSTILE = ["²", "٣", "\uff11", "9" * 30, "9" * 5000, "", "-1", "+1", " 1", "1 ", "1_0",
           "0x1", "1.0"]
"""Values `str.isdigit()` or `int()` take that no Kubernetes component reads as a number."""


def pod(annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None,
        name: str = "job-worker-0") -> dict[str, Any]:
    return {"metadata": {
        "name": name, "namespace": "tenant", "uid": f"u-{name}", "resourceVersion": "5",
        "labels": {"training.kubeflow.org/job-name": "job",
                   "training.kubeflow.org/replica-type": "worker",
                   "training.kubeflow.org/replica-index": "0", **(labels or {})},
        "annotations": annotations or {},
        "ownerReferences": [{"apiVersion": "kubeflow.org/v1", "kind": "JAXJob",
                             "name": "job", "uid": "j", "controller": True}]},
        "status": {"phase": "Running"}}


IN_PLACE = {inplace.ATTEMPT: "2", inplace.RELEASED: "1"}


@pytest.mark.parametrize("value", HOSTILE)
def test_whole_numbers_are_ascii_digits_within_their_bound(value: str) -> None:
    assert whole_number(value) is None


def test_whole_numbers_read_what_a_kubernetes_component_writes() -> None:
    assert whole_number("0") == 0
    assert whole_number("007") == 7
    assert whole_number("2147483647", 2**31 - 1) == 2**31 - 1
    assert whole_number("2147483648", 2**31 - 1) is None
    assert whole_number(3) is None  # a number that is no text is not what a label holds


@pytest.mark.parametrize(("value", "bits", "read"), [
    ("12", 32, 12), ("+12", 32, 12), ("-12", 32, -12), ("2147483647", 32, 2**31 - 1),
    ("-2147483648", 32, -2**31), ("2147483648", 32, None), ("٣", 64, None),
    ("1_0", 64, None), (" 1", 64, None), ("", 64, None), ("+", 64, None),
    ("9" * 5000, 64, None), ("9223372036854775807", 64, 2**63 - 1)])
def test_go_ints_are_what_strconv_reads(value: str, bits: int, read: int | None) -> None:
    assert go_int(value, bits) == read


@pytest.mark.parametrize("key", [inplace.ATTEMPT, inplace.RELEASED])
@pytest.mark.parametrize("value", HOSTILE)
def test_a_pod_with_an_attempt_no_number_is_no_pod_restarted_in_place(key: str,
                                                                       value: str) -> None:
    rec = pod_record(pod({**IN_PLACE, key: value}))
    assert rec is not None and rec.in_place is None
    assert rec.phase == "Running"


@pytest.mark.parametrize("value", HOSTILE)
def test_a_told_again_count_no_number_is_none_told(value: str) -> None:
    rec = pod_record(pod({**IN_PLACE, inplace.TOLD_AGAIN: value}))
    assert rec is not None and rec.in_place is not None
    assert rec.in_place.told_again == 0
    assert (rec.in_place.attempt, rec.in_place.released) == (2, 1)


@pytest.mark.parametrize("value", ["yesterday", "²", "", "2026-13-40T00:00:00Z"])
def test_a_told_at_that_is_no_time_is_never_told(value: str) -> None:
    rec = pod_record(pod({**IN_PLACE, inplace.TOLD_AT: value}))
    assert rec is not None and rec.in_place is not None and rec.in_place.told_at is None


def test_a_told_at_is_read() -> None:
    rec = pod_record(pod({**IN_PLACE, inplace.TOLD_AT: "2026-12-06T10:00:00Z"}))
    assert rec is not None and rec.in_place is not None
    assert rec.in_place.told_at == "2026-12-06T10:00:00Z"


@pytest.mark.parametrize("value", HOSTILE)
def test_a_replica_index_no_number_is_no_replica(value: str) -> None:
    labels = {"training.kubeflow.org/replica-type": "worker",
              "training.kubeflow.org/replica-index": value}
    assert replica_of(labels, "job-worker-0") is None
    assert pod_record(pod(labels={"training.kubeflow.org/replica-index": value})) is None


@pytest.mark.parametrize("name", ["job-worker-²", "job-worker-" + "9" * 40, "job-worker-"])
def test_an_mpi_operator_worker_named_with_no_index_is_no_replica(name: str) -> None:
    labels = {"training.kubeflow.org/operator-name": "mpi-operator",
              "training.kubeflow.org/job-role": "worker"}
    assert replica_of(labels, name) is None


def unreadable() -> float:
    return UNREADABLE.labels("pods")._value.get()  # type: ignore[attr-defined,no-any-return]


def informed(decode: Callable[[dict[str, Any]], Any], fake: FlakyServer,
             seconds: float = 1.0) -> Informer[Any]:
    """A pods informer with `decode`, keyed as the pods cache is (namespace/name), after
    `seconds` against `fake`."""
    return asyncio.run(run_against(fake, seconds, decode, lambda o: "{namespace}/{name}".format(
        **o["metadata"])))


def watching(*events: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(e).encode() + b"\n" for e in events)


def unreadable_if(test: Callable[[dict[str, Any]], bool]) -> Callable[[dict[str, Any]], Any]:
    """A decoder that cannot read what `test` picks (what a decoder's bug, or a value it
    does not expect, would do)."""
    def decode(obj: dict[str, Any]) -> dict[str, Any]:
        if test(obj):
            raise ValueError("invalid literal for int() with base 10: '²'")
        return obj
    return decode


def named_bad(obj: dict[str, Any]) -> bool:
    return bool(obj["metadata"]["name"] == "bad")


def test_a_list_skips_what_it_cannot_read_and_syncs(caplog: pytest.LogCaptureFixture) -> None:
    fake = FlakyServer([listing(pod(name="bad"), pod(name="good"))],
                       [watching({"type": "BOOKMARK",
                                  "object": {"metadata": {"resourceVersion": "10"}}})])
    before = unreadable()
    with caplog.at_level(logging.WARNING, "trainop.informer"):
        informer = informed(unreadable_if(named_bad), fake)
    assert informer.synced.is_set()
    assert list(informer.items) == ["tenant/good"]
    assert fake.calls.count("list") == 1  # no re-list: nothing was lost
    assert unreadable() - before == 1
    assert "pods tenant/bad cannot be read (ValueError: invalid literal" in caplog.text


def test_a_watch_skips_what_it_cannot_read_and_goes_on() -> None:
    fake = FlakyServer([listing(pod(name="gone"))], [watching(
        {"type": "MODIFIED", "object": pod(name="bad")},
        {"type": "ADDED", "object": pod(name="new")},
        {"type": "DELETED", "object": pod(name="gone")})])
    before = unreadable()
    informer = informed(unreadable_if(named_bad), fake)
    assert list(informer.items) == ["tenant/new"]  # what came after it was applied
    assert fake.calls.count("list") == 1
    # each watch (renewed as the fake's stream ends) reads it once, never again and again
    assert unreadable() - before == fake.calls.count("watch")


def test_an_object_that_becomes_unreadable_keeps_its_last_record() -> None:
    changed = pod(name="p")
    changed["metadata"]["resourceVersion"] = "6"
    fake = FlakyServer([listing(pod(name="p"))],
                       [watching({"type": "MODIFIED", "object": changed})])
    informer = informed(unreadable_if(lambda o: o["metadata"]["resourceVersion"] == "6"),
                        fake)
    assert informer.items["tenant/p"]["metadata"]["resourceVersion"] == "5"


def test_an_unreadable_object_that_is_deleted_leaves_the_cache() -> None:
    gone = pod(name="p")
    gone["metadata"]["deletionTimestamp"] = "2026-12-06T00:00:00Z"
    fake = FlakyServer([listing(pod(name="p"))], [watching({"type": "DELETED", "object": gone})])
    informer = informed(unreadable_if(lambda o: "deletionTimestamp" in o["metadata"]), fake)
    assert informer.items == {}


def test_a_relist_keeps_the_record_of_an_object_now_unreadable() -> None:
    changed = pod(name="p")
    changed["metadata"]["resourceVersion"] = "6"
    fake = FlakyServer([listing(pod(name="p")), listing(changed)],
                       [watching({"type": "ERROR", "object": {"code": 410}})])
    informer = informed(unreadable_if(lambda o: o["metadata"]["resourceVersion"] == "6"),
                        fake, 1.5)
    assert fake.calls.count("list") >= 2
    assert informer.items["tenant/p"]["metadata"]["resourceVersion"] == "5"

