"""Is a variant really faster than the baseline? A ratio with a confidence interval taken over ROUNDS, and a verdict.

Why rounds, not samples: one round of a job is one placement of its inputs in memory and one moment of the
machine, and both move a kernel's time more than its samples scatter within the round (a 3x3 backward conv ran
10.5-14 ms in most placements and 22 ms in one; the same kernel moved 1.3x between runs seconds apart on a shared
VM: docs/performance.md, "Verdicts that hold"). Samples of one round are not independent draws of what the next
round, or the next run, would measure, so a test on samples called A/A comparisons "significant" half the time.
Each job is measured in several rounds (a fresh placement of the inputs each on the CPU: bench/placement.py); a
round's figure is the median of its samples, counted at the time the kernel ran (boo_engine/disturbance.py).

- In one run (`compare_results`: variants and the torch column against the baseline), baseline and variant were
  measured in the same interleaved rounds (A B A B ...): the rounds are PAIRED, and the per-round log ratio
  cancels what the machine did during that round. Ratio = exp(mean of the per-round log ratios), its CI a t
  interval over the rounds, the p-value the paired t-test's, with PAIRED_SPREAD_FLOOR added to the spread for
  where each kernel's code was loaded (no round moves it).
- Across runs (`compare_runs`), nothing pairs the rounds, and a whole run may sit higher or lower than the next
  by as much as its rounds scatter (one run is one draw): Welch's t over the two runs' round medians, with the
  larger of the two runs' round variances added once more for the run itself.
- faster / slower: significant (p < alpha) AND an effect big enough to matter (|ratio - 1| >= min_effect) AND a
  confidence interval that excludes 1.0, so a verdict never contradicts the interval printed beside it.
- same: the point estimate lies within min_effect of 1 (and the CI reaches that band).
- unclear: a change of at least min_effect that the data cannot confirm, or sides whose timing cannot be trusted
  (`Comparison.reason` says which: a GPU that throttled, a multi-threaded kernel beside other processes' load).
- insufficient: fewer than MIN_SAMPLES samples, or fewer than two rounds, on a side.

`compare_samples` is the plain two-sample version (bootstrap CI of the median ratio, Mann-Whitney U), for sets
of samples with no rounds.

A whole run's comparisons (every column against the baseline, two runs cell by cell) and their summaries are in
comparisons.py.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from enum import StrEnum
from typing import Any, TypeVar

import numpy as np

from .results import JobResult


class Verdict(StrEnum):
    """What a comparison concludes (values as stored in the exports)."""

    FASTER = "faster"
    SLOWER = "slower"
    SAME = "same"
    UNCLEAR = "unclear"
    INSUFFICIENT = "insufficient"


FASTER, SLOWER, SAME = Verdict.FASTER, Verdict.SLOWER, Verdict.SAME
UNCLEAR, INSUFFICIENT = Verdict.UNCLEAR, Verdict.INSUFFICIENT
#: --min-effect's default: the smallest change of the median ratio called faster or slower
DEFAULT_MIN_EFFECT = 0.03
#: fewer samples than this on either side: no verdict (Mann-Whitney U cannot reach p < 0.05 with 3 vs 3)
MIN_SAMPLES = 5
BASELINE_LABEL = "baseline"

K = TypeVar("K")
T = TypeVar("T")


@dataclass(frozen=True)
class Comparison:
    """One variant against the baseline on one command."""

    ratio: float            # variant / baseline (over rounds: see the module docstring); < 1: the variant is faster
    ci_low: float           # bootstrap confidence interval of the ratio (95% by default)
    ci_high: float
    p_value: float          # two-sided Mann-Whitney U; NaN when not computed
    verdict: Verdict
    n_baseline: int
    n_variant: int
    baseline_median_us: float
    variant_median_us: float
    rounds: tuple[int, int] = (0, 0)   # rounds each side's confidence was taken over (0: samples, not rounds)
    reason: str | None = None          # why the verdict is unclear although the numbers alone might not say so

    @property
    def speedup(self) -> float:
        """How many times faster the variant is (> 1 is faster): 1 / ratio."""
        return 1.0 / self.ratio if self.ratio else math.inf

    @property
    def significant(self) -> bool:
        return self.verdict in (FASTER, SLOWER)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["speedup"] = self.speedup
        d["rounds"] = list(self.rounds)
        return {k: json_float(v) for k, v in d.items()}


def json_float(v: T) -> T | None:
    """NaN and inf are not JSON: exported as null."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def compare_samples(
    baseline_us: Sequence[float],
    variant_us: Sequence[float],
    *,
    min_effect: float = DEFAULT_MIN_EFFECT,
    alpha: float = 0.05,
    n_boot: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> Comparison:
    """Compare two sets of latency samples (see the module docstring for the decision rule).

    The CI is a percentile bootstrap of the median ratio, resampling both sides independently, vectorized and
    seeded so the same samples always give the same interval.
    """
    b = np.asarray(baseline_us, dtype=np.float64)
    v = np.asarray(variant_us, dtype=np.float64)
    nb, nv = int(b.size), int(v.size)
    mb = float(np.median(b)) if nb else math.nan
    mv = float(np.median(v)) if nv else math.nan
    ratio = _ratio(mv, mb)
    if nb < MIN_SAMPLES or nv < MIN_SAMPLES:
        return Comparison(ratio, math.nan, math.nan, math.nan, INSUFFICIENT, nb, nv, mb, mv)

    from scipy.stats import mannwhitneyu  # scipy is slow to import; only pay for it when comparing

    p_value = float(mannwhitneyu(v, b, alternative="two-sided").pvalue)
    if not math.isfinite(p_value):   # all samples identical on both sides
        p_value = 1.0
    ci_low, ci_high = _bootstrap_ratio_ci(b, v, n_boot=n_boot, seed=seed, confidence=confidence)
    verdict = decide(ratio, ci_low, ci_high, p_value, min_effect=min_effect, alpha=alpha)
    return Comparison(ratio, ci_low, ci_high, p_value, verdict, nb, nv, mb, mv)


