"""The timing harness on real IREE kernels (CPU, local-sync), in this process.

The machine running the tests is shared and noisy, so timing assertions use generous bounds; the structural
ones (counts, warm-up, k, streaming, cancel) are exact.
"""
from __future__ import annotations

import gc
import math
import statistics
import subprocess
import sys
import threading
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st
from worker_kernels import MatmulSig, compile_sig

from boo_engine.bench.harness import MAX_BLOCK_K, choose_block_k, measure
from boo_engine.bench.worker import IreeCall, RuntimeCache


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    """A tiny kernel (~2-3 us, dominated by invoke overhead) and a big one (~ms)."""
    out = tmp_path_factory.mktemp("harness_kernels")
    cache = RuntimeCache()
    calls = {}
    for name, n in (("tiny", 8), ("big", 256)):
        sig = MatmulSig(n=n)
        vmfb = compile_sig(sig, str(out))
        calls[name] = IreeCall(cache, sig, vmfb, "local-sync", 1, "main", sig.get_sample_args(0))
    return calls


def _plain_loops_us(call, n: int, runs: int = 25) -> list[float]:
    """Per-call times of plain loops of n calls (gc off, as in the harness): the yardstick for the samples."""
    out = []
    gc.disable()
    try:
        for _ in range(runs):
            t0 = time.perf_counter_ns()
            for _ in range(n):
                call()
            out.append((time.perf_counter_ns() - t0) / n / 1e3)
    finally:
        gc.enable()
    return out


def _agrees_with_plain_loop(samples: list[float], plain: list[float]) -> str | None:
    """Robust to a noisy shared host: the harness may not be clearly faster than the fastest plain loop (a wrong
    division by k would be) nor its best sample clearly slower than a typical plain loop (added overhead).
    Returns what disagrees, or None."""
    if not statistics.median(samples) > 0.75 * min(plain):
        return f"harness median {statistics.median(samples):.2f} us < 0.75 x fastest plain loop {min(plain):.2f} us"
    if not min(samples) < 1.25 * statistics.median(plain):
        return f"harness best {min(samples):.2f} us >= 1.25 x median plain loop {statistics.median(plain):.2f} us"
    return None


def _agrees_in_some_round(sample, plain, rounds: int = 3) -> None:
    """Harness and plain loops measured back to back, up to `rounds` times. A systematic fault (a wrong k, added
    overhead) disagrees in every round; a burst of host noise that slowed one side of one round does not (CI saw
    one: every harness sample of a 0.47 ms gemm at >= 0.69 ms, the plain loops right after at 0.47 ms)."""
    seen = []
    for _ in range(rounds):
        why = _agrees_with_plain_loop(sample(), plain())
        if why is None:
            return
        seen.append(why)
    pytest.fail("; ".join(seen))


def test_sample_count_warmup_and_k_for_big_kernel(kernels):
    m = measure(kernels["big"].call, iters=30, warmup_s=0.05)
    assert len(m.samples_us) == 30
    assert m.warmup_calls >= 3
    assert m.block_k == 1
    assert not m.truncated and not m.cancelled
    assert all(s > 0 for s in m.samples_us)
    assert m.overhead_fraction < 0.01
    _agrees_in_some_round(lambda: measure(kernels["big"].call, iters=30, warmup_s=0.05).samples_us,
                          lambda: _plain_loops_us(kernels["big"].call, 10))


