"""Variant comparison with synthetic samples whose answer is known."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from boo_engine.compare import (
    FASTER,
    INSUFFICIENT,
    SAME,
    SLOWER,
    UNCLEAR,
    Comparison,
    compare_samples,
    decide,
    geomean,
)
from boo_engine.comparisons import by_variant, column_label, compare_results, compare_runs, regressions, summarize
from boo_engine.results import DONE, FAILED, JobResult


def _noisy(median: float, n: int, rel_sd: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return median * (1.0 + rel_sd * rng.standard_normal(n))


def test_identical_distributions_are_same():
    b = _noisy(100.0, 200, 0.02, 1)
    v = _noisy(100.0, 200, 0.02, 2)
    c = compare_samples(b, v)
    assert c.verdict == SAME
    assert c.p_value > 0.05
    assert c.ci_low <= 1.0 <= c.ci_high
    assert c.ratio == pytest.approx(1.0, abs=0.01)


def test_exactly_identical_samples():
    c = compare_samples([5.0] * 20, [5.0] * 20)
    assert c.verdict == SAME and c.ratio == 1.0 and c.p_value == pytest.approx(1.0)


def test_ten_percent_slower_low_noise():
    c = compare_samples(_noisy(100.0, 100, 0.01, 3), _noisy(110.0, 100, 0.01, 4))
    assert c.verdict == SLOWER
    assert c.ratio == pytest.approx(1.10, abs=0.01)
    assert c.ci_low > 1.0 and c.ci_low <= c.ratio <= c.ci_high
    assert c.p_value < 1e-6
    assert c.speedup == pytest.approx(1 / c.ratio)


def test_ten_percent_faster_low_noise():
    c = compare_samples(_noisy(100.0, 100, 0.01, 5), _noisy(90.0, 100, 0.01, 6))
    assert c.verdict == FASTER and c.ci_high < 1.0 and c.speedup > 1.1


def test_small_significant_shift_is_same():
    # 2% shift, very low noise: highly significant, but below the 3% minimum effect
    c = compare_samples(_noisy(100.0, 300, 0.002, 7), _noisy(102.0, 300, 0.002, 8))
    assert c.p_value < 1e-6
    assert c.ratio == pytest.approx(1.02, abs=0.002)
    assert c.verdict == SAME
    # the same data with a lower bar is a verdict
    assert compare_samples(_noisy(100.0, 300, 0.002, 7), _noisy(102.0, 300, 0.002, 8), min_effect=0.01).verdict == SLOWER


def test_big_noisy_shift_with_few_samples_is_not_significant():
    b = [100.0, 40.0, 180.0, 70.0, 150.0, 95.0]
    v = [130.0, 60.0, 210.0, 85.0, 170.0, 110.0]   # medians ~97 vs ~120: +23%, but the spread is huge
    c = compare_samples(b, v)
    assert c.ratio > 1.2
    assert c.p_value > 0.05
    assert c.verdict == UNCLEAR   # a +23% point estimate the data cannot confirm nor rule out
    assert c.ci_low < 1.0 < c.ci_high


def test_too_few_samples_is_insufficient():
    c = compare_samples([1.0, 1.0, 1.0, 1.0], [2.0] * 50)
    assert c.verdict == INSUFFICIENT and c.ratio == 2.0 and math.isnan(c.p_value) and math.isnan(c.ci_low)
    assert compare_samples([], [1.0] * 10).verdict == INSUFFICIENT


def test_seeded():
    # (its speed, which the dashboard's compare screen relies on, is measured by benchmarks/bench_compare.py)
    b, v = _noisy(100.0, 100, 0.05, 9), _noisy(104.0, 100, 0.05, 10)
    assert compare_samples(b, v) == compare_samples(b, v)
    assert compare_samples(b, v, seed=1).ci_low != compare_samples(b, v, seed=2).ci_low


def test_bootstrap_ci_covers_the_true_ratio_most_of_the_time():
    # a coverage check of the interval itself: 40 independent experiments, true ratio 1.05
    hits = 0
    for i in range(40):
        c = compare_samples(_noisy(100.0, 60, 0.05, 100 + i), _noisy(105.0, 60, 0.05, 200 + i), n_boot=1000)
        hits += c.ci_low <= 1.05 <= c.ci_high
    assert hits >= 32   # nominal 95%: 38 expected; a broken CI (e.g. swapped sides) gets ~0


def test_geomean():
    assert geomean([2.0, 0.5]) == pytest.approx(1.0)
    assert geomean([1.0, 4.0]) == pytest.approx(2.0)
    assert geomean([1.1, 1.1, 1.1]) == pytest.approx(1.1)
    assert geomean([2.0, float("nan"), 8.0]) == pytest.approx(4.0)
    assert math.isnan(geomean([]))
    with pytest.raises(ValueError):
        geomean([1.0, 0.0])


def _c(ratio: float, verdict: str) -> Comparison:
    return Comparison(ratio, ratio, ratio, 0.001, verdict, 10, 10, 1.0, ratio)


def test_summarize_and_regressions():
    comps = {"v1": [_c(0.5, FASTER), _c(2.0, SLOWER), _c(1.0, SAME), _c(float("nan"), INSUFFICIENT)]}
    s = summarize(comps)["v1"]
    assert (s.n, s.faster, s.slower, s.same, s.insufficient) == (4, 1, 1, 1, 1)
    assert s.geomean_ratio == pytest.approx(1.0)
    keyed = {"a": _c(1.20, SLOWER), "b": _c(1.04, SLOWER), "c": _c(1.5, SAME), "d": _c(0.5, FASTER)}
    assert [k for k, _ in regressions(keyed, 5)] == ["a"]
    assert [k for k, _ in regressions(keyed, 2)] == ["a", "b"]
    assert [i for i, _ in regressions(list(keyed.values()), 25)] == []


def _job(cmd: str, variant: str, backend: str, samples, status=DONE) -> JobResult:
    return JobResult(job_id=f"{cmd}/{variant}/{backend}", command=cmd, func_name="f", op="conv", variant=variant,
                     target="cpu", backend=backend, status=status, samples_us=list(samples))


def test_compare_results_pairs_columns_with_the_baseline():
    base = _noisy(100.0, 50, 0.01, 11)
    results = [
        _job("c1", "baseline", "iree", base),
        _job("c1", "fast", "iree", _noisy(80.0, 50, 0.01, 12)),
        _job("c1", "baseline", "torch", _noisy(150.0, 50, 0.01, 13)),
        _job("c2", "fast", "iree", _noisy(80.0, 50, 0.01, 14)),         # no baseline for c2: no comparison
        _job("c1", "broken", "iree", [], status=FAILED),                 # failed: no comparison
    ]
    comps = compare_results(results)
    assert set(comps) == {("cpu", "c1", "fast"), ("cpu", "c1", "torch")}
    assert comps[("cpu", "c1", "fast")].verdict == FASTER
    assert comps[("cpu", "c1", "torch")].verdict == SLOWER
    assert column_label(results[2]) == "torch"
    assert set(by_variant(comps)) == {"fast", "torch"}


def test_compare_runs_cell_by_cell():
    before = [_job("c1", "baseline", "iree", _noisy(100.0, 50, 0.01, 20)),
              _job("c2", "baseline", "iree", _noisy(100.0, 50, 0.01, 21)),
              _job("c3", "baseline", "iree", _noisy(100.0, 50, 0.01, 22))]
    after = [_job("c1", "baseline", "iree", _noisy(120.0, 50, 0.01, 23)),   # regressed by 20%
             _job("c2", "baseline", "iree", _noisy(100.0, 50, 0.01, 24)),   # unchanged
             _job("c4", "baseline", "iree", _noisy(50.0, 50, 0.01, 25))]    # new: nothing to compare with
    comps = compare_runs(before, after)
    assert set(comps) == {("cpu", "c1", "baseline"), ("cpu", "c2", "baseline")}
    assert comps[("cpu", "c1", "baseline")].verdict == SLOWER
    assert comps[("cpu", "c2", "baseline")].verdict == SAME
    assert [k[1] for k, _ in regressions(comps, 10)] == ["c1"]
    assert regressions(comps, 25) == []


# --- verdicts never contradict their interval -------------------------------------------------------------------

def test_significant_effect_whose_ci_contains_one_is_unclear_not_slower():
    # seen in a real export before the CI condition existed: "1.091x [0.983, 1.169] slower"
    assert decide(1.091, 0.983, 1.169, 0.01, min_effect=0.03) == UNCLEAR
    assert decide(1.091, 1.02, 1.169, 0.01, min_effect=0.03) == SLOWER
    assert decide(0.90, 0.85, 0.95, 0.01, min_effect=0.03) == FASTER


def test_same_is_a_change_smaller_than_min_effect_and_unclear_a_bigger_one_the_data_cannot_confirm():
    assert decide(1.005, 0.95, 1.06, 0.4, min_effect=0.03) == SAME       # a noisy run against itself
    assert decide(0.98, 0.97, 0.99, 0.001, min_effect=0.03) == SAME      # significant, too small to act on
    assert decide(1.05, 0.96, 1.12, 0.2, min_effect=0.03) == UNCLEAR     # +5%, not significant
    assert decide(1.05, 0.96, 1.12, 0.2, min_effect=0.10) == SAME
    assert decide(1.02, 1.06, 1.08, 0.01, min_effect=0.03) == UNCLEAR    # a CI that misses the point estimate


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(1.0, 1000.0), min_size=5, max_size=40),
       st.lists(st.floats(1.0, 1000.0), min_size=5, max_size=40),
       st.sampled_from([0.0, 0.03, 0.1]))
def test_no_verdict_contradicts_its_confidence_interval(b, v, min_effect):
    c = compare_samples(b, v, min_effect=min_effect, n_boot=200)
    if c.verdict == FASTER:
        assert c.ci_high < 1.0 and c.p_value < 0.05 and c.ratio <= 1.0 - min_effect
    elif c.verdict == SLOWER:
        assert c.ci_low > 1.0 and c.p_value < 0.05 and c.ratio >= 1.0 + min_effect
    elif c.verdict == SAME:
        assert abs(c.ratio - 1.0) < min_effect
        assert c.ci_low <= 1.0 + min_effect and c.ci_high >= 1.0 - min_effect