def compare_rounds(
    baseline: Sequence[float],
    variant: Sequence[float],
    *,
    n_baseline: int,
    n_variant: int,
    baseline_median_us: float,
    variant_median_us: float,
    paired: bool,
    min_effect: float = DEFAULT_MIN_EFFECT,
    alpha: float = 0.05,
    confidence: float = 0.95,
    run_spread: float = 0.0,
) -> Comparison:
    """Compare two sides by their round medians (`baseline`, `variant`, microseconds; see the module docstring).
    `paired`: round i of one side was measured beside round i of the other (one run, interleaved); else the
    sides are two runs, and a run's own spread counts once more for the run itself: the larger of the two runs'
    round variances, or `run_spread` (a log-ratio standard deviation: `run_to_run_spread`) when that is larger.
    `n_*` are the sides' sample counts and `*_median_us` their medians over all samples (shown beside the ratio)."""
    from scipy.stats import t as student_t  # scipy is slow to import; only pay for it when comparing

    lb = np.log(np.asarray(baseline, dtype=np.float64))
    lv = np.log(np.asarray(variant, dtype=np.float64))
    rounds = (int(lb.size), int(lv.size))
    if n_baseline < MIN_SAMPLES or n_variant < MIN_SAMPLES or lb.size < 2 or lv.size < 2 \
            or not (np.all(np.isfinite(lb)) and np.all(np.isfinite(lv))):
        return Comparison(_ratio(variant_median_us, baseline_median_us), math.nan, math.nan, math.nan,
                          INSUFFICIENT, n_baseline, n_variant, baseline_median_us, variant_median_us, rounds)
    if paired and lb.size == lv.size:
        d = lv - lb
        mean = float(d.mean())
        se = math.sqrt(float(d.var(ddof=1)) / d.size + PAIRED_SPREAD_FLOOR ** 2)
        df = float(d.size - 1)
    else:
        vb, vv = float(lb.var(ddof=1)), float(lv.var(ddof=1))
        mean = float(lv.mean() - lb.mean())
        within = vb / lb.size + vv / lv.size
        se = math.sqrt(within + max(vb, vv, run_spread * run_spread))
        df = _welch_df(vb, lb.size, vv, lv.size)
    ratio = math.exp(mean)
    if se <= 0.0:   # every round agrees exactly: the interval is the point
        p_value = 1.0 if mean == 0.0 else 0.0
        ci_low = ci_high = ratio
    else:
        tq = float(student_t.ppf(1.0 - (1.0 - confidence) / 2.0, df))
        ci_low, ci_high = math.exp(mean - tq * se), math.exp(mean + tq * se)
        p_value = float(2.0 * student_t.sf(abs(mean) / se, df))
    verdict = decide(ratio, ci_low, ci_high, p_value, min_effect=min_effect, alpha=alpha)
    return Comparison(ratio, ci_low, ci_high, p_value, verdict, n_baseline, n_variant, baseline_median_us,
                      variant_median_us, rounds)