def test_tiny_kernel_is_timed_in_blocks(kernels):
    m = measure(kernels["tiny"].call, iters=200)
    assert m.block_k > 1, (m.est_call_ns, m.timer_overhead_ns, m.loop_overhead_ns)
    assert len(m.samples_us) == 200
    # The harness's own share stays within the 1% budget where it can: k is the smallest block whose timer share
    # plus the loop's fits (CI read k=7 for a 5.75 us call with an 81 ns timer and ~46 ns loop iterations). Where one
    # empty Python loop iteration alone is over it (a ~3 us kernel on a slow core: CI read 34 and 48 ns), k must make
    # the block ~100 us so the timer's share is negligible (a 60 ns timer pair is 0.06% of one): what is left is the
    # irreducible loop cost.
    irreducible = m.loop_overhead_ns / m.est_call_ns
    timer_share = m.timer_overhead_ns / (m.block_k * m.est_call_ns)
    if irreducible < 0.01:
        assert m.overhead_fraction <= 0.011, (m.overhead_fraction, irreducible, m.block_k, m.timer_overhead_ns)
    else:
        assert timer_share <= 0.002, (timer_share, m.block_k, m.timer_overhead_ns, m.est_call_ns)
        assert m.overhead_fraction <= irreducible + 0.002, (
            m.overhead_fraction, irreducible, m.block_k, m.timer_overhead_ns)
    # Agreement with plain loops, over comparable spans: 200 blocks of a 2 us kernel last ~4 ms, so one burst of
    # host noise could slow every sample while the plain loops (~115 ms) average it out (CI saw exactly that:
    # min 2.92 us against a 2.25 us median). Sampling for 0.1 s gives the harness the same chance.
    # min_time_s only adds samples: sampling lasts at least 0.1 s. Not "more than 200 samples": when one loop
    # iteration is just under the 1% budget k is large (CI read k=258 for a 2.6 us call, 0.67 ms blocks), and 200
    # such blocks already last 0.13 s.
    long = measure(kernels["tiny"].call, iters=200, min_time_s=0.1)
    assert long.block_k > 1 and len(long.samples_us) >= 200 and long.sampling_s >= 0.1, (
        long.block_k, len(long.samples_us), long.sampling_s)
    _agrees_in_some_round(lambda: measure(kernels["tiny"].call, iters=200, min_time_s=0.1).samples_us,
                          lambda: _plain_loops_us(kernels["tiny"].call, 2000))


def test_warmup_is_discarded():
    """The first calls are slow (as a cold kernel's are); none of them may reach the samples."""
    state = {"n": 0}

    def call():
        state["n"] += 1
        if state["n"] <= 3:
            time.sleep(0.01)

    m = measure(call, iters=50, warmup_s=0.0, min_warmup_calls=3)
    assert m.warmup_calls == 6            # 3 to warm up, 3 more after the harness's own calibration
    assert state["n"] == 6 + len(m.samples_us) * m.block_k
    assert len(m.samples_us) == 50
    assert max(m.samples_us) < 5_000     # a 10 ms warm-up call would show as >= 10000 us


def test_min_time_extends_sampling_and_max_time_truncates(kernels):
    m = measure(kernels["big"].call, iters=5, min_time_s=0.3, warmup_s=0.01)
    span = sum(s * m.block_k for s in m.samples_us) / 1e6
    assert len(m.samples_us) > 5 and span >= 0.25

    m = measure(kernels["big"].call, iters=10**9, max_time_s=0.3, warmup_s=0.01)
    assert m.truncated
    assert m.wall_s < 1.0
    assert len(m.samples_us) > 5


def test_streaming_cadence_and_completeness(kernels):
    stamps: list[float] = []
    batches: list[list[float]] = []

    def on_batch(b):
        stamps.append(time.perf_counter())
        batches.append(list(b))

    t0 = time.perf_counter()
    m = measure(kernels["big"].call, iters=1, min_time_s=1.0, warmup_s=0.05, on_batch=on_batch)
    elapsed = time.perf_counter() - t0
    assert [s for b in batches for s in b] == m.samples_us       # every sample streamed exactly once
    assert len(batches) / elapsed >= 5.0, (len(batches), elapsed)
    gaps = [b - a for a, b in zip(stamps, stamps[1:])]
    assert max(gaps) < 0.35


def test_cancel_stops_quickly(kernels):
    ev = threading.Event()
    set_at: list[float] = []

    def on_batch(_):
        if not set_at:
            set_at.append(time.perf_counter())
            ev.set()

    m = measure(kernels["big"].call, iters=10**9, max_time_s=30, cancel=ev, on_batch=on_batch)
    assert m.cancelled
    assert time.perf_counter() - set_at[0] < 0.5
    assert m.samples_us                   # what was measured is kept

    ev2 = threading.Event()
    threading.Timer(0.05, ev2.set).start()      # cancelled during warm-up: returns at once, no samples
    t0 = time.perf_counter()
    m = measure(kernels["big"].call, iters=10, warmup_s=30, cancel=ev2)
    assert m.cancelled and not m.samples_us and time.perf_counter() - t0 < 1.0


