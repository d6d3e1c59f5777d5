"""Free loopback ports: outside the kernel's ephemeral range, free, and never handed out
twice by one process."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from trainop.local import ports
from trainop.local.ports import ephemeral_range, free_port


@pytest.fixture(autouse=True)
def own_reservations(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Each test's reservations in its own folder, none handed out before."""
    monkeypatch.setattr(ports, "RESERVED", tmp_path / "reserved")
    monkeypatch.setattr(ports, "_given", {})


def picks(monkeypatch: pytest.MonkeyPatch, *drawn: int) -> None:
    """The random draws `free_port` makes, in order."""
    draws: Iterator[int] = iter(drawn)
    monkeypatch.setattr(ports._pick, "randrange", lambda start, stop: next(draws))


def test_a_port_is_outside_the_ephemeral_range_and_can_be_bound() -> None:
    low, high = ephemeral_range()
    for _ in range(50):
        port = free_port()
        assert not low <= port <= high
        assert port >= ports.LOWEST
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_a_port_something_listens_on_is_passed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    taken, other = free_port(), free_port()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", taken))
        busy.listen()
        monkeypatch.setattr(ports, "_given", {})
        monkeypatch.setattr(ports, "RESERVED", ports.RESERVED.with_name("again"))
        picks(monkeypatch, taken, other)
        assert free_port() == other


def test_a_port_is_handed_out_once(monkeypatch: pytest.MonkeyPatch) -> None:
    one, other = free_port(), free_port()
    monkeypatch.setattr(ports, "_given", {})
    monkeypatch.setattr(ports, "RESERVED", ports.RESERVED.with_name("again"))
    picks(monkeypatch, one, one, other)
    assert (free_port(), free_port()) == (one, other)


def test_no_free_port_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    given = free_port()
    picks(monkeypatch, *[given] * ports.TRIES)
    with pytest.raises(OSError, match="no free loopback port"):
        free_port()


def test_without_the_kernels_word_linuxs_default_range_is_assumed(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(ports, "EPHEMERAL", tmp_path / "absent")
    assert ephemeral_range() == (32768, 60999)


def test_a_port_another_live_process_was_given_is_passed_over(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # another lane of the suite, picking at the same moment: it holds the port's lock
    # (the ports free ones, which nothing else on this busy host takes meanwhile)
    taken, other = free_port(), free_port()
    monkeypatch.setattr(ports, "_given", {})
    monkeypatch.setattr(ports, "RESERVED", ports.RESERVED.with_name("again"))
    ports.RESERVED.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys; "
         f"fd = os.open({str(ports.RESERVED / str(taken))!r}, os.O_RDWR | os.O_CREAT); "
         "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        picks(monkeypatch, taken, other)
        assert free_port() == other
    finally:
        holder.kill()
        holder.wait()
    # once that process is gone, its port can be given again
    monkeypatch.setattr(ports, "_given", {})
    picks(monkeypatch, taken)
    assert free_port() == taken


def test_without_a_folder_for_reservations_the_bind_check_alone_decides(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    monkeypatch.setattr(ports, "RESERVED", tmp_path / "file" / "reserved")
    assert free_port() > 0


def test_without_a_folder_for_reservations_a_busy_port_closes_no_descriptor(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # no lock taken means no descriptor to let go of: never close(True), which is fd 1
    taken, other = free_port(), free_port()  # free ones (held by this test's process)
    monkeypatch.setattr(ports, "_given", {})
    (tmp_path / "file").write_text("")
    monkeypatch.setattr(ports, "RESERVED", tmp_path / "file" / "reserved")
    closed: list[int] = []
    monkeypatch.setattr(ports.os, "close", closed.append)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", taken))
        busy.listen()
        picks(monkeypatch, taken, other)
        assert free_port() == other
    assert closed == []
    assert ports._given[other] is None


def test_a_reservation_folder_someone_else_made_is_not_trusted(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # a link planted where the folder goes: no lock file is made through it
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / "reserved").symlink_to(target)
    monkeypatch.setattr(ports, "RESERVED", tmp_path / "reserved")
    port = free_port()
    assert list(target.iterdir()) == [] and ports._given[port] is None
