"""While a model is captured, the memory its ops write is memory already touched, as when a kernel is measured:
an op's recorded time is its compute, not page faults of fresh memory.

Two ways a recorded op paid for page faults (an op writing a 1 MiB output pays 256 of them, about 400 us on an AMD
EPYC Zen 4; a (4, 256, 256) softmax that takes 160 us read 540-700 us):
- glibc serves a block above its mmap threshold (128 KiB at first, raised by its own rule up to 32 MiB as big
  blocks are freed) with a fresh mapping, and gives the top of its heap back to the system past its trim
  threshold. Whether a pass then touches new pages depends on what the process freed before: the fastest of 100
  unprofiled passes of that softmax took 166, 622 and 541 us in three processes running the same code on the same
  inputs, and 157, 166 and 173 us with the thresholds set as here (a fixed reference op timed between the passes
  read 346-389 us in all six; one thread, a busy 2-vCPU host).
- the profiler's own records are allocated between the model's tensors, in the holes the last pass's tensors left,
  so every recorded pass grows the heap by about what the pass allocates (2 MiB a pass for a 2 ms net, 16 MiB at
  8x its batch) and writes its outputs to pages never touched before: the softmax took 600-900 us in every recorded
  pass, 160 us with a touched reserve (its page faults: 256 a call without, 0 with).
A kernel measured on its own (boo-tui's torch column; an IREE kernel, with its caching allocator) reuses its
buffers and pays neither.

`steady_malloc()` raises glibc's mmap threshold to its ceiling (32 MiB: larger blocks are still mapped fresh, as
they are for the measured kernel too) and the trim threshold to 2 GiB while the block runs, and yields a
`SteadyHeap` whose `reserve(n)` touches the heap's free holes (an earlier `malloc_trim` in the process may have given
their pages back: 257 faults a pass were seen after other captures in one process), grows the heap by n bytes of
touched memory and frees it all (kept, not trimmed): the room the recorded passes grow into. On leaving, the trim
threshold is 64 MiB (twice the ceiling: where glibc's own rule ends once a 32 MiB block was freed) and what is free
goes back to the system. Elsewhere than glibc (macOS,
musl) nothing is changed; `SteadyHeap.describe()` says which, for the file's header.
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


class _MallInfo2(ctypes.Structure):
    """glibc's struct mallinfo2 (2.33 and later)."""

    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


#: the largest block malloc'ed at once by `reserve` (under the mmap threshold: it comes from the heap)
RESERVE_CHUNK = 16 << 20
#: the block sizes `reserve` fills the heap's free holes with, largest first
HOLE_BLOCKS = (1 << 20, 64 << 10, 4 << 10)
#: `reserve` never holds more than this (nor more than a quarter of the memory available)
RESERVE_MAX = 1 << 30


def _glibc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version.restype = ctypes.c_char_p
        libc.gnu_get_libc_version()
        libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        libc.mallopt.restype = ctypes.c_int
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
        libc.malloc.argtypes = [ctypes.c_size_t]
        libc.malloc.restype = ctypes.c_void_p
        libc.free.argtypes = [ctypes.c_void_p]
        return libc
    except (OSError, AttributeError):
        return None


def _available_bytes() -> int:
    """MemAvailable (bench.memory reads it), or 4 x RESERVE_MAX where it cannot be read."""
    from ..bench.memory import host_available

    available = host_available()
    return 4 * RESERVE_MAX if available is None else available


