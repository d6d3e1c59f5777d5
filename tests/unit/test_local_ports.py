"""Free loopback ports: outside the kernel's ephemeral range, free, and never handed out
twice by one process."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from trainop.local import ports
from trainop.local.ports import ephemeral_range, free_port


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
        monkeypatch.setattr(ports, "_given", set())
        picks(monkeypatch, taken, other)
        assert free_port() == other


def test_a_port_is_handed_out_once(monkeypatch: pytest.MonkeyPatch) -> None:
    one, other = free_port(), free_port()
    monkeypatch.setattr(ports, "_given", set())
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