def test_sync_runs_once_per_block_inside_the_timed_region():
    calls = {"call": 0, "sync": 0}

    def call():
        calls["call"] += 1

    def sync():
        calls["sync"] += 1
        time.sleep(0.001)      # a device wait: must be part of every sample

    m = measure(call, iters=20, warmup_s=0.0, min_warmup_calls=3, sync=sync)
    assert calls["sync"] == m.warmup_calls + len(m.samples_us)
    assert min(s * m.block_k for s in m.samples_us) >= 1000


def test_host_load_sees_another_busy_process(kernels):
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        m = measure(kernels["big"].call, iters=1, min_time_s=1.0, warmup_s=0.01)
    finally:
        spinner.kill()
        spinner.wait()
    assert m.host_load is not None and m.host_load >= 0.5, m.host_load


def test_choose_block_k():
    assert choose_block_k(1_000_000, 50, 20) == 1          # 1 ms call: k = 1
    k = choose_block_k(2_000, 60, 15)                         # 2 us call: timer must be amortised
    assert k > 1 and 60 / k + 15 <= 0.01 * 2_000
    assert 1 < choose_block_k(500, 60, 15) <= MAX_BLOCK_K    # below what any k can fix: block ~100 us
    assert choose_block_k(1, 60, 15) == MAX_BLOCK_K


@given(call_ns=st.floats(1, 1e9), timer_ns=st.floats(10, 500), loop_ns=st.floats(5, 100))
def test_block_k_meets_the_budget_whenever_any_k_can(call_ns, timer_ns, loop_ns):
    k = choose_block_k(call_ns, timer_ns, loop_ns)
    assert 1 <= k <= MAX_BLOCK_K
    if loop_ns < 0.01 * call_ns:
        needed = math.ceil(timer_ns / (0.01 * call_ns - loop_ns))
        if needed <= MAX_BLOCK_K:
            assert timer_ns / k + loop_ns <= 0.01 * call_ns * (1 + 1e-9)
            assert k == max(1, needed)          # and no larger than needed


def test_cold_cache_flushes_before_every_call_outside_the_timing(kernels):
    """--cache-mode cold: one flush before each call (warm-up included), never inside a sample, k forced to 1."""
    order: list[str] = []
    kernel = kernels["tiny"].call

    def call():
        order.append("call")
        kernel()

    def flush():
        order.append("flush")
        time.sleep(0.002)   # a flush far longer than the kernel: inside the timing it would show in every sample

    m = measure(call, iters=30, warmup_s=0.01, min_warmup_calls=3, flush=flush)
    assert m.block_k == 1
    assert order[0::2] == ["flush"] * (len(order) // 2) and order[1::2] == ["call"] * (len(order) // 2)
    assert len(order) // 2 == m.warmup_calls + len(m.samples_us)
    assert statistics.median(m.samples_us) < 1000.0   # the 2 ms flush stayed out of the samples


def test_cold_cache_is_slower_than_warm_for_a_kernel_whose_data_fits_in_cache(tmp_path):
    """A gemm of 4x384 by 384x384 (590 KB of f32 weights, read once a call: fits a Zen 4's L2 and any L3) is
    bound by reading its operands: flushing the caches (a buffer 2x the LLC) before every call makes every call
    fetch them from memory. Measured on a 2-vCPU AMD EPYC Zen 4: 15-22 us warm, 100-150 us cold, 6.4-7x, beside a
    CPU burner too. (The 1x1 conv this test used first is bound by its compute: 1.8x on a Zen 3, 1.13-1.16x on a
    Zen 4, too close to a bound.)"""
    from boo_engine import parse_command
    from boo_engine.bench.flush import make_cpu_flush
    from boo_engine.compile.pool import compile_signature
    from boo_engine.targets import Target

    sig = parse_command("gemm -m 4 -n 384 -k 384")
    art = compile_signature(sig, Target("cpu"), cache=None)
    call = IreeCall(RuntimeCache(), sig, str(art.vmfb_path), "local-sync", 1, "main", sig.get_sample_args(0)).call
    flush, what = make_cpu_flush()
    assert "2x LLC" in what
    warm, cold = [], []
    for _ in range(3):   # interleaved: a load spike on the shared host hits both modes alike
        warm.append(statistics.median(measure(call, iters=30, warmup_s=0.02).samples_us))
        cold.append(statistics.median(measure(call, iters=30, warmup_s=0.02, flush=flush).samples_us))
    assert statistics.median(cold) > 2.0 * statistics.median(warm), (warm, cold)
