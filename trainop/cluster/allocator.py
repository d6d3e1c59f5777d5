"""Keep the manager's resident memory flat over months of work.

Every TLS connection asyncio opens holds a 256 KiB read buffer. glibc first serves an
allocation that large with mmap, but once one is freed it raises its mmap threshold and
serves the next ones from the heap, where the buffers of connections opened and closed
over time fragment it: in the soak benchmark resident memory crept up 0.4 MiB a minute
with no Python object left behind. A fixed threshold keeps such buffers mmapped, so that
a freed one goes back to the system."""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger("trainop.allocator")
M_MMAP_THRESHOLD = -3  # from glibc's malloc.h
MMAP_THRESHOLD = 128 * 1024  # glibc's own starting value, no longer raised


def pin_mmap_threshold(size: int = MMAP_THRESHOLD) -> bool:
    """Fix glibc's mmap threshold at `size`; False where the C library is not glibc."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False  # not glibc (musl, macOS): no such setting to fix
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    done = bool(mallopt(M_MMAP_THRESHOLD, size))
    log.debug("mmap threshold fixed at %d bytes: %s", size, done)
    return done
