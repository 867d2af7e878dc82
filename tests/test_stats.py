"""compute_stats / noise_check against values worked out by hand and against numpy/statistics directly."""
from __future__ import annotations

import statistics

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from boo_engine.bench.stats import compute_stats, noise_check
from boo_engine.results import Stats


def test_known_values():
    s = compute_stats([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0])
    assert s.n == 10
    assert (s.min_us, s.max_us, s.mean_us, s.median_us) == (1.0, 10.0, 5.5, 5.5)
    assert s.stddev_us == pytest.approx(statistics.stdev(range(1, 11)))   # sample stddev, ddof=1
    assert s.p10_us == pytest.approx(1.9)   # numpy linear: 1 + 0.1 * 9
    assert s.p90_us == pytest.approx(9.1)
    assert s.iqr_us == pytest.approx(7.75 - 3.25)
    assert s.gflops is None and s.gbps is None


def test_single_sample_has_zero_stddev():
    s = compute_stats([42.0])
    assert s.n == 1 and s.stddev_us == 0.0 and s.median_us == s.p10_us == s.p90_us == 42.0 and s.iqr_us == 0.0


def test_throughput_from_median():
    # 2e9 flops in a 1000 us median call = 2e12 flop/s = 2000 GFLOP/s; 1e6 bytes in 1 ms = 1 GB/s
    s = compute_stats([900.0, 1000.0, 5000.0], flops=2_000_000_000, bytes_=1_000_000)
    assert s.gflops == pytest.approx(2000.0)
    assert s.gbps == pytest.approx(1.0)


@pytest.mark.parametrize("bad", [[], [1.0, float("nan")], [float("inf")]])
def test_bad_samples_raise(bad):
    with pytest.raises(ValueError):
        compute_stats(bad)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(min_value=0.01, max_value=1e6, allow_nan=False), min_size=1, max_size=200))
def test_matches_numpy_and_is_ordered(xs):
    s = compute_stats(xs)
    a = np.asarray(xs)
    assert s.median_us == pytest.approx(float(np.median(a)))
    assert s.mean_us == pytest.approx(float(a.mean()))
    assert s.min_us <= s.p10_us <= s.median_us <= s.p90_us <= s.max_us
    assert s.iqr_us >= 0


def _stats(median: float, iqr: float) -> Stats:
    return Stats(n=10, min_us=median, max_us=median, mean_us=median, stddev_us=0.0, median_us=median,
                 p10_us=median, p90_us=median, iqr_us=iqr)


def test_noise_check_quiet():
    assert noise_check(_stats(100.0, 5.0), 0.02) == (False, None)
    assert noise_check(_stats(100.0, 10.0), None) == (False, None)   # exactly at the limit is not noisy


def test_noise_check_wide_spread_names_figures():
    noisy, reason = noise_check(_stats(100.0, 14.0), None)
    assert noisy and reason == "IQR/median 14% > 10%"


def test_noise_check_host_load_and_both():
    noisy, reason = noise_check(_stats(100.0, 1.0), 0.35)
    assert noisy and "35%" in reason and "other processes" in reason
    noisy, reason = noise_check(_stats(100.0, 20.0), 0.5, iqr_ratio_limit=0.15, load_limit=0.2)
    assert noisy and reason.startswith("IQR/median 20% > 15%") and "50%" in reason and "20%" in reason
