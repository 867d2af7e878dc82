"""Latency statistics of one measurement, and the flag that says a measurement should not be trusted.

The median is the headline number (robust to the odd descheduled sample); p10/p90 and the IQR show the spread;
every raw sample is kept elsewhere so any other statistic can be recomputed later.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..disturbance import LOAD_LIMIT
from ..results import Stats

#: torch.utils.benchmark warns when IQR/median exceeds 10%: the same limit here.
IQR_RATIO_LIMIT = 0.10


def compute_stats(samples_us: Sequence[float], *, flops: int | None = None, bytes_: int | None = None) -> Stats:
    """Summarize per-call latencies (microseconds).

    stddev is the sample standard deviation (ddof=1, 0 for one sample); percentiles use numpy's linear
    interpolation. Throughputs are computed from the median because the median is the number we report.
    Raises ValueError on no samples or a non-finite sample, since a statistic over those would be a lie.
    """
    a = np.asarray(samples_us, dtype=np.float64)
    if a.ndim != 1 or a.size == 0:
        raise ValueError("compute_stats: no samples")
    if not np.all(np.isfinite(a)):
        raise ValueError("compute_stats: non-finite latency sample")
    p10, p25, p50, p75, p90 = np.percentile(a, [10, 25, 50, 75, 90])
    median = float(p50)
    return Stats(
        n=int(a.size),
        min_us=float(a.min()),
        max_us=float(a.max()),
        mean_us=float(a.mean()),
        stddev_us=float(a.std(ddof=1)) if a.size > 1 else 0.0,
        median_us=median,
        p10_us=float(p10),
        p90_us=float(p90),
        iqr_us=float(p75 - p25),
        gflops=_per_second_giga(flops, median),
        gbps=_per_second_giga(bytes_, median),
    )


def _per_second_giga(amount: int | None, median_us: float) -> float | None:
    """amount per median call, in units of 1e9 per second (amount / (median_us * 1e-6) / 1e9)."""
    if amount is None or median_us <= 0:
        return None
    return float(amount) / median_us / 1e3


def noise_check(
    stats: Stats,
    host_load: float | None,
    *,
    iqr_ratio_limit: float = IQR_RATIO_LIMIT,
    load_limit: float = LOAD_LIMIT,
) -> tuple[bool, str | None]:
    """Is this measurement too noisy to trust? Returns (noisy, reason).

    Two independent signs: a wide spread (IQR/median above the limit) and other processes competing for the
    CPU during the measurement (host_load, a fraction of one core, above the limit). The reason names each sign
    with its figures so the user can judge, e.g. "IQR/median 14% > 10%".
    """
    reasons: list[str] = []
    if stats.median_us > 0:
        ratio = stats.iqr_us / stats.median_us
        if ratio > iqr_ratio_limit:
            reasons.append(f"IQR/median {_pct(ratio)} > {_pct(iqr_ratio_limit)}")
    if host_load is not None and math.isfinite(host_load) and host_load > load_limit:
        reasons.append(f"other processes took {_pct(host_load)} of a core > {_pct(load_limit)}")
    if not reasons:
        return False, None
    return True, "; ".join(reasons)


def _pct(x: float) -> str:
    return f"{x * 100:.0f}%"
