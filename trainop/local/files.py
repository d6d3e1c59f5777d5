"""Writing into a run folder without following what someone else put there.

The run folder may exist already (`--workdir`, a shared folder): a symbolic link planted
in it must never send a replica's log or an MPI hostfile elsewhere, nor a hard link let
them overwrite another file. The folder itself is the user's choice and is taken as it
is; below it every folder is opened without following links, and every file is created
or, where a regular file of trainop's runs is there, written again.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path, PurePosixPath
from typing import BinaryIO


class UnsafePath(OSError):
    """A path below the run folder that trainop will not write through."""


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
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_below(root: Path, relative: str, append: bool = False,
               mode: int | None = None) -> BinaryIO:
    """root/relative opened for writing (truncated, or appended to), made if missing, with
    `mode` where given. UnsafePath for a symbolic link, a hard link, or anything but a
    regular file."""
    parts = _parts(relative)
    folder = _folder(root, parts[:-1])
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(parts[-1], flags, 0o644, dir_fd=folder)
    except OSError:
        raise UnsafePath(f"{root / relative}: a symbolic link or not a file; trainop writes "
                         "only files it creates") from None
    finally:
        os.close(folder)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
            raise UnsafePath(f"{root / relative}: not a file of its own (a hard link?); "
                             "trainop writes only files it creates")
        if not append:
            os.ftruncate(fd, 0)
        if mode is not None:
            os.fchmod(fd, mode)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "ab" if append else "wb")
    except BaseException:
        os.close(fd)
        raise


def set_mode(root: Path, relative: str, mode: int) -> None:
    """Give root/relative the permission bits of `mode` where it is a file trainop wrote;
    nothing where it is missing. UnsafePath as open_below."""
    parts = _parts(relative)
    try:
        folder = _folder(root, parts[:-1], make=False)
    except FileNotFoundError:
        return
    try:
        fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     dir_fd=folder)
    except FileNotFoundError:
        return
    except OSError:
        raise UnsafePath(f"{root / relative}: a symbolic link or not a file; trainop changes "
                         "only files it creates") from None
    finally:
        os.close(folder)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
            raise UnsafePath(f"{root / relative}: not a file of its own (a hard link?); "
                             "trainop changes only files it creates")
        os.fchmod(fd, mode & 0o777)
    finally:
        os.close(fd)
