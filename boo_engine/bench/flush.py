"""Cold-cache timing: what `--cache-mode cold` runs before every timed call, outside the timed region.

A kernel measured warm reads inputs the previous call left in the caches; in a model the previous op wrote other
data, so a kernel whose operands fit in the last-level cache looks faster warm than it will be (tritonbench,
`triton.testing.do_bench` and NVBench flush the GPU's L2 between runs for this reason).

- CPU: read and write every cache line of a buffer twice the last-level cache (at least 64 MiB), which evicts the
  kernel's operands from L1, L2 and L3 of the core doing it (a read-modify-write, not a fill: glibc's memset
  uses non-temporal stores for large sizes, which bypass the cache and would evict nothing). With `--threads`
  > 1 the other cores' private L1/L2 keep what they held; the shared L3 is flushed.
- GPU: overwrite a buffer twice the L2 (at least 256 MiB, as do_bench) with `zero_()` on the device, then wait
  for it (the kernel under test runs on IREE's own stream: the flush must have finished before it starts).
"""
from __future__ import annotations

from collections.abc import Callable

from ..hostcpu import last_level_cache_bytes
from ..results import CacheMode

CACHE_MODES = tuple(CacheMode)
_MIN_CPU_BYTES = 64 << 20
_MIN_GPU_BYTES = 256 << 20


def check_cache_mode(text: str) -> CacheMode:
    """'warm' | 'cold' (any case) -> the mode; ValueError with one line otherwise."""
    mode = (text or "").strip().lower()
    if mode not in CACHE_MODES:
        raise ValueError(f"--cache-mode expects warm or cold, got {text!r}")
    return CacheMode(mode)


def cpu_flush_bytes() -> int:
    llc = last_level_cache_bytes() or 0
    return max(_MIN_CPU_BYTES, 2 * llc)


def make_cpu_flush() -> tuple[Callable[[], None], str]:
    """(flush, what it does): every call reads and writes each cache line of a buffer 2x the LLC."""
    import numpy as np

    size = cpu_flush_bytes()
    buf = np.zeros(size // 8, dtype=np.int64)
    lines = buf[::8]    # one int64 per 64-byte line: the whole line is read and written back

    def flush_impl() -> None:
        np.add(lines, 1, out=lines)

    flush_impl()        # touch the pages now, not in the first timed call's flush
    return flush_impl, f"read+write {size >> 20} MiB (2x LLC) before each call"


def make_gpu_flush() -> tuple[Callable[[], None], str]:
    """(flush, what it does) for the current torch CUDA/ROCm device: zero 2x its L2 and wait."""
    import torch

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    l2 = int(getattr(props, "L2_cache_size", 0) or 0)
    size = max(_MIN_GPU_BYTES, 2 * l2)
    buf = torch.empty(size, dtype=torch.int8, device="cuda")
    sync = torch.cuda.synchronize

    def flush() -> None:
        buf.zero_()
        sync()

    flush()
    return flush, f"zero {size >> 20} MiB (2x L2 {l2 >> 20} MiB) on the GPU before each call"


def make_flush(device: str) -> tuple[Callable[[], None], str]:
    """The flush for a torch device name ("cpu" or "cuda")."""
    return make_cpu_flush() if device == "cpu" else make_gpu_flush()
