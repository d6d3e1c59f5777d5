"""The run folder is written without following links someone else put in it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from trainop.local.files import UnsafePath, check_run_folder, open_below, set_mode


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


OTHER = 65534  # nobody: another user of a shared machine


def other_users(path: Path) -> Path:
    os.chown(path, OTHER, OTHER)
    return path


needs_root = pytest.mark.skipif(os.geteuid() != 0,
                                reason="making entries of another user needs root")


@needs_root
def test_a_file_another_user_made_is_not_written(tmp_path: Path) -> None:
    """She pre-created the launcher's script in a shared run folder: it is neither written
    (she could replace it before it runs) nor read back."""
    run = tmp_path / "run"
    (run / "volumes/job-config").mkdir(parents=True)
    theirs = run / "volumes/job-config/kubexec.sh"
    theirs.write_text("hers\n")
    other_users(theirs)
    with pytest.raises(UnsafePath, match=rf"kubexec.sh: a file of uid {OTHER}, not this "
                                         r"user's \(uid 0\); trainop writes only in folders "
                                         "and files of its own"):
        open_below(run, "volumes/job-config/kubexec.sh")
    with pytest.raises(UnsafePath, match="a file of uid"):
        set_mode(run, "volumes/job-config/kubexec.sh", 0o755)
    assert theirs.read_text() == "hers\n"


@needs_root
def test_a_folder_another_user_made_or_may_write_in_is_not_entered(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "volumes").mkdir(parents=True)
    other_users(run / "volumes")
    with pytest.raises(UnsafePath, match="volumes: a folder of uid 65534"):
        open_below(run, "volumes/job-config/hostfile")
    os.chown(run / "volumes", 0, 0)
    (run / "volumes").chmod(0o777)
    with pytest.raises(UnsafePath, match=r"volumes: other users may write in it \(mode 777, "
                                         r"no sticky bit\)"):
        open_below(run, "volumes/job-config/hostfile")
    (run / "volumes").chmod(0o1777)  # as /tmp: each entry stays its owner's
    with open_below(run, "volumes/job-config/hostfile") as out:
        out.write(b"ok")


@needs_root
def test_the_run_folder_must_be_ours_where_nobody_else_may_replace_it(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    check_run_folder(shared)  # ours, in folders of ours
    other_users(shared)
    with pytest.raises(UnsafePath, match="shared: a folder of uid 65534"):
        check_run_folder(shared)
    os.chown(shared, 0, 0)
    tmp_path.chmod(0o777)  # anyone may rename `shared` away and put another in its place
    with pytest.raises(UnsafePath, match=f"shared: in {tmp_path}, where other users may "
                                         "rename or replace it"):
        check_run_folder(shared)
    tmp_path.chmod(0o1777)
    check_run_folder(shared)
