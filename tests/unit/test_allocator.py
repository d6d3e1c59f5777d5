"""The manager fixes glibc's mmap threshold (trainop/cluster/allocator.py), so that a
TLS connection's 256 KiB buffer is mmapped, and given back when freed, every time."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

# Prints how many mmapped blocks one more 256 KiB allocation made, after one was freed.
PROBE = """
import ctypes, sys
from trainop.cluster.allocator import pin_mmap_threshold
fields = "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"
class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in fields.split()]
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
libc.mallinfo2.restype = MallInfo2
if sys.argv[1] == "pinned":
    pin_mmap_threshold()
libc.free(libc.malloc(256 * 1024))
before = libc.mallinfo2().hblks
kept = libc.malloc(256 * 1024)
print(libc.mallinfo2().hblks - before)
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="a glibc setting")
@pytest.mark.parametrize("mode,mmapped", [("default", "0"), ("pinned", "1")])
def test_large_buffers_stay_mmapped_once_pinned(mode: str, mmapped: str) -> None:
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == mmapped  # default: glibc raised its threshold and used the heap
