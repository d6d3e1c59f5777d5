"""The progress server's parts that need no API server (cluster/serving/progress_server.py,
cluster/reading/reports.py): the Authorization header, a review's answer, the bound on the
jobs remembered, and the CA file read for the pods."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainop.cluster.reading.reports import HeardReports
from trainop.cluster.serving import progress_server as ps
from trainop.engine.observed import Reported

AUDIENCE = "trainop.kubeflow.org/ns/tfjobs/job"
POD = {"authentication.kubernetes.io/pod-name": ["job-chief-0"],
       "authentication.kubernetes.io/pod-uid": ["u-1"]}


@pytest.mark.parametrize(("header", "token"), [
    ("Bearer abc", "abc"), ("bearer abc", "abc"), ("BEARER  abc ", "abc"),
    (None, None), ("", None), ("Basic abc", None), ("Bearer", None), ("Bearer a b", None),
])
def test_the_token_of_an_authorization_header(header: str | None, token: str | None) -> None:
    assert ps._bearer(header) == token


@pytest.mark.parametrize(("status", "pod"), [
    ({"authenticated": True, "audiences": [AUDIENCE], "user": {"extra": POD}},
     ("job-chief-0", "u-1")),
    ({"authenticated": False, "audiences": [AUDIENCE], "user": {"extra": POD}}, None),
    ({"authenticated": True, "audiences": ["other"], "user": {"extra": POD}}, None),
    ({"authenticated": True, "user": {"extra": POD}}, None),
    ({"authenticated": True, "audiences": [AUDIENCE], "user": {}}, None),  # bound to no pod
    ({"authenticated": True, "audiences": [AUDIENCE], "user": {"extra": {
        "authentication.kubernetes.io/pod-name": [7],
        "authentication.kubernetes.io/pod-uid": ["u"]}}}, None),
])
def test_a_review_names_a_pod_only_where_it_holds_for_the_jobs_audience(
        status: dict[str, object], pod: tuple[str, str] | None) -> None:
    assert ps._bound_pod(status, AUDIENCE) == pod


def test_the_jobs_remembered_are_bounded_to_those_within_the_gap(
        monkeypatch: pytest.MonkeyPatch) -> None:
    server = ps.ProgressServer(None, HeardReports(None))  # type: ignore[arg-type]
    now = [1000.0]
    monkeypatch.setattr(ps.time, "monotonic", lambda: now[0])
    for i in range(ps.JOBS_KEPT):
        server._took("TFJob", f"ns/old-{i}")
    now[0] += 2 * ps.GAP
    server._took("TFJob", "ns/new")  # past the bound: only jobs within the gap stay
    assert list(server._taken) == [("TFJob", "ns/new")]


def test_the_ca_is_read_again_when_it_changes_and_only_as_certificates(
        tmp_path: Path) -> None:
    ca = tmp_path / "ca.crt"
    heard = HeardReports(ca)
    assert heard.ca() is None  # none yet
    pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    ca.write_text(pem)
    assert heard.ca() == pem
    ca.write_text(pem + pem)  # rotated: the bundle holds both
    assert heard.ca() == pem + pem
    ca.write_text("not a certificate")
    assert heard.ca() is None
    ca.write_text(pem + "x" * (64 << 10))
    assert heard.ca() is None
    assert HeardReports(None).ca() is None


def test_a_report_wakes_its_kinds_controller_and_goes_with_the_job() -> None:
    heard = HeardReports(None)
    woken: list[str] = []
    heard.listen("TFJob", woken.append)
    heard.put("TFJob", "ns/job", Reported("job-chief-0", {}))
    assert woken == ["ns/job"]
    assert heard.of("TFJob", "ns/job") == (Reported("job-chief-0", {}),)
    assert heard.of("PyTorchJob", "ns/job") == ()
    heard.forget("TFJob", "ns/job")
    assert heard.of("TFJob", "ns/job") == ()
