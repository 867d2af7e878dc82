"""A comparison of two stored runs as Markdown (stdout, pull requests), CSV (one row per common result) or JSON
(everything: both runs, the environment differences, every comparison, the geomeans). Written atomically."""
from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

from ..fsutil import atomic_write
from ..markdown import format_ratio, format_us, verdict_legend
from .runs import RunComparison, StoredRun, describe_runs

FORMATS = (".md", ".csv", ".json")
CSV_COLUMNS = ("target", "command", "column", "a_median_us", "b_median_us", "ratio", "ci_low", "ci_high", "p_value",
               "verdict", "n_a", "n_b", "reason", "a_rounds", "b_rounds", "a_disturbed", "b_disturbed",
               "a_host_load", "b_host_load", "a_steal", "b_steal", "a_noisy", "b_noisy")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(cmp: RunComparison) -> str:
    a, b = cmp.a.ref.label, cmp.b.ref.label
    lines = [f"## boo-tui compare: {b} against {a}", ""]
    lines += [f"- {line}" for line in describe_runs([cmp.a, cmp.b])]
    lines.append("")
    if cmp.differences:
        lines += ["**What differs between the runs** (check these before blaming the kernels):", "",
                  f"| | {_cell(a)} | {_cell(b)} |", "|---|---|---|"]
        lines += [f"| {d.what} | {_cell(d.a)} | {_cell(d.b)} |" for d in cmp.differences]
    else:
        lines.append("Same machine, compiler, flags and settings in both runs.")
    lines += ["", f"| command | column | target | {_cell(a)} (us) | {_cell(b)} (us) | {_cell(b)} / {_cell(a)} | "
              f"evidence: {_cell(a)} · {_cell(b)} |", "|---|---|---|---:|---:|---|---|"]
    for key, c in cmp.comparisons.items():
        target, command, label = key
        ev = cmp.evidence.get(key)
        seen = f"{ev[0].short()} · {ev[1].short()}" if ev else "-"
        if c.reason:
            seen += f" ({c.reason})"
        lines.append(f"| `{_cell(command)}` | {_cell(label)} | {target} | {format_us(c.baseline_median_us)} | "
                     f"{format_us(c.variant_median_us)} | {format_ratio(c)} | {_cell(seen)} |")
    lines.append("")
    geo = []
    for label, s in cmp.summaries.items():
        g = f"{s.geomean_ratio:.3f}x" if math.isfinite(s.geomean_ratio) else "-"
        geo.append(f"**{label}** {g} ({s.faster} faster, {s.slower} slower, {s.same} same, {s.unclear} unclear)")
    lines.append(f"Geomean ratio {b} / {a} per column (< 1: {b} faster): " + " · ".join(geo))
    lines.append("")
    extra = []
    if cmp.only_a or cmp.only_b:
        extra.append(f"{cmp.only_a} result(s) only in {a}, {cmp.only_b} only in {b} (not compared).")
    extra += [n[0].upper() + n[1:] + "." for n in cmp.notes]
    lines.append(" ".join([verdict_legend(cmp.min_effect).replace("variant / baseline", f"{b} / {a}")] + extra))
    return "\n".join(lines) + "\n"


def render_csv(cmp: RunComparison) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for key, c in cmp.comparisons.items():
        target, command, label = key
        ev = cmp.evidence.get(key)
        sides: list[str | int] = []
        for field in ("rounds", "disturbed", "host_load", "steal", "noisy"):
            sides += [_csv_value(getattr(e, field)) for e in ev] if ev else ["", ""]
        w.writerow([target, command, label, c.baseline_median_us, c.variant_median_us,
                    *("" if not math.isfinite(x) else f"{x:.6g}" for x in (c.ratio, c.ci_low, c.ci_high, c.p_value)),
                    c.verdict, c.n_baseline, c.n_variant, c.reason or "", *sides])
    return buf.getvalue()


def _csv_value(v: float | None) -> str | int:
    """An evidence field (a count, cores, a flag) as its CSV cell."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return int(v)
    return f"{v:.4g}" if isinstance(v, float) else v


def to_dict(cmp: RunComparison) -> dict[str, Any]:
    def run(r: StoredRun) -> dict[str, Any]:
        info = {k: v for k, v in r.info.items() if k != "environment"}
        return {"db": str(r.ref.path), "run_id": r.ref.run_id, "run": info, "environment": r.environment}

    return {
        "a": run(cmp.a), "b": run(cmp.b),
        "differences": [{"what": d.what, "a": d.a, "b": d.b} for d in cmp.differences],
        "min_effect": cmp.min_effect, "seed": cmp.seed, "only_a": cmp.only_a, "only_b": cmp.only_b,
        "notes": cmp.notes,
        "comparisons": [{"target": k[0], "command": k[1], "column": k[2], **c.to_dict(),
                         "evidence": {"a": ev[0].to_dict(), "b": ev[1].to_dict()} if (ev := cmp.evidence.get(k))
                         else None}
                        for k, c in cmp.comparisons.items()],
        "geomean": {label: s.to_dict() for label, s in cmp.summaries.items()},
    }


def render(cmp: RunComparison, suffix: str) -> str:
    if suffix == ".md":
        return render_markdown(cmp)
    if suffix == ".csv":
        return render_csv(cmp)
    return json.dumps(to_dict(cmp), indent=1, default=str, allow_nan=False) + "\n"


def write(cmp: RunComparison, path: str | Path) -> Path:
    p = Path(path)
    return atomic_write(p, render(cmp, p.suffix.lower()))
