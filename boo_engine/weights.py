"""The model line: what the kernels of a captured model cost the model, per variant, with a verdict.

A commands file captured from a model (`boo-tui capture`) gives each command its weight: `calls`, how often the
model called the kernel, `share`, its part of the capture's compute total (the profiled time of every compute call
of a pass; in files captured before it, of the model's eager time), and `us`, those calls' time in the capture
(`commands/files.py`). The model line of a column (a variant, the baseline, or "torch") is the model's time in
these kernels, sum(calls x median), and for a column other than the baseline its ratio against the baseline's sum
over the SAME commands, with:
- a 95% CI: a percentile bootstrap of the weighted sums, each command's median resampled from its own samples
  on both sides (the per-kernel comparison's bootstrap, summed with the weights), seeded;
- a p-value: the bootstrap's two-sided one (twice the smaller tail of the resampled ratios beyond 1.0);
- the verdict of `compare.decide`, the per-kernel rule: faster / slower need p < alpha, a change of at least
  --min-effect and a CI excluding 1. So a model line claims no more than its interval allows; `too few samples`
  on any kernel it counts makes it `insufficient`.
A command counts in a column's line only where the column has the engine's comparison for it (the kernel ran in
both the variant and the baseline, and a variant's spec applied): commands that failed, were interrupted or got no
ratio are left out and the line is `partial`, saying how many of the weighted commands it covers; commands
without a weight (a file with some weight lines missing or malformed) are counted apart (`unweighted`).

What the file covers: `share` is the sum of the counted commands' shares (the part of the capture's compute total
the line measures), `captured_us` their time in the capture, `captured_total_us` the capture's whole compute total
(sum(us) x 100 / sum(share) over the weighted commands: exact when the file holds every command, and still right
for a file cut to its top commands). The torch column's total_us against captured_us says whether the weights add
up: the same commands timed on their own against what they took in the model.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from .compare import BASELINE_LABEL, DEFAULT_MIN_EFFECT, INSUFFICIENT, MIN_SAMPLES, Comparison, Verdict, decide
from .comparisons import column_label
from .disturbance import round_medians
from .results import DONE, Backend, JobResult


@dataclass(frozen=True)
class ModelLine:
    """One column's time in the model's kernels (see the module docstring)."""

    target: str
    label: str                    # the column: "baseline", a variant's name, "torch"
    total_us: float               # sum of calls x median (us) over the commands counted
    baseline_us: float | None     # the baseline's sum over the same commands (None on the baseline's own line)
    ratio: float                  # total_us / baseline_us (< 1: the model spends less time in these kernels)
    ci_low: float                 # 95% bootstrap CI of the ratio (NaN when not computed)
    ci_high: float
    p_value: float
    verdict: Verdict | None       # compare.decide's rule; None on the baseline's own line and when none counts
    commands: int                 # weighted commands counted
    weighted: int                 # weighted commands of the target in all (counted or not)
    unweighted: int               # commands of the target without a weight (never counted)
    calls: int                    # sum of calls over the commands counted
    share: float                  # sum of share over the commands counted (percent of the capture's compute total)
    captured_us: float | None = None        # their time in the capture (None: some counted command gives none)
    captured_total_us: float | None = None  # the capture's compute total (None: some weighted command gives no us)

    @property
    def partial(self) -> bool:
        """Some weighted commands are not counted (failed, unfinished, no ratio in this column)."""
        return self.commands < self.weighted

    @property
    def vs_captured(self) -> float | None:
        """total_us / captured_us: this column's time in the kernels against the capture's (None without it)."""
        return self.total_us / self.captured_us if self.captured_us else None

    @property
    def speedup(self) -> float:
        return 1.0 / self.ratio if self.ratio else math.inf

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(partial=self.partial, speedup=self.speedup, vs_captured=self.vs_captured)
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}


def has_weights(results: Iterable[JobResult]) -> bool:
    """Whether any result carries a weight (its commands file had `# boo-tui:` lines)."""
    return any(r.calls is not None for r in results)


def model_lines(
    results: Iterable[JobResult],
    comparisons: Mapping[tuple[str, str, str], Comparison],
    *,
    baseline: str = BASELINE_LABEL,
    min_effect: float = DEFAULT_MIN_EFFECT,
    alpha: float = 0.05,
    n_boot: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> list[ModelLine]:
    """The model line of every (target, column) of `results`, the baseline's first; [] when no result has a
    weight. `comparisons`: the engine's (`comparisons.compare_results`, with the run's settings), which decide which
    commands a column counts."""
    everything = list(results)
    if not has_weights(everything):
        return []
    out: list[ModelLine] = []
    targets = list(dict.fromkeys(r.target for r in everything))
    for target in targets:
        mine = [r for r in everything if r.target == target]
        weights: dict[str, JobResult] = {}      # a bad line of the file keeps its weight: counted as missing
        cells: dict[tuple[str, str], JobResult] = {}
        for r in mine:
            if r.calls is not None:
                weights.setdefault(r.command, r)
        measured = [r for r in mine if r.backend in (Backend.IREE, Backend.TORCH)]   # not a file's bad lines
        for r in measured:
            cells[(r.command, column_label(r))] = r
        unweighted = {r.command for r in mine} - set(weights)
        labels = list(dict.fromkeys(column_label(r) for r in measured))
        labels.sort(key=lambda label: label != baseline)
        for label in labels:
            line = _line(target, label, baseline, weights, len(unweighted), cells, comparisons, min_effect=min_effect,
                         alpha=alpha, n_boot=n_boot, seed=seed, confidence=confidence)
            if line is not None:
                out.append(line)
    return out


def _median(r: JobResult | None) -> float | None:
    """A finished job's median, when it has a finite one (what a model line may count)."""
    m = r.median_us if r is not None and r.status == DONE else None
    return m if m is not None and math.isfinite(m) else None


