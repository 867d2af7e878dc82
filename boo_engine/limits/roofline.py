"""The roofline of a result: the least time its FLOPs and bytes allow on the machine's measured peaks.

    roofline_us = max(flops / peak_compute[dtype], bytes / peak_bandwidth)
    pct_roofline = roofline_us / median_us x 100

An op without a FLOP formula (most aten ops) gets the bandwidth term alone. A result above 100% beat a measured
peak: `Roofline` (one per session run, on the engine's thread) measures the peaks again, once (the first
measurement may have been disturbed). A kernel that still beats them is shown above 100%, with the reason in
`result.device_detail["roofline"]` and a notice: its data fit in the last-level cache while the memory peak is
DRAM streaming, or the compute peak measured for its dtype is not the fastest path this machine has for it. The
peak is never moved to what a kernel achieved: that made "100% of roofline" true by construction (seen for an
fp16 gemm, an f32 bmm and a relu).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypedDict

from ..hostcpu import last_level_cache_bytes
from .peaks import PeakError, Peaks, get_peaks, take_notices
from .theory import DTYPES

if TYPE_CHECKING:
    from ..results import JobResult
    from ..store import Store
    from ..targets import Target


def compute_dtype(dtype_name: str) -> str:
    """The compute peak a kernel of this dtype is held to: its own for float32/16/bf16, float32's otherwise."""
    return dtype_name if dtype_name in DTYPES else "float32"


def terms_us(flops: float, bytes_: float, dtype_name: str, peaks: Peaks) -> tuple[float | None, float | None]:
    """(compute time, memory time) in microseconds on `peaks`; None for a term without work or without a peak."""
    peak = peaks.compute(compute_dtype(dtype_name))
    bw = peaks.bandwidth
    t_compute = flops / (peak.value * 1e3) if flops and peak is not None and peak.value > 0 else None
    t_memory = bytes_ / (bw.value * 1e3) if bytes_ and bw is not None and bw.value > 0 else None
    return t_compute, t_memory


def roofline_us(flops: float, bytes_: float, dtype_name: str, peaks: Peaks) -> float | None:
    terms = [t for t in terms_us(flops, bytes_, dtype_name, peaks) if t is not None]
    return max(terms) if terms else None


def apply(result: JobResult, flops: float, bytes_: float, dtype_name: str, peaks: Peaks) -> float | None:
    """Set the result's roofline_us and pct_roofline (None without a median or a roofline); the unclamped %."""
    median = result.median_us
    roof = roofline_us(flops, bytes_, dtype_name, peaks)
    if roof is None or not median:
        result.roofline_us = result.pct_roofline = None
        return None
    pct = roof / median * 100
    result.roofline_us = roof
    result.pct_roofline = pct
    return pct


