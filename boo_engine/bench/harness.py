"""The timing loop. It runs inside a benchmark worker process, where it owns the CPU.

What makes the numbers honest (the rules torch.utils.benchmark and timeit follow: the number is the kernel's, not
the harness's, the loader's or another process's):

- Warm-up calls are timed but discarded: at least `min_warmup_calls` calls AND `warmup_s` seconds, so the first
  call's loading, page faults and cold caches never reach the samples.
- A sample is the mean time of a block of `k` back-to-back calls, timed with `time.perf_counter_ns` around the
  whole block. `k` is chosen from the warm-up so that the harness's own cost per call (the timer pair spread over
  the block plus one Python loop iteration) stays under 1% of a call. Kernels far above the overhead get k = 1.
- Nothing else happens between the two timer reads: samples are appended to a list, and new samples are handed
  to `on_batch` only between blocks, once `batch_interval_s` has passed since the last hand-off. Garbage
  collection is switched off while measuring (as `timeit` does) so a collection never lands inside a block.
- The CPU time that OTHER processes used while we measured is recorded (`host_load`) so a noisy measurement can
  be flagged instead of silently trusted.
- The call itself is the kernel's and nothing else: an IREE CPU kernel (`child.IreeCall`) gets its result buffer
  from IREE's caching allocator, so a call neither allocates, zeroes nor page-faults its output (with the heap
  allocator each call calloc'd it: ~19 us per MiB, and a fault per page above 32 MiB), and its reproducer command
  asks iree-benchmark-module for the same allocator. What stays outside our control is where in physical memory
  the inputs land: a kernel with power-of-two strides (the 512^3 f32 gemm) runs up to ~8% apart from one
  placement of identical inputs to another, in iree-benchmark-module as in here (docs/performance.md).

Stopping rule: sampling stops once there are `iters` samples AND (when `min_time_s` is given) at least
`min_time_s` seconds were spent sampling; so `min_time_s` only ever adds samples, and `iters` stays the minimum
count, matching iree-boo-driver's `--iter N`. `max_time_s` bounds the whole measurement (warm-up included) as a
safety net; a measurement it cut short has `truncated=True` and fewer samples. `iters` counts samples, not calls:
with k > 1 the kernel runs `iters * k` times (each sample already averages k calls).

Cold caches (`flush`, --cache-mode cold): `flush()` runs before every call, warm-up included, outside the timed
region (between the previous sample's end and the next one's start); each sample is then ONE call (k = 1), since a
block of k calls would run k-1 of them warm.

Device synchronisation: the measured call must return only once the device has finished. IREE's default
(async-internal) functions wait on their completion fence before returning, and CPU drivers run inline, so an
IREE invoke is already synchronous. Asynchronous callers (eager torch on CUDA) pass `sync`, which is called once
after each block, inside the timed region.
"""
from __future__ import annotations

import gc
import itertools
import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

# The harness's own share of a sample must stay below this fraction of the call time.
OVERHEAD_BUDGET = 0.01
# Upper bound on calls per block: beyond it a sample would hide too much variation, and for sub-microsecond
# calls the Python loop itself dominates anyway (the overhead estimate says so).
MAX_BLOCK_K = 10_000

_now_ns = time.perf_counter_ns
_cpu_ns = time.thread_time_ns


class CancelFlag(Protocol):
    def is_set(self) -> bool: ...


