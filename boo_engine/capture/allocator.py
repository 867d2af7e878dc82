"""While a model is captured, glibc's malloc keeps the memory the model frees, so an op's recorded time is its
compute and not the page faults of a freshly mapped output buffer.

Why: torch's CPU tensors come from malloc. glibc serves a block above its mmap threshold (128 KiB at first, raised
by its own rule up to 32 MiB as big blocks are freed) with a fresh mapping, and gives the top of its heap back to
the system past its trim threshold; the next pass then touches new pages, and an op writing a 1 MiB output pays
for 256 page faults. Whether it does depends on what the process freed before: in a small attention net the
fastest of 100 passes of a (4, 256, 256) softmax took 166, 622 and 541 us in three processes running the same code
on the same inputs, and 157, 166 and 173 us with the thresholds set as here (AMD EPYC Zen 4, one thread, a busy
2-vCPU host; a fixed reference op timed between the passes read 346-389 us in all six). A kernel measured on its
own (boo-tui's torch column; an IREE kernel, with its caching allocator) reuses its buffers and never pays them,
so shares taken with the faults in disagree with what is measured, and by how much is chance.

`steady_malloc()` raises the mmap threshold to glibc's ceiling (32 MiB: larger blocks are still mapped fresh, as
they are for the measured kernel too) and the trim threshold to 2 GiB while the block runs; on leaving it sets the
trim threshold to 64 MiB (twice the ceiling: where glibc's own rule ends once a 32 MiB block was freed) and gives
what is free back to the system. Elsewhere than glibc (macOS, musl) nothing is changed; `describe()` says which,
for the file's header.
"""
from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Iterator

#: glibc's mallopt parameters (malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: glibc's ceiling for the mmap threshold on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX)
MMAP_THRESHOLD_MAX = 32 << 20
#: while capturing: nothing below 2 GiB is given back (mallopt takes an int)
TRIM_WHILE_CAPTURING = 2**31 - 1
#: after: what glibc's dynamic rule reaches (2 x the mmap threshold)
TRIM_AFTER = 2 * MMAP_THRESHOLD_MAX


def _glibc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version.restype = ctypes.c_char_p
        libc.gnu_get_libc_version()
        libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        libc.mallopt.restype = ctypes.c_int
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
        return libc
    except (OSError, AttributeError):
        return None


def _set(libc: ctypes.CDLL, param: int, value: int) -> bool:
    return bool(libc.mallopt(param, value))


@contextlib.contextmanager
def steady_malloc() -> Iterator[bool]:
    """Yields whether glibc's thresholds were set (see the module docstring)."""
    libc = _glibc()
    applied = libc is not None and _set(libc, M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX) \
        and _set(libc, M_TRIM_THRESHOLD, TRIM_WHILE_CAPTURING)
    try:
        yield applied
    finally:
        if libc is not None and applied:
            _set(libc, M_TRIM_THRESHOLD, TRIM_AFTER)
            libc.malloc_trim(0)


def describe(applied: bool) -> str:
    if applied:
        return ("allocator: glibc kept the memory the model freed (mmap threshold 32 MiB), so a call's time is its "
                "compute, not page faults of a fresh output buffer: as a kernel is measured")
    return ("allocator: not glibc, left as is: a call writing a fresh buffer may include its page faults, which a "
            "kernel measured on its own does not pay")
