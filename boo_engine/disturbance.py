"""Samples that know they were disturbed, and the rounds a result was measured in.

A CPU kernel on one thread (IREE local-sync, torch with one thread) runs entirely on the calling thread, so the
thread's CPU clock (CLOCK_THREAD_CPUTIME_ID, read by the harness around every block) advances only while the
kernel runs. Wall time minus thread CPU time is the time the thread did not run: another process held its core,
or the hypervisor took the VM's (steal). Measured on a 2-core AMD EPYC Zen 3 VM (docs/performance.md, "Verdicts
that hold"): on a quiet machine wall - CPU is -0.6% .. 0% of a sample (the CPU interval also holds the clock's own
system calls, ~1.2 us each), and a core lost even for one scheduler slice adds whole milliseconds.

- A sample is **disturbed** when its wall time exceeds its thread CPU time by more than `DISTURBED_FRACTION` of
  the wall time (and `DISTURBED_MIN_US`, so clock granularity alone never marks one).
- A disturbed sample's **effective** time is its CPU time, less the CPU clock's own cost measured on the same
  result's undisturbed samples: the time the kernel itself ran. Undisturbed samples keep their wall time. The
  headline (median, CIs, verdicts) is taken over the effective samples; the raw wall samples and CPU samples are
  both kept, so nothing is lost and any other statistic can be recomputed.

What this cannot remove: a core that runs slower without being taken away (another VM on the same physical core,
memory-bandwidth contention). Its thread CPU time grows with the wall time. That noise shows as spread between
rounds (each round a fresh placement of the inputs: bench/placement.py), and the comparisons take their
confidence from the rounds (compare.py), not from the samples of one round.

A multi-threaded CPU kernel (`--threads N`) and a GPU kernel have no per-thread clock that means "the kernel ran":
their samples are wall time only (`cpu_us` empty), and other processes' load is what flags them.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: wall - thread CPU above this share of the wall time: the thread lost its core during the sample
DISTURBED_FRACTION = 0.02
#: ... and above this many microseconds per call
DISTURBED_MIN_US = 1.0
#: other processes taking more than 10% of one core during a measurement make it suspect (bench/stats.py flags
#: it; a kernel without a thread clock cannot take that time out, so its comparisons are unclear: compare.py)
LOAD_LIMIT = 0.10
#: a result with more rounds than this keeps its rounds; fewer (or none recorded) are cut into this many chunks
DEFAULT_ROUNDS = 5


def disturbed_mask(wall_us: Sequence[float], cpu_us: Sequence[float]) -> np.ndarray:
    """True for each sample during which the thread did not run for part of the wall time. All False when there
    is no CPU time per sample (multi-threaded, GPU, or measured before CPU time was recorded)."""
    w = np.asarray(wall_us, dtype=np.float64)
    if len(cpu_us) != w.size:
        return np.zeros(w.size, dtype=bool)
    c = np.asarray(cpu_us, dtype=np.float64)
    return (w - c) > np.maximum(DISTURBED_FRACTION * w, DISTURBED_MIN_US)


def effective_samples(wall_us: Sequence[float], cpu_us: Sequence[float]) -> list[float]:
    """Per sample, the time the kernel ran: the wall time of an undisturbed sample, the CPU time of a disturbed one
    (less the median CPU-clock overhead of this result's undisturbed samples, never below zero)."""
    w = np.asarray(wall_us, dtype=np.float64)
    mask = disturbed_mask(wall_us, cpu_us)
    if not mask.any():
        return [float(x) for x in w]
    c = np.asarray(cpu_us, dtype=np.float64)
    clean = ~mask
    offset = float(np.median(c[clean] - w[clean])) if clean.any() else 0.0
    eff = np.where(mask, c - max(offset, 0.0), w)
    return [float(x) for x in np.maximum(eff, 0.0)]


def round_sizes(n: int, rounds: Sequence[int] | None) -> list[int]:
    """The number of samples in each round: the recorded ones when there are several and they add up to n, else n
    cut into DEFAULT_ROUNDS consecutive chunks (results stored before rounds were recorded were taken in up to 5
    interleaved rounds of equal size, in order; a lone round's chunks are moments of the machine at least)."""
    if rounds and len(rounds) > 1 and sum(rounds) == n and all(r > 0 for r in rounds):
        return list(rounds)
    if n <= 0:
        return []
    parts = min(DEFAULT_ROUNDS, n)
    base, extra = divmod(n, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def round_medians(samples_us: Sequence[float], rounds: Sequence[int] | None) -> list[float]:
    """The median of each round's samples (see round_sizes)."""
    out: list[float] = []
    start = 0
    a = np.asarray(samples_us, dtype=np.float64)
    for size in round_sizes(a.size, rounds):
        out.append(float(np.median(a[start:start + size])))
        start += size
    return out


def disturbed_count(wall_us: Sequence[float], cpu_us: Sequence[float]) -> int | None:
    """How many samples lost their core; None when there is no CPU time to tell."""
    if not cpu_us or len(cpu_us) != len(wall_us):
        return None
    return int(disturbed_mask(wall_us, cpu_us).sum())