@dataclass
class Measurement:
    """Samples (microseconds per call) and how they were taken."""

    samples_us: list[float]
    block_k: int                 # calls per sample
    warmup_calls: int            # calls made and discarded before sampling
    wall_s: float                # wall time of the whole measurement, warm-up included
    host_load: float | None      # other processes' CPU-s per wall second (1.0 = one busy core); None if unknown
    timer_overhead_ns: float = 0.0   # cost of one timer read pair
    loop_overhead_ns: float = 0.0    # cost of one loop iteration calling an empty function
    est_call_ns: float = 0.0         # call time estimated from the warm-up
    sampling_s: float = 0.0          # wall time of the sampling loop alone (samples + bookkeeping between them)
    truncated: bool = False          # max_time_s stopped sampling before the stopping rule was met
    cancelled: bool = False          # cancel was set; samples taken so far are kept
    #: per sample, the calling thread's CPU time (us per call) over the same block, read just outside the wall
    #: pair; None unless asked for (`thread_cpu`): see boo_engine/disturbance.py
    cpu_us: list[float] | None = None
    #: CPU time the hypervisor stole from this VM's cores while we measured, CPU-s per wall second (None: unknown)
    steal: float | None = None

    @property
    def overhead_fraction(self) -> float:
        """Estimated harness cost per call relative to the call itself (goal: < 0.01)."""
        if self.est_call_ns <= 0:
            return float("nan")
        per_call = self.loop_overhead_ns + self.timer_overhead_ns / self.block_k
        return per_call / self.est_call_ns


def measure(
    call: Callable[[], object],
    *,
    iters: int = 100,
    min_time_s: float | None = None,
    max_time_s: float | None = 60.0,
    warmup_s: float = 0.1,
    min_warmup_calls: int = 3,
    on_batch: Callable[[list[float]], None] | None = None,
    batch_interval_s: float = 0.15,
    cancel: CancelFlag | None = None,
    sync: Callable[[], object] | None = None,
    block_k: int | None = None,
    flush: Callable[[], object] | None = None,
    thread_cpu: bool = False,
) -> Measurement:
    """Time `call` (no arguments; it must return only once its work is done, or pass `sync`).

    Returns every sample (per-call microseconds). `on_batch` receives the samples taken since its last call, at
    most every `batch_interval_s` and once at the end, so a live view can follow without perturbing the loop.
    `cancel.is_set()` is polled between warm-up calls and at each batch hand-off; when set, sampling stops and
    the samples so far are returned with `cancelled=True`. `block_k` forces the block size (overhead studies).
    `flush` (cold caches) runs before every call, untimed; samples are then single calls.
    `thread_cpu`: also read this thread's CPU time around every block (`Measurement.cpu_us`), for a call that
    runs entirely on the calling thread (IREE local-sync, torch with one thread): a block during which the
    thread lost its core then shows as wall time the thread did not run (boo_engine/disturbance.py).
    """
    if iters < 1:
        raise ValueError(f"iters must be >= 1, got {iters}")
    if block_k is not None and block_k < 1:
        raise ValueError(f"block_k must be >= 1, got {block_k}")
    t_start = _now_ns()
    gc_was_enabled = gc.isenabled()
    gc.disable()     # no collection inside a block; a full gc.collect() first would cost ~100 ms per job
    load = _HostLoad()
    deadline = t_start + int(max_time_s * 1e9) if max_time_s is not None else None
    try:
        warm_calls, est_ns, cancelled = _warm_up(call, sync, warmup_s, min_warmup_calls, deadline, cancel, flush)
        # Our own costs are calibrated after the warm-up, on a core the warm-up has brought up to speed: taken
        # first (a few ms, often right after the process was idle) they came out up to 2x high now and then,
        # which inflated k and the reported overhead.
        timer_ns = _timer_overhead_ns()
        loop_ns = _loop_overhead_ns()
        # ... and those ~3 ms of Python push the kernel's data and code out of the caches: seen as a first sample
        # 3-4x the rest on a 17 us gemm, once per round. A few calls bring them back.
        if not cancelled:
            warm_calls += _rewarm(call, sync, flush)
        k = 1 if flush is not None else block_k if block_k is not None else choose_block_k(est_ns, timer_ns, loop_ns)
        samples: list[float] = []
        cpu: list[float] | None = None
        truncated = False
        sampling_s = 0.0
        if not cancelled:
            t_sampling = _now_ns()
            samples, cpu, truncated, cancelled = _sample(
                call, sync, k, iters, min_time_s, deadline, on_batch, batch_interval_s, cancel, flush, thread_cpu)
            sampling_s = (_now_ns() - t_sampling) / 1e9
    finally:
        if gc_was_enabled:
            gc.enable()
    wall_s = (_now_ns() - t_start) / 1e9
    host_load, steal = load.finish()
    return Measurement(
        samples_us=samples, block_k=k, warmup_calls=warm_calls, wall_s=wall_s, host_load=host_load,
        timer_overhead_ns=timer_ns, loop_overhead_ns=loop_ns, est_call_ns=est_ns, sampling_s=sampling_s,
        truncated=truncated, cancelled=cancelled, cpu_us=cpu if thread_cpu else None, steal=steal,
    )


