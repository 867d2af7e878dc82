"""A whole run compared: every column against the baseline of the same (target, command) (`compare_results`), two
saved runs cell by cell (`compare_runs`), and what a table prints under the comparisons (`summarize`,
`regressions`). The statistics of one comparison are compare.py's.

Comparisons of a whole run are keyed by `comparison_key(result)` = (target, command, column label), where the
column label is the variant name for the IREE backend and "torch" for eager PyTorch, so the torch reference is
compared against the IREE baseline like any other variant.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, TypeVar, overload

from .compare import (
    BASELINE_LABEL,
    DEFAULT_MIN_EFFECT,
    FASTER,
    INSUFFICIENT,
    SAME,
    SLOWER,
    UNCLEAR,
    Comparison,
    Verdict,
    compare_measured,
    geomean,
    json_float,
    run_to_run_spread,
)
from .results import DONE, IREE, TORCH, JobResult, is_bad_input

K = TypeVar("K")


@dataclass(frozen=True)
class VariantSummary:
    """Everything one variant did across the commands: the line under a comparison table."""

    geomean_ratio: float
    n: int
    faster: int
    slower: int
    same: int
    unclear: int
    insufficient: int

    @property
    def geomean_speedup(self) -> float:
        return 1.0 / self.geomean_ratio if self.geomean_ratio else math.inf

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["geomean_speedup"] = self.geomean_speedup
        return {k: json_float(v) for k, v in d.items()}


def summarize(comparisons_by_variant: Mapping[str, Iterable[Comparison]]) -> dict[str, VariantSummary]:
    """Per variant: geometric-mean ratio over its commands and how many were faster / slower / same."""
    out: dict[str, VariantSummary] = {}
    for name, comps in comparisons_by_variant.items():
        comps = list(comps)
        counts = {k: sum(1 for c in comps if c.verdict == k) for k in Verdict}
        out[name] = VariantSummary(
            geomean_ratio=geomean(c.ratio for c in comps),
            n=len(comps),
            faster=counts[FASTER],
            slower=counts[SLOWER],
            same=counts[SAME],
            unclear=counts[UNCLEAR],
            insufficient=counts[INSUFFICIENT],
        )
    return out


@overload
def regressions(comparisons: Iterable[Comparison], pct: float) -> list[tuple[int, Comparison]]: ...
@overload
def regressions(comparisons: Mapping[K, Comparison], pct: float) -> list[tuple[K, Comparison]]: ...
def regressions(comparisons: Mapping[K, Comparison] | Iterable[Comparison], pct: float
                ) -> list[tuple[K, Comparison]] | list[tuple[int, Comparison]]:
    """The comparisons that are significantly slower (verdict SLOWER) by more than `pct` percent.

    Accepts a mapping (returns its (key, comparison) pairs) or a plain iterable (returns (index, comparison)).
    The threshold applies to the ratio's point estimate: ratio > 1 + pct/100. Used by --fail-on-regression.
    """
    limit = 1.0 + pct / 100.0
    if isinstance(comparisons, Mapping):
        return [(k, c) for k, c in comparisons.items() if c.verdict == SLOWER and c.ratio > limit]
    return [(i, c) for i, c in enumerate(comparisons) if c.verdict == SLOWER and c.ratio > limit]


# --- a whole run --------------------------------------------------------------------------------------------

def column_label(result: JobResult) -> str:
    """The column a result lands in when variants sit side by side: the variant name for IREE, "torch" for
    the eager PyTorch reference, "<variant>/<backend>" for anything else. A bad input line (no variant, no
    backend) sits in the baseline's column: it had a phantom "-/-" column group of its own."""
    if is_bad_input(result):
        return BASELINE_LABEL
    if result.backend == IREE:
        return result.variant
    if result.backend == TORCH and result.variant == BASELINE_LABEL:
        return TORCH
    return f"{result.variant}/{result.backend}"


def comparison_key(result: JobResult) -> tuple[str, str, str]:
    """(target, command, column label): what identifies one cell of a comparison table."""
    return (result.target, result.command, column_label(result))


def compare_results(
    results: Iterable[JobResult],
    *,
    baseline: str = BASELINE_LABEL,
    min_effect: float = DEFAULT_MIN_EFFECT,
    alpha: float = 0.05,
    n_boot: int = 2000,
    seed: int = 0,
) -> dict[tuple[str, str, str], Comparison]:
    """Compare every finished non-baseline column against the baseline column of the same (target, command).

    Only results with status done and samples take part; a command without a finished baseline gets no
    comparisons. Also used to compare two saved runs: load both, relabel one run's variants, concatenate.
    """
    # A variant whose tuning spec matched nothing compiled the baseline's kernel again: comparing it would present
    # noise as a tuning result, so it gets no ratio, no verdict and no place in a geomean.
    finished = [r for r in results if r.status == DONE and r.samples_us
                and not (column_label(r) != baseline and r.compile is not None and r.compile.spec_applied is False)]
    base: dict[tuple[str, str], JobResult] = {}
    for r in finished:
        target, command, label = comparison_key(r)
        if label == baseline:
            base[(target, command)] = r
    out: dict[tuple[str, str, str], Comparison] = {}
    for r in finished:
        key = comparison_key(r)
        b = base.get(key[:2])
        if key[2] == baseline or b is None:
            continue
        out[key] = compare_measured(b, r, paired=True, min_effect=min_effect, alpha=alpha)
    return out


def compare_runs(
    before: Iterable[JobResult],
    after: Iterable[JobResult],
    *,
    min_effect: float = DEFAULT_MIN_EFFECT,
    alpha: float = 0.05,
    n_boot: int = 2000,
    seed: int = 0,
    run_spread: float | None = None,
) -> dict[tuple[str, str, str], Comparison]:
    """Compare two saved runs cell by cell: each finished (target, command, column) of `after` against the same
    cell of `before` (ratio < 1: `after` is faster). Cells present in only one run are skipped. `run_spread`: how
    far two runs scatter apart by chance (None: estimated from these results, `run_to_run_spread`). This is the
    "did my change regress anything?" check: no re-run, and `regressions()` on the result gives the CI verdict.
    """
    pairs = matched(before, after)
    spread = run_to_run_spread(pairs.values()) if run_spread is None else run_spread
    return {key: compare_measured(b, r, paired=False, min_effect=min_effect, alpha=alpha, run_spread=spread)
            for key, (b, r) in pairs.items()}


def matched(before: Iterable[JobResult], after: Iterable[JobResult]
            ) -> dict[tuple[str, str, str], tuple[JobResult, JobResult]]:
    """The finished results of `after` with the same cell (`comparison_key`) finished in `before`, in `after`'s
    order: {key: (before's, after's)}."""
    old = {comparison_key(r): r for r in before if r.status == DONE and r.samples_us}
    pairs = {}
    for r in after:
        key = comparison_key(r)
        b = old.get(key)
        if b is not None and r.status == DONE and r.samples_us:
            pairs[key] = (b, r)
    return pairs


def by_variant(comparisons: Mapping[tuple[str, str, str], Comparison]) -> dict[str, list[Comparison]]:
    """Regroup `compare_results` output by column label, ready for `summarize`."""
    out: dict[str, list[Comparison]] = {}
    for (_, _, label), c in comparisons.items():
        out.setdefault(label, []).append(c)
    return out