def _welch_df(vb: float, nb: int, vv: float, nv: int) -> float:
    """Welch-Satterthwaite degrees of freedom (the smaller side's n - 1 when both variances are zero)."""
    a, b = vb / nb, vv / nv
    den = (a * a / (nb - 1) if nb > 1 else 0.0) + (b * b / (nv - 1) if nv > 1 else 0.0)
    if den <= 0.0:
        return float(max(1, min(nb, nv) - 1))
    return max(1.0, (a + b) ** 2 / den)


def compare_measured(base: JobResult, other: JobResult, *, paired: bool, min_effect: float = DEFAULT_MIN_EFFECT,
                     alpha: float = 0.05, run_spread: float = 0.0) -> Comparison:
    """Two measured results compared over their rounds (`compare_rounds`), each counted at the time its kernel
    ran (`JobResult.timed_us`); unclear, with the reason, when a side's timing cannot be trusted."""
    from .disturbance import round_medians

    tb, to = base.timed_us, other.timed_us
    c = compare_rounds(round_medians(tb, base.rounds), round_medians(to, other.rounds),
                       n_baseline=len(tb), n_variant=len(to),
                       baseline_median_us=float(np.median(tb)) if tb else math.nan,
                       variant_median_us=float(np.median(to)) if to else math.nan,
                       paired=paired, min_effect=min_effect, alpha=alpha, run_spread=run_spread)
    from .evidence import untrusted

    why = untrusted(base, other)
    if why and c.verdict in (FASTER, SLOWER):
        return replace(c, verdict=UNCLEAR, reason=why)
    return replace(c, reason=why) if why else c


#: the least spread (a log-ratio standard deviation) two kernels measured side by side in one run are given: each
#: kernel's code is loaded once per worker, at its own place, and no round moves it. Measured on a quiet 2-core
#: Xeon VM, byte-identical kernels (an A/A variant) in one interleaved run: per-round ratios that agreed with each
#: other 2.5-3.5% away from 1 on a strided conv, once called "faster" (0.966x, p = 0.0500) beside a burner; over
#: 150 such comparisons the log ratios' sd was 1.1% (the largest 4.6%). With 5 rounds a paired effect needs
#: about 3.5% to be called, more rounds a little less (t's quantile); never less than --min-effect.
PAIRED_SPREAD_FLOOR = 0.0125
#: fewer common results than this: no run-to-run spread is estimated from them (the floor stands alone)
RUN_SPREAD_MIN_RESULTS = 5
#: the least run-to-run spread (a log-ratio standard deviation) any two runs are given: a whole run shifts by
#: chance, and so does one kernel in it with every round tight, which neither the rounds nor the spread around
#: the median of five kernels reliably see. Measured on a quiet 2-core Intel Xeon (AVX-512) VM, five kernels in
#: 40 pairs of runs seconds apart (20 quiet, 20 with a burner beside one run): the 200 log ratios B/A had sd 3.4%
#: (robust 2.2%), 95% of them within 7%, and single kernels moved 9% with rounds within 1% (a 1x1 conv 299 ->
#: 327 us). With a floor of 2% one of the 200 was called (that conv "slower", p = 0.02), with 3.5% none; a
#: uniform 10% regression is then still called on 56% of kernels, and never the wrong way
#: (docs/performance.md, "Verdicts that hold"). A smaller effect is for one interleaved run (`--variant`).
RUN_SPREAD_FLOOR = 0.035


def run_to_run_spread(pairs: Iterable[tuple[JobResult, JobResult]]) -> float:
    """How far two runs of the same kernels scatter apart on this machine, from the runs themselves: the robust
    standard deviation (1.4826 x MAD, around their median) of the log ratios of the common results' round medians,
    and never less than RUN_SPREAD_FLOOR.

    Measured on a shared 2-core VM, each kernel's time moves between runs seconds apart by up to 1.3x, on its own:
    the kernels do not move together (their round-to-round correlation was ~0), so a run's other kernels tell
    how far one kernel may move by chance. Around the MEDIAN: a change that moves most kernels alike (a compiler
    regression) shifts the median, not the spread, and stays visible above the floor. The floor alone with fewer
    than RUN_SPREAD_MIN_RESULTS common results."""
    from .disturbance import round_medians

    logs = []
    for a, b in pairs:
        ma, mb = round_medians(a.timed_us, a.rounds), round_medians(b.timed_us, b.rounds)
        if ma and mb and min(ma) > 0 and min(mb) > 0:
            logs.append(float(np.mean(np.log(mb)) - np.mean(np.log(ma))))
    if len(logs) < RUN_SPREAD_MIN_RESULTS:
        return RUN_SPREAD_FLOOR
    x = np.asarray(logs)
    return max(RUN_SPREAD_FLOOR, float(1.4826 * np.median(np.abs(x - np.median(x)))))