def choose_block_k(call_ns: float, timer_ns: float, loop_ns: float) -> int:
    """Smallest k with (timer_ns / k + loop_ns) <= 1% of call_ns.

    When even k -> infinity cannot reach the budget (calls of a few hundred ns, where the loop iteration itself
    is > 1%), take the k that makes the block last ~100 us, capped: the timer then costs nothing and what remains
    is the unavoidable cost of calling from Python, which `overhead_fraction` reports.
    """
    budget = OVERHEAD_BUDGET * max(call_ns, 1.0)
    if timer_ns <= budget - loop_ns:
        return 1
    if budget > loop_ns:
        k = math.ceil(timer_ns / (budget - loop_ns))
    else:
        k = math.ceil(100_000 / max(call_ns, 1.0))
    return max(1, min(MAX_BLOCK_K, k))


# ---- the loops ------------------------------------------------------------------------------------------

def _warm_up(call, sync, warmup_s, min_calls, deadline, cancel, flush=None) -> tuple[int, float, bool]:
    """Run and discard calls; return (calls, estimated ns per call, cancelled).

    The estimate is the median of the second half of the warm-up calls (the first ones are the slow, cold ones),
    minus the timer cost; it only serves to pick k.
    """
    times: list[int] = []
    end = _now_ns() + int(warmup_s * 1e9)
    while True:
        if cancel is not None and cancel.is_set():
            return len(times), _estimate(times), True
        if flush is not None:
            flush()
        t0 = _now_ns()
        call()
        if sync is not None:
            sync()
        t1 = _now_ns()
        times.append(t1 - t0)
        if len(times) >= min_calls and t1 >= end:
            break
        if deadline is not None and t1 >= deadline:
            break
    return len(times), _estimate(times), False


def _rewarm(call, sync, flush, calls: int = 3, budget_ns: int = 5_000_000) -> int:
    """A few discarded calls (at least one, at most `calls` or ~`budget_ns`) right before sampling; returns how many."""
    end = _now_ns() + budget_ns
    done = 0
    while done < calls:
        if flush is not None:
            flush()
        call()
        if sync is not None:
            sync()
        done += 1
        if _now_ns() >= end:
            break
    return done


