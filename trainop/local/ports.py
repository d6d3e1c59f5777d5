"""Free loopback ports for listeners started a moment later (a local job's replicas, the
test bed's servers), picked outside the kernel's ephemeral range and reserved on the host
for as long as the process that picked them lives."""

from __future__ import annotations

import fcntl
import os
import random
import socket
import stat
import tempfile
import threading
from pathlib import Path

EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")
DEFAULT_EPHEMERAL = (32768, 60999)
"""Linux's default range, for a system that does not say (macOS's, 49152-65535, is within
the ports above it, so the ports below its start are outside both)."""
LOWEST = 10000
"""Below it: the well-known and registered ports that services on a host tend to use."""
TRIES = 200
RESERVED = Path(tempfile.gettempdir()) / f"trainop-ports-{os.getuid()}"
"""One lock file per port handed out on this host: a process holds the lock of each port it
was given until it exits (the kernel lets go of it then, however the process ends), so two
processes picking at once (two test lanes, two `trainop run`s) never get the same port."""

_pick = random.Random()
_given: dict[int, int | None] = {}
"""Ports this process handed out, with the descriptor holding each one's lock."""
_lock = threading.Lock()  # a comparison's sides start their servers from threads


def ephemeral_range() -> tuple[int, int]:
    """The ports the kernel gives outgoing connections (and a bind to port 0)."""
    try:
        low, high = (int(part) for part in EPHEMERAL.read_text().split())
    except (OSError, ValueError):
        return DEFAULT_EPHEMERAL
    return low, high


def free_port() -> int:
    """A loopback port nothing listens on and this process has not handed out before.

    Not a port from the ephemeral range (which binding port 0 gives): any outgoing
    connection on the host may take one of those between this check and the bind of the
    listener it is for, and on a busy host one does. Nor one another live process was
    given (see RESERVED)."""
    low, high = ephemeral_range()
    below, above = (LOWEST, low), (high + 1, 65536)
    start, stop = below if below[1] - below[0] >= above[1] - above[0] else above
    for _ in range(TRIES):
        port = _pick.randrange(start, stop)
        with _lock:
            if port in _given:
                continue
            free, held = _reserve(port)
            if not free:
                continue
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:  # in use (or lingering): another
                    if held is not None:
                        os.close(held)
                    continue
            _given[port] = held
            return port
    raise OSError(f"no free loopback port in {start}-{stop - 1} after {TRIES} tries")


def _reserve(port: int) -> tuple[bool, int | None]:
    """(whether no other process holds `port`, the descriptor now holding its lock). No
    descriptor where no lock can be taken here (no temporary folder, or one this user did
    not make: a link or another's folder is not trusted): the bind check alone decides."""
    try:
        RESERVED.mkdir(mode=0o700, exist_ok=True)
        folder = os.lstat(RESERVED)
        if not stat.S_ISDIR(folder.st_mode) or folder.st_uid != os.getuid():
            return True, None
        fd = os.open(RESERVED / str(port), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError:
        return True, None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False, None
    return True, fd