def next_run_interval(ratio: float, ci_low: float, ci_high: float) -> tuple[float, float]:
    """Where the same comparison measured again in a NEW session (another process, other placements) should land,
    95%: this session's interval counted twice (the new session has its own) plus RUN_SPREAD_FLOOR for what a
    session does to one kernel and not the other. A tune prints this beside the interval of its own measurement:
    on a quiet Xeon VM three tunes' verified 0.577-0.587x read 0.585-0.597x in fresh sessions, each 1.4-1.7% above
    and once outside the tune's own interval (0.581-0.590). NaN without an interval."""
    if not (ratio > 0 and ci_low > 0 and ci_high > 0):
        return math.nan, math.nan
    half = math.log(ci_high / ci_low) / 2.0
    pred = math.sqrt(2.0 * half * half + (1.96 * RUN_SPREAD_FLOOR) ** 2)
    return ratio * math.exp(-pred), ratio * math.exp(pred)


def decide(ratio: float, ci_low: float, ci_high: float, p_value: float, *, min_effect: float = DEFAULT_MIN_EFFECT,
           alpha: float = 0.05) -> Verdict:
    """The verdict rule of the module docstring. It never contradicts its interval: faster / slower need a CI that
    excludes 1.0 (on the side of the effect), same a CI that reaches the +-min_effect band."""
    if not all(math.isfinite(x) for x in (ratio, ci_low, ci_high, p_value)):
        return UNCLEAR
    if abs(ratio - 1.0) < min_effect:
        reaches_band = ci_low <= 1.0 + min_effect and ci_high >= 1.0 - min_effect
        return SAME if reaches_band else UNCLEAR
    if p_value < alpha and (ci_high < 1.0 if ratio < 1.0 else ci_low > 1.0):
        return FASTER if ratio < 1.0 else SLOWER
    return UNCLEAR


def _ratio(num: float, den: float) -> float:
    if not (math.isfinite(num) and math.isfinite(den)) or den <= 0:
        return math.nan
    return num / den


def _bootstrap_ratio_ci(
    b: np.ndarray, v: np.ndarray, *, n_boot: int, seed: int, confidence: float
) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    med_b = bootstrap_medians(b, n_boot, rng)
    med_v = bootstrap_medians(v, n_boot, rng)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = med_v / med_b
    ratios = ratios[np.isfinite(ratios)]
    if ratios.size == 0:
        return math.nan, math.nan
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(ratios, [tail, 100.0 - tail])
    return float(low), float(high)


def bootstrap_medians(x: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """Medians of n_boot resamples (with replacement) of x.

    Resampling indices into the SORTED sample makes the median of a resample the value at the median of its
    indices, so only small integers are partitioned and never gathered: ~5x faster than np.median over
    gathered values (1000 samples x 2000 resamples in ~20 ms), and exactly the same numbers.
    """
    s = np.sort(x)
    n = s.size
    idx = rng.integers(0, n, size=(n_boot, n), dtype=np.int32 if n < 2**31 else np.int64)
    hi = n // 2
    if n % 2:
        return s[np.partition(idx, hi, axis=1)[:, hi]]
    part = np.partition(idx, [hi - 1, hi], axis=1)
    return (s[part[:, hi - 1]] + s[part[:, hi]]) / 2.0


def geomean(ratios: Iterable[float]) -> float:
    """Geometric mean: the right average of ratios (a 2x win and a 2x loss cancel out).

    NaN entries (comparisons without a ratio) are skipped; NaN when nothing is left. Raises ValueError on a
    non-positive or infinite ratio, which would make the mean meaningless.
    """
    logs = []
    for r in ratios:
        r = float(r)
        if math.isnan(r):
            continue
        if r <= 0 or math.isinf(r):
            raise ValueError(f"geomean: ratio {r} is not a positive finite number")
        logs.append(math.log(r))
    if not logs:
        return math.nan
    return math.exp(sum(logs) / len(logs))