class SteadyHeap:
    """What `steady_malloc` did, and the heap it keeps (see the module docstring)."""

    def __init__(self, libc: ctypes.CDLL | None, applied: bool) -> None:
        self._libc = libc if applied else None
        self.applied = applied
        self.reserved = 0
        """bytes of touched heap `reserve` made room with"""
        self.wanted = 0

    def heap_bytes(self) -> int | None:
        """The heap's size (glibc's mallinfo2 `arena`); None where it cannot be read."""
        info = self._info()
        return None if info is None else int(info.arena)

    def _info(self) -> _MallInfo2 | None:
        info = getattr(self._libc, "mallinfo2", None)
        if info is None:
            return None
        info.restype = _MallInfo2
        return info()

    def _holes(self) -> int | None:
        """Free bytes inside the heap, below its top chunk (mallinfo2 `fordblks` less `keepcost`)."""
        info = self._info()
        return None if info is None else int(info.fordblks) - int(info.keepcost)

    def _fill_holes(self, blocks: list[int], budget: int) -> int:
        """Malloc and touch blocks out of the heap's free holes, largest first, until a block of each size comes
        from the top instead (or `budget` bytes are taken); returns the bytes taken. A hole may be memory the
        process freed and `malloc_trim` (an earlier capture in this process) gave back page by page: a recorded
        op placed there would pay its page faults (seen: 257 a pass after other captures in the same process)."""
        libc = self._libc
        taken = 0
        if libc is None:
            return taken
        for size in HOLE_BLOCKS:
            while taken + size <= budget:
                before = self._holes()
                if before is None or before < size:
                    break
                ptr = libc.malloc(size)
                if not ptr:
                    return taken
                ctypes.memset(ptr, 0, size)
                blocks.append(ptr)
                taken += size
                after = self._holes()
                if after is None or after >= before:   # it came from the top: no hole this size is left
                    break
        return taken

    def reserve(self, nbytes: int) -> None:
        """Touch the heap's free holes, then grow the heap by `nbytes` of touched memory (at most RESERVE_MAX and a
        quarter of what is available, holes included), then free it all: with trimming off it stays, touched, for
        what the recorded passes allocate next."""
        libc = self._libc
        self.wanted = max(self.wanted, nbytes)
        if libc is None:
            return
        budget = min(RESERVE_MAX, _available_bytes() // 4)
        nbytes = min(nbytes, budget)
        blocks: list[int] = []
        grown = 0
        try:
            self._fill_holes(blocks, budget - nbytes)
            while grown < nbytes:
                ptr = libc.malloc(RESERVE_CHUNK)
                if not ptr:
                    break
                ctypes.memset(ptr, 0, RESERVE_CHUNK)
                blocks.append(ptr)
                grown += RESERVE_CHUNK
        finally:
            for ptr in reversed(blocks):
                libc.free(ptr)
        self.reserved = max(self.reserved, grown)

    def describe(self, faults: int | None = None) -> str:
        """The header's line; `faults`: the page faults of a recorded pass (median), a few hundred per MiB of
        fresh memory its ops wrote."""
        counted = "" if faults is None else f"; page faults in a recorded pass: {faults}"
        if not self.applied:
            return ("allocator: not glibc, left as is: a call writing fresh memory includes its page faults, which a "
                    f"kernel measured on its own does not pay{counted}")
        short = f" (of {self.wanted >> 20} MiB wanted)" if self.reserved < self.wanted else ""
        return (f"allocator: glibc kept the memory the model freed (mmap threshold 32 MiB) and {self.reserved >> 20} "
                f"MiB of touched heap{short} for the recorded passes, so a call's time is its compute, not page "
                f"faults of fresh memory: as a kernel is measured{counted}")


def _set(libc: ctypes.CDLL, param: int, value: int) -> bool:
    return bool(libc.mallopt(param, value))


@contextlib.contextmanager
def steady_malloc() -> Iterator[SteadyHeap]:
    """Yields the SteadyHeap (`applied`: whether glibc's thresholds were set; see the module docstring)."""
    libc = _glibc()
    applied = libc is not None and _set(libc, M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX) \
        and _set(libc, M_TRIM_THRESHOLD, TRIM_WHILE_CAPTURING)
    try:
        yield SteadyHeap(libc, applied)
    finally:
        if libc is not None and applied:
            _set(libc, M_TRIM_THRESHOLD, TRIM_AFTER)
            libc.malloc_trim(0)
