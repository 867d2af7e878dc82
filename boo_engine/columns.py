"""What a run's IREE columns are, in words every export and the dashboard share: the baseline's build (BOO's
kernel, the run's comparison baseline, or our build in a run that asked for it), the `best` column's (the best
known configuration for this machine, and what chose it), and each kernel's time against eager torch.

A pure function of the results (their `CompileInfo.build` / `chosen_by`), so an export of a stored run says the
same as the live run did; a run stored before builds were recorded says nothing about them."""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from .compare import BASELINE_LABEL
from .comparisons import column_label
from .results import DONE, IREE, TORCH, JobResult

BEST_LABEL = "best"


def build_label(r: JobResult) -> str | None:
    """How the kernel of an IREE result was built, one line: "boo: iree-turbine 3.9.0", "ours", "boo: our export
    (why)", with "chosen by rules" (table, tune N) for the best column; None when not recorded."""
    c = r.compile
    if r.backend != IREE or c is None or c.build is None:
        return None
    return f"{c.build}, chosen by {c.chosen_by}" if c.chosen_by else c.build


def columns_note(results: Sequence[JobResult]) -> str | None:
    """One paragraph naming the baseline's build and the best column's sources, or None when no result says."""
    base = [r for r in results if r.backend == IREE and r.variant == BASELINE_LABEL and r.compile is not None
            and r.compile.build]
    best = [r for r in results if r.backend == IREE and r.variant == BEST_LABEL and r.compile is not None
            and r.compile.chosen_by]
    parts = []
    if base:
        builds = Counter(str(r.compile.build) for r in base if r.compile is not None)
        boo = sum(n for b, n in builds.items() if b.startswith("boo"))
        if boo:
            turbine = sorted({b.removeprefix("boo: ") for b in builds if b.startswith("boo: iree-turbine")})
            ours = sum(n for b, n in builds.items() if b.startswith("boo: our export"))
            text = ("the baseline is `boo`: each kernel as iree-turbine's BOO builds it (" + (", ".join(turbine)
                    or "iree-turbine") + "'s export of the op, BOO's compile flags)")
            if ours:
                text += (f"; of its {boo} kernels, {ours} {'is' if ours == 1 else 'are'} our export with BOO's "
                         "flags, BOO having none of its own")
            parts.append(text)
        if any(b.startswith("ours") for b in builds):
            parts.append("the baseline is our build (our export, this machine's per-op default flags)")
    if best:
        chosen = Counter(_source(str(r.compile.chosen_by)) for r in best if r.compile is not None)
        parts.append("`best` is each kernel in the best known configuration for this machine (chosen by "
                     + ", ".join(f"{k} {n}" for k, n in sorted(chosen.items())) + ")")
    if not parts:
        return None
    return "Columns: " + "; ".join(parts) + ". Ratios are against the baseline."


def _source(chosen_by: str) -> str:
    """"tune 12" -> "tune": the kinds of source, for counting."""
    return chosen_by.split()[0] if chosen_by else chosen_by


def torch_ratios(results: Sequence[JobResult]) -> dict[str, float]:
    """job id -> its median / the eager torch median of the same (target, command), for every done IREE result
    whose command has a done torch result."""
    torch_us = {(r.target, r.command): r.stats.median_us for r in results
                if r.backend == TORCH and r.status == DONE and r.stats is not None and r.stats.median_us > 0}
    out = {}
    for r in results:
        t = torch_us.get((r.target, r.command))
        if r.backend == IREE and r.status == DONE and r.stats is not None and t:
            out[r.job_id] = r.stats.median_us / t
    return out


def geomean_vs_torch(results: Sequence[JobResult]) -> dict[str, tuple[float, int]]:
    """column label -> (geomean of median / torch median, kernels counted) over the commands that have both."""
    ratios = torch_ratios(results)
    by: dict[str, list[float]] = {}
    for r in results:
        if r.job_id in ratios:
            by.setdefault(column_label(r), []).append(ratios[r.job_id])
    return {label: (math.exp(sum(math.log(x) for x in xs) / len(xs)), len(xs)) for label, xs in by.items() if xs}


def vs_torch_line(results: Sequence[JobResult]) -> str | None:
    """`Geomean vs eager torch (< 1 is faster): baseline 1.94x (15) · best 0.85x (15)`, or None without torch."""
    g = geomean_vs_torch(results)
    if not g:
        return None
    order = sorted(g, key=lambda k: (k != BASELINE_LABEL, k != BEST_LABEL, k))
    return "Geomean median vs eager torch's (< 1 is faster), over the commands with both: " + " · ".join(
        f"**{k}** {g[k][0]:.3f}x ({g[k][1]})" for k in order)
