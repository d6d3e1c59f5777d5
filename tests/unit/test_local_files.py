"""The run folder is written without following links someone else put in it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from trainop.local.files import UnsafePath, open_below, set_mode


def test_files_and_folders_are_made_and_written_again(tmp_path: Path) -> None:
    with open_below(tmp_path, "volumes/job-config/hostfile", mode=0o444) as out:
        out.write(b"a slots=1\n")
    path = tmp_path / "volumes/job-config/hostfile"
    assert path.read_text() == "a slots=1\n" and path.stat().st_mode & 0o777 == 0o444
    with open_below(tmp_path, "volumes/job-config/hostfile") as out:  # a second run's
        out.write(b"b")
    assert path.read_text() == "b"
    for text in (b"one\n", b"two\n"):
        with open_below(tmp_path, "job-worker-0.log", append=True) as log:
            log.write(text)
    assert (tmp_path / "job-worker-0.log").read_text() == "one\ntwo\n"
    set_mode(tmp_path, "volumes/job-config/hostfile", 0o4755)
    assert path.stat().st_mode & 0o7777 == 0o755  # permission bits only
    set_mode(tmp_path, "volumes/other/missing", 0o755)  # nothing there: nothing to do
    assert not (tmp_path / "volumes/other").exists()


def planted(tmp_path: Path) -> Path:
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    victim.chmod(0o600)
    return victim


@pytest.mark.parametrize("where", ["job-worker-0.log", "volumes/job-config/hostfile"])
def test_a_symbolic_link_is_never_written_through(tmp_path: Path, where: str) -> None:
    victim = planted(tmp_path)
    run = tmp_path / "run"
    (run / where).parent.mkdir(parents=True)
    (run / where).symlink_to(victim)
    for append in (True, False):
        with pytest.raises(UnsafePath, match="a symbolic link or not a file; trainop writes "
                                             "only files it creates"):
            open_below(run, where, append=append)
    with pytest.raises(UnsafePath):
        set_mode(run, where, 0o444)
    assert victim.read_text() == "keep me\n" and victim.stat().st_mode & 0o777 == 0o600


def test_a_linked_folder_is_never_entered(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = tmp_path / "run"
    (run / "volumes").mkdir(parents=True)
    (run / "volumes" / "job-config").symlink_to(elsewhere)
    with pytest.raises(UnsafePath, match="not a folder of its own"):
        open_below(run, "volumes/job-config/hostfile")
    assert list(elsewhere.iterdir()) == []


def test_a_hard_link_and_a_fifo_are_refused(tmp_path: Path) -> None:
    victim = planted(tmp_path)
    run = tmp_path / "run"
    run.mkdir()
    os.link(victim, run / "job-worker-0.log")
    with pytest.raises(UnsafePath, match="a hard link"):
        open_below(run, "job-worker-0.log", append=True)
    os.mkfifo(run / "job-worker-1.log")  # opening it would wait for a reader for ever
    with pytest.raises(UnsafePath):
        open_below(run, "job-worker-1.log", append=True)
    assert victim.read_text() == "keep me\n"


@pytest.mark.parametrize("where", ["../victim", "/etc/passwd", "volumes/../../victim", ""])
def test_only_plain_paths_below_the_folder(tmp_path: Path, where: str) -> None:
    victim = planted(tmp_path)
    (tmp_path / "run").mkdir()
    with pytest.raises(UnsafePath, match="not a plain path below the run folder"):
        set_mode(tmp_path / "run", where, 0o777)
    assert victim.stat().st_mode & 0o777 == 0o600
