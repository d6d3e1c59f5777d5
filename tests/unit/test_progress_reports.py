"""trainop.progress (what a training script calls) and the local runtime's reading of what
it writes (local/reports.py): the payload the engine reads, written only where asked."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from trainop import progress as helper
from trainop.api.types import Metric, Progress
from trainop.engine.observed import Reported
from trainop.engine.progress import read
from trainop.local.reports import ReportFile, heard
from trainop.local.view import bar


@pytest.fixture
def asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "lead.progress.json"
    monkeypatch.setenv("TRAINOP_PROGRESS_FILE", str(path))
    for name in ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(helper, "_started", None)
    monkeypatch.setattr(helper, "_failed", False)
    return path


def test_outside_trainop_a_report_does_nothing(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRAINOP_PROGRESS_FILE", raising=False)
    monkeypatch.chdir(tmp_path)
    helper.report(percent=5)
    assert not helper.enabled()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("variable", ["RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                      "PMIX_RANK"])
def test_a_rank_other_than_0_in_the_lead_pod_reports_nothing(
        asked: Path, monkeypatch: pytest.MonkeyPatch, variable: str) -> None:
    monkeypatch.setenv(variable, "1")
    helper.report(percent=5)
    assert not asked.exists()
    monkeypatch.setenv(variable, "0")
    helper.report(percent=5)
    assert asked.exists()


def test_what_it_writes_is_trainers_payload_the_engine_reads(asked: Path) -> None:
    helper.report(step=250, steps=1000, epoch=1, epochs=4, remaining_seconds=30,
                  metrics={"loss": 0.123456789, "lr": 1e-4, "phase": "warmup"})
    doc = json.loads(asked.read_text())
    status = doc["trainerStatus"]
    assert status.pop("lastUpdatedTime").endswith("Z")
    assert status == {"progressPercentage": 25, "step": 250, "steps": 1000, "epoch": 1,
                      "epochs": 4, "estimatedRemainingSeconds": 30, "metrics": [
                          {"name": "loss", "value": "0.123457"},
                          {"name": "lr", "value": "0.0001"},
                          {"name": "phase", "value": "warmup"}]}
    shown = read(doc)
    assert shown is not None and (shown.percent, shown.step) == (25, 250)
    assert [p.name for p in asked.parent.iterdir()] == [asked.name]  # no temporary left


def test_percent_from_epochs_and_time_left_from_time_taken(
        asked: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter([100.0, 160.0])
    monkeypatch.setattr(helper.time, "monotonic", lambda: next(clock))
    helper.report(epoch=0, epochs=4)
    helper.report(epoch=1, epochs=4)
    status = json.loads(asked.read_text())["trainerStatus"]
    # a quarter in 60 s: three quarters left take 180 s
    assert (status["progressPercentage"], status["estimatedRemainingSeconds"]) == (25, 180)


def test_a_file_it_cannot_write_is_said_once_and_training_goes_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("TRAINOP_PROGRESS_FILE", str(tmp_path / "gone" / "p.json"))
    monkeypatch.setattr(helper, "_failed", False)
    helper.report(percent=1)
    helper.report(percent=2)
    err = capsys.readouterr().err
    assert err.count("trainop.progress: cannot write") == 1


def test_the_runtime_reads_a_report_again_only_when_it_changed(asked: Path) -> None:
    f = ReportFile("lead", asked)
    assert f.read() is None  # none written yet
    asked.write_text('{"trainerStatus": {"progressPercentage": 1}}')
    first = f.read()
    assert first == Reported("lead", {"trainerStatus": {"progressPercentage": 1}})
    assert f.read() is first
    asked.write_text('{"trainerStatus": {"progressPercentage": 22}}')
    assert f.read() == Reported("lead", {"trainerStatus": {"progressPercentage": 22}})


def test_a_report_too_large_or_not_json_is_one_the_engine_refuses() -> None:
    assert heard("p", b" " * (64 << 10) + b"{}") == Reported(
        "p", problem="a report over the 65536 bytes one may hold")
    assert heard("p", b"{") == Reported("p", problem="a report that is not JSON")
    assert heard("p", b"\xff") == Reported("p", problem="a report that is not JSON")
    assert heard("p", b"[" * 60000) == Reported("p", problem="a report that is not JSON")


def test_a_link_planted_where_the_report_goes_is_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text('{"trainerStatus": {"progressPercentage": 7}}')
    link = tmp_path / "lead.progress.json"
    os.symlink(secret, link)
    assert ReportFile("lead", link).read() is None
    fifo = tmp_path / "fifo.progress.json"
    os.mkfifo(fifo)
    assert ReportFile("lead", fifo).read() == Reported(
        "lead", problem="the report is not a regular file")


def test_trainop_runs_bar_on_a_terminal() -> None:
    shown = bar(Progress(percent=40, epoch=2, epochs=5, pod="p", last_reported_time="t"))
    assert shown.plain == "progress " + "━" * 30 + " 40%, epoch 2 of 5"
    # 40% of 30 done, in green; the rest dim
    assert [(s.end - s.start, s.style) for s in shown.spans] == [(12, "green"), (18, "dim")]
    # no percent: no bar; what a tenant named is shown, not run by the terminal
    assert bar(Progress(step=7, pod="p", last_reported_time="t", metrics=[
        Metric(name="loss\x1b[2J", value="1")])).plain == "progress step 7, loss\\x1b[2J 1"
