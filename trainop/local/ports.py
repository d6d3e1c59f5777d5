"""Free loopback ports for listeners started a moment later (a local job's replicas, the
test bed's servers), picked outside the kernel's ephemeral range."""

from __future__ import annotations

import random
import socket
import threading
from pathlib import Path

EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")
DEFAULT_EPHEMERAL = (32768, 60999)
"""Linux's default range, for a system that does not say (macOS's, 49152-65535, is within
the ports above it, so the ports below its start are outside both)."""
LOWEST = 10000
"""Below it: the well-known and registered ports that services on a host tend to use."""
TRIES = 200

_pick = random.Random()
_given: set[int] = set()
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
    listener it is for, and on a busy host one does."""
    low, high = ephemeral_range()
    below, above = (LOWEST, low), (high + 1, 65536)
    start, stop = below if below[1] - below[0] >= above[1] - above[0] else above
    for _ in range(TRIES):
        port = _pick.randrange(start, stop)
        with _lock:
            if port in _given:
                continue
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:  # in use (or lingering): another
                    continue
            _given.add(port)
            return port
    raise OSError(f"no free loopback port in {start}-{stop - 1} after {TRIES} tries")
