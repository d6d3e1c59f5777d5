"""Writing into a run folder without following what someone else put there.

The run folder may exist already (`--workdir`, a shared folder): a symbolic link planted
in it must never send a replica's log or an MPI hostfile elsewhere, nor a hard link let
them overwrite another file, nor a folder or file another user made there be used (she
could read what is written, or replace the launcher's script before it runs). The folder
must be the user's own, in folders others cannot rename it out of (`check_run_folder`);
below it every folder is opened without following links and must be the user's too, and
every file is created or, where a regular file of the user's earlier runs is there,
written again.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path, PurePosixPath
from typing import BinaryIO


class UnsafePath(OSError):
    """A path below the run folder that trainop will not write through."""


def _others_may_write(info: os.stat_result) -> bool:
    """Users besides this one may add, remove or rename entries of the folder: it is
    writable by everyone, or by a group that is not this user's, without the sticky bit
    (which keeps each entry to its owner, as /tmp's)."""
    if info.st_mode & stat.S_ISVTX:
        return False
    return bool(info.st_mode & stat.S_IWOTH) or bool(
        info.st_mode & stat.S_IWGRP and info.st_gid != os.getegid())


def _own(info: os.stat_result, where: Path, what: str) -> None:
    """UnsafePath unless `where` (a `what`: folder or file) is this user's own."""
    if info.st_uid != os.geteuid():
        raise UnsafePath(f"{where}: a {what} of uid {info.st_uid}, not this user's (uid "
                         f"{os.geteuid()}); trainop writes only in folders and files of its "
                         "own")
    if what == "folder" and _others_may_write(info):
        raise UnsafePath(f"{where}: other users may write in it (mode "
                         f"{stat.S_IMODE(info.st_mode):o}, no sticky bit); trainop writes only "
                         "in folders of its own")


def check_run_folder(root: Path) -> None:
    """UnsafePath unless `root` (absolute, existing) is this user's own folder, in folders
    where no other user may rename or replace it (each owned by this user or root, and
    writable by others only with the sticky bit)."""
    _own(os.stat(root, follow_symlinks=False), root, "folder")
    for parent in root.parents:
        info = os.stat(parent)
        if info.st_uid not in (0, os.geteuid()) or _others_may_write(info):
            raise UnsafePath(f"{root}: in {parent}, where other users may rename or replace "
                             "it; trainop writes only in folders of its own")


def _parts(relative: str) -> tuple[str, ...]:
    parts = PurePosixPath(relative).parts
    if not parts or PurePosixPath(relative).is_absolute() or any(
            p in ("..", ".") for p in parts):
        raise UnsafePath(f"{relative!r} is not a plain path below the run folder")
    return parts


def _folder(root: Path, parts: tuple[str, ...], make: bool = True) -> int:
    """A descriptor of root/parts, each folder made where missing (`make`), none
    followed."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts:
            if make:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
            try:
                inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW |
                                os.O_CLOEXEC, dir_fd=fd)
            except FileNotFoundError:
                raise
            except OSError:
                raise UnsafePath(f"{root / part}: not a folder of its own (a symbolic link?);"
                                 " trainop does not write through it") from None
            os.close(fd)
            fd = inner
            root = root / part
            _own(os.fstat(fd), root, "folder")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_file(root: Path, relative: str, flags: int, verb: str) -> int | None:
    """A descriptor of the regular file root/relative, opened with `flags` and never
    through a link; None where it (or its folder) is missing and `flags` make nothing."""
    parts = _parts(relative)
    make = bool(flags & os.O_CREAT)
    try:
        folder = _folder(root, parts[:-1], make=make)
    except FileNotFoundError:
        return None
    try:
        fd = os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644,
                     dir_fd=folder)
    except FileNotFoundError:
        return None
    except OSError:
        raise UnsafePath(f"{root / relative}: a symbolic link or not a file; trainop {verb} "
                         "only files it creates") from None
    finally:
        os.close(folder)
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
        os.close(fd)
        raise UnsafePath(f"{root / relative}: not a file of its own (a hard link?); trainop "
                         f"{verb} only files it creates")
    try:
        _own(info, root / relative, "file")
    except UnsafePath:
        os.close(fd)
        raise
    return fd


def open_below(root: Path, relative: str, append: bool = False,
               mode: int | None = None) -> BinaryIO:
    """root/relative opened for writing (truncated, or appended to), made if missing, with
    the permission bits of `mode` where given. UnsafePath for a symbolic link, a hard link,
    or anything but a regular file."""
    fd = _open_file(root, relative, os.O_WRONLY | os.O_CREAT, "writes")
    assert fd is not None  # made where missing
    try:
        if not append:
            os.ftruncate(fd, 0)
        if mode is not None:
            os.fchmod(fd, mode & 0o777)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "ab" if append else "wb")
    except BaseException:
        os.close(fd)
        raise


def set_mode(root: Path, relative: str, mode: int) -> None:
    """Give root/relative the permission bits of `mode` where it is a file trainop wrote;
    nothing where it is missing. UnsafePath as open_below."""
    fd = _open_file(root, relative, os.O_RDONLY, "changes")
    if fd is None:
        return
    try:
        os.fchmod(fd, mode & 0o777)
    finally:
        os.close(fd)