class Roofline:
    """The peaks of one session's target and thread count, looked up once (measured on first need), and what a
    result above 100% of its roofline gets: the peaks measured again once, then its reason."""

    #: a result this far above 100% is rounding, not a beaten peak
    TOLERANCE = 1e-6

    def __init__(self, target: Target, threads: int, store: Store | None,
                 run_id: Callable[[], int | None] = lambda: None) -> None:
        self._target = target
        self._threads = threads
        self._store = store
        self._run_id = run_id
        self._peaks: Peaks | None = None
        self._failed: str | None = None
        self._remeasured = False
        #: bumped whenever the peaks change mid-run (the finalizer then recomputes the run's results)
        self.version = 0

    @property
    def peaks(self) -> Peaks | None:
        """The peaks in use (None until first needed, or when they could not be had)."""
        return self._peaks

    def ensure(self) -> tuple[Peaks | None, list[str]]:
        """The peaks, looked up (or measured) on first call; notices to show."""
        if self._peaks is not None or self._failed is not None:
            return self._peaks, []
        try:
            self._peaks = get_peaks(self._target, self._threads, self._store, run_id=self._run_id())
        except PeakError as e:
            self._failed = str(e)
            return None, [f"no roofline: {e}"]
        notices = take_notices()
        if self._peaks.how == "measured":
            notices.insert(0, f"measured this machine's peaks for the roofline in {self._peaks.seconds or 0:.1f} s")
        return self._peaks, notices

    def apply(self, result: JobResult, flops: float, bytes_: float, dtype_name: str) -> list[str]:
        """Set `result`'s roofline; when it beats the peaks, measure them again (once a run) and, if it still
        does, give it the reason (`above_peak_reason`). Returns notices."""
        peaks, notices = self.ensure()
        if peaks is None:
            return notices
        pct = apply(result, flops, bytes_, dtype_name, peaks)
        if result.device_detail and "roofline" in result.device_detail:   # a reason from peaks since replaced
            result.device_detail = {k: v for k, v in result.device_detail.items() if k != "roofline"} or None
        if pct is None or pct <= 100 * (1 + self.TOLERANCE):
            return notices
        who = f"{result.func_name} ({result.variant}, {result.backend})"
        if not self._remeasured:
            self._remeasured = True
            notices.append(f"{who} ran at {pct:.0f}% of its roofline: measuring the peaks again")
            try:
                peaks = get_peaks(self._target, self._threads, self._store, remeasure=True,
                                  run_id=self._run_id(), keep_higher=peaks)
            except PeakError as e:
                notices.append(f"peaks not measured again: {e}")
            self._set(peaks)
            pct = apply(result, flops, bytes_, dtype_name, peaks)
            if pct is None or pct <= 100 * (1 + self.TOLERANCE):
                return notices
        reason = above_peak_reason(result, flops, bytes_, dtype_name, peaks)
        result.device_detail = {**(result.device_detail or {}), "roofline": reason}
        notices.append(f"{who} ran at {pct:.0f}% of its roofline: {reason}")
        return notices

    def _set(self, peaks: Peaks) -> None:
        if peaks != self._peaks:
            self._peaks = peaks
            self.version += 1


def above_peak_reason(result: JobResult, flops: float, bytes_: float, dtype_name: str, peaks: Peaks) -> str:
    """Why `result` ran faster than the roofline of `peaks` allows, in one sentence, from the term it beat."""
    assert result.stats is not None
    median = result.stats.median_us
    t_compute, t_memory = terms_us(flops, bytes_, dtype_name, peaks)
    if t_memory is not None and t_memory > median and (t_compute is None or t_memory >= t_compute):
        bw = peaks.bandwidth
        assert bw is not None
        llc = last_level_cache_bytes() or 0
        where = (f"its {bytes_ / 1e6:.3g} MB fit in the {llc / 1e6:.3g} MB last-level cache, faster than the "
                 if llc and bytes_ <= llc else "it moved its bytes faster than ")
        return (f"above the memory peak: {where}memory peak measured by streaming far larger buffers "
                f"({bw.value:.1f} GB/s, {bw.source}); the peak is left as measured")
    peak = peaks.compute(compute_dtype(dtype_name))
    assert peak is not None
    return (f"above the {peak.dtype} compute peak measured here ({peak.value:.1f} GFLOP/s, {peak.source}): that "
            f"measurement is below what this machine does for {peak.dtype} (a faster path than the peak's kernel, "
            f"or a measurement disturbed by other processes); the peak is left as measured (`boo-tui peak` "
            f"measures again)")


class PeakFacts(TypedDict):
    kind: str
    dtype: str | None
    value: float
    source: str
    theoretical: float | None


class PeaksFacts(TypedDict):
    """A machine's peaks as `describe` gives them."""

    machine_key: str
    target: str
    threads: int
    measured_at: str
    how: str
    basis: str
    peaks: list[PeakFacts]


def describe(peaks: Peaks) -> PeaksFacts:
    """The peaks as JSON-able facts (exports, the dashboard)."""
    return {"machine_key": peaks.machine_key, "target": peaks.target, "threads": peaks.threads,
            "measured_at": peaks.measured_at, "how": peaks.how, "basis": peaks.basis,
            "peaks": [{"kind": p.kind, "dtype": p.dtype, "value": p.value, "source": p.source,
                       "theoretical": p.theoretical} for p in peaks.entries]}