def _line(target: str, label: str, baseline: str, weights: Mapping[str, JobResult], unweighted: int,
          cells: Mapping[tuple[str, str], JobResult], comparisons: Mapping[tuple[str, str, str], Comparison], *,
          min_effect: float, alpha: float, n_boot: int, seed: int, confidence: float) -> ModelLine | None:
    counted: list[tuple[int, JobResult, JobResult | None]] = []   # (calls, this column's result, the baseline's)
    share = 0.0
    for command, weighted in weights.items():
        calls = int(weighted.calls or 0)
        mine = cells.get((command, label))
        if label == baseline:
            if _median(mine) is None:
                continue
            base = None
        else:
            c = comparisons.get((target, command, label))
            base = cells.get((command, baseline))
            if c is None or not math.isfinite(c.ratio) or _median(mine) is None or _median(base) is None:
                continue
        assert mine is not None
        counted.append((calls, mine, base))
        share += weighted.share or 0.0
    total = sum(calls * (_median(r) or 0.0) for calls, r, _ in counted)
    captured = [weights[r.command].captured_us for _, r, _ in counted]
    common = dict(target=target, label=label, total_us=total, commands=len(counted), weighted=len(weights),
                  unweighted=unweighted, calls=sum(c for c, _, _ in counted), share=share,
                  captured_us=sum(u for u in captured if u is not None) if counted and None not in captured else None,
                  captured_total_us=captured_total(weights.values()))
    if label == baseline:
        return ModelLine(baseline_us=None, ratio=math.nan, ci_low=math.nan, ci_high=math.nan, p_value=math.nan,
                         verdict=None, **common)  # type: ignore[arg-type]
    base_total = sum(calls * (_median(b) or 0.0) for calls, _, b in counted)
    ratio = total / base_total if counted and base_total > 0 else math.nan
    if not counted:
        return ModelLine(baseline_us=None, ratio=math.nan, ci_low=math.nan, ci_high=math.nan, p_value=math.nan,
                         verdict=None, **common)  # type: ignore[arg-type]
    if any(len(r.samples_us) < MIN_SAMPLES or b is None or len(b.samples_us) < MIN_SAMPLES for _, r, b in counted):
        return ModelLine(baseline_us=base_total, ratio=ratio, ci_low=math.nan, ci_high=math.nan, p_value=math.nan,
                         verdict=INSUFFICIENT, **common)  # type: ignore[arg-type]
    low, high, p_value = _bootstrap(counted, ratio, n_boot=n_boot, seed=seed, confidence=confidence)
    verdict = decide(ratio, low, high, p_value, min_effect=min_effect, alpha=alpha)
    return ModelLine(baseline_us=base_total, ratio=ratio, ci_low=low, ci_high=high, p_value=p_value,
                     verdict=verdict, **common)  # type: ignore[arg-type]


def captured_total(weighted: Iterable[JobResult]) -> float | None:
    """The capture's compute total from its weighted commands: sum(us) x 100 / sum(share); None when one gives no
    us or the shares sum to nothing."""
    us = share = 0.0
    for r in weighted:
        if r.captured_us is None or r.share is None:
            return None
        us += r.captured_us
        share += r.share
    return us * 100.0 / share if share > 0 else None


def _bootstrap(counted: list[tuple[int, JobResult, JobResult | None]], ratio: float, *, n_boot: int, seed: int,
               confidence: float) -> tuple[float, float, float]:
    """CI and two-sided p-value of `ratio`, sum(calls x median(variant)) / sum(calls x median(baseline)),
    resampling every kernel's measuring ROUNDS (their medians, of the time the kernel ran), the rounds of both sides
    together where they were measured side by side: samples of one round are not independent draws of another
    (compare.py). The resampled statistic is the median of the round medians, which is not the median of all the
    samples `ratio` takes: the resampled ratios are scaled so that their median is `ratio` before the CI and the
    p-value are read off them, so the CI always holds the ratio it is printed beside (unscaled, a few runs with
    an uneven round printed a ratio just outside its own CI)."""
    rng = np.random.default_rng(seed)
    sum_v = np.zeros(n_boot)
    sum_b = np.zeros(n_boot)
    for calls, r, b in counted:
        assert b is not None
        mb = np.asarray(round_medians(b.timed_us, b.rounds), dtype=np.float64)
        mv = np.asarray(round_medians(r.timed_us, r.rounds), dtype=np.float64)
        ib = rng.integers(0, mb.size, size=(n_boot, mb.size))
        iv = ib if mv.size == mb.size else rng.integers(0, mv.size, size=(n_boot, mv.size))
        sum_b += calls * np.median(mb[ib], axis=1)
        sum_v += calls * np.median(mv[iv], axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = sum_v / sum_b
    ratios = ratios[np.isfinite(ratios)]
    if ratios.size == 0:
        return math.nan, math.nan, math.nan
    center = float(np.median(ratios))
    if center > 0 and math.isfinite(ratio) and ratio > 0:
        ratios = ratios * (ratio / center)
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(ratios, [tail, 100.0 - tail])
    p_value = min(1.0, 2.0 * min(float(np.mean(ratios >= 1.0)), float(np.mean(ratios <= 1.0))))
    return float(low), float(high), p_value