def _estimate(times: list[int]) -> float:
    if not times:
        return 0.0
    tail = times[len(times) // 2:]
    return float(statistics.median(tail))


def _sample(call, sync, k, iters, min_time_s, deadline, on_batch, interval_s, cancel, flush=None, thread_cpu=False):
    """The hot loop. Between the two timer reads there is only the block of calls (and `sync`); the thread's CPU
    clock (`thread_cpu`) is read just outside them, so its cost (a system call) never lands in a sample."""
    samples: list[float] = []
    cpu: list[float] = []
    append = samples.append
    cpu_append = cpu.append
    now = _now_ns
    cpu_now = _cpu_ns if thread_cpu else _zero
    interval_ns = int(interval_s * 1e9)
    start = now()
    min_end = start + int(min_time_s * 1e9) if min_time_s is not None else start
    next_flush = start + interval_ns
    flushed = 0
    scale = 1e-3 / k                      # ns per block -> us per call
    truncated = cancelled = False
    while True:
        if flush is not None:      # cold caches: k == 1, the flush before the timer starts
            flush()
            c0 = cpu_now()
            t0 = now()
            call()
            if sync is not None:
                sync()
            t1 = now()
            c1 = cpu_now()
        elif k == 1 and sync is None:
            c0 = cpu_now()
            t0 = now()
            call()
            t1 = now()
            c1 = cpu_now()
        else:
            block = itertools.repeat(None, k)
            c0 = cpu_now()
            t0 = now()
            for _ in block:
                call()
            if sync is not None:
                sync()
            t1 = now()
            c1 = cpu_now()
        append((t1 - t0) * scale)
        cpu_append((c1 - c0) * scale)
        if len(samples) >= iters and t1 >= min_end:
            break
        if t1 >= next_flush:
            if on_batch is not None:
                on_batch(samples[flushed:])
                flushed = len(samples)
            if cancel is not None and cancel.is_set():
                cancelled = True
                break
            next_flush = now() + interval_ns
        if deadline is not None and t1 >= deadline:
            truncated = True
            break
    if on_batch is not None and flushed < len(samples):
        on_batch(samples[flushed:])
    return samples, cpu, truncated, cancelled


def _zero() -> int:
    return 0


# ---- overhead estimates ---------------------------------------------------------------------------------

def _timer_overhead_ns(n: int = 2000) -> float:
    """Median cost of the two timer reads that bracket a block."""
    now = _now_ns
    pairs = []
    for _ in range(n):
        t0 = now()
        t1 = now()
        pairs.append(t1 - t0)
    return float(statistics.median(pairs))


def _noop() -> None:
    return None


def _loop_overhead_ns(n: int = 5000, reps: int = 20) -> float:
    """Cost of one block iteration calling an empty Python function: the part of each call that is ours.

    The best of many short loops (~0.1 ms each): on a shared host, 5 loops of 20000 all caught some noise now and
    then (CI once read 34 ns where ~25 is usual), which overstated the overhead and the k it asks for."""
    now = _now_ns
    best = math.inf
    for _ in range(reps):
        block = itertools.repeat(None, n)
        t0 = now()
        for _ in block:
            _noop()
        best = min(best, (now() - t0) / n)
    return float(best)


# ---- host load ------------------------------------------------------------------------------------------

class _HostLoad:
    """CPU time the rest of the machine used while we measured, in CPU-seconds per wall second.

    Busy time of all cores comes from /proc/stat (user+nice+system+irq+softirq+steal jiffies); our own
    process's CPU time (all its threads, e.g. IREE's task workers) from `time.process_time()` is subtracted.
    Jiffies are 10 ms, so very short measurements give coarse values. None where /proc/stat is missing.
    """

    def __init__(self) -> None:
        self._busy0 = _busy_jiffies()
        self._own0 = time.process_time()
        self._wall0 = time.monotonic()

    def finish(self) -> tuple[float | None, float | None]:
        """(other processes' load, the hypervisor's steal), each in CPU-s per wall second; None where unknown."""
        busy1 = _busy_jiffies()
        if self._busy0 is None or busy1 is None:
            return None, None
        wall = time.monotonic() - self._wall0
        if wall <= 0:
            return None, None
        busy_s = (busy1[0] - self._busy0[0]) / _CLK_TCK
        steal_s = (busy1[1] - self._busy0[1]) / _CLK_TCK
        own_s = time.process_time() - self._own0
        # steal is time the VM's cores did not run at all: it is nobody's load inside the VM
        return max(0.0, busy_s - steal_s - own_s) / wall, steal_s / wall


_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _busy_jiffies() -> tuple[int, int] | None:
    try:
        with open("/proc/stat", "rb") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != b"cpu":
        return None
    v = [int(x) for x in fields[1:9]]
    # user nice system idle iowait irq softirq steal (guest time is already inside user): (busy, steal)
    return v[0] + v[1] + v[2] + v[5] + v[6] + v[7], v[7]
