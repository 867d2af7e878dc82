"""Export results as CSV, JSON or Markdown, and as iree-boo-driver's CSV.

Every writer is atomic (a temp file in the same directory, then os.replace): an export that fails, or a process
killed while writing, never leaves a half-written file where a previous good one may have been. Paths are
checked up front (`check_export_path`) so a long run cannot end in "unknown extension".

- CSV: one row per (command, variant, backend): the stats a spreadsheet needs, plus the comparison against the
  baseline of the same command.
- JSON: everything: environment, run, every result with its raw samples, compile and numerics details,
  reproducer, the comparisons and a per-variant summary.
- Markdown: one row per command, variants (and the torch reference) side by side with their ratio to the
  baseline, its 95% CI and a verdict mark; fit to paste into a pull request.
"""
from __future__ import annotations

import csv
import datetime
import io
import json
import math
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .compare import (
    BASELINE_LABEL,
    DEFAULT_MIN_EFFECT,
    FASTER,
    INSUFFICIENT,
    SAME,
    SLOWER,
    UNCLEAR,
    Comparison,
    by_variant,
    column_label,
    compare_results,
    comparison_key,
    summarize,
)
from .compile.flags import chosen_flags
from .environment import defaults_label, machine_label
from .errors import BooError
from .fsutil import atomic_write
from .results import DONE, FAILED, IREE, JobResult, NumericsInfo

FORMATS = (".csv", ".json", ".md")
NA = "N.A."

CSV_COLUMNS = [
    "command", "func_name", "op", "variant", "target", "backend", "status",
    "n", "min_us", "median_us", "mean_us", "max_us", "stddev_us", "p10_us", "p90_us", "iqr_us", "gflops", "gbps",
    "numerics", "noisy", "noise_reason", "host_load", "block_k", "warmup_calls",
    "compile_seconds", "cache_hit", "num_dispatches", "spec_applied", "compile_flags",
    "ratio_vs_baseline", "ci_low", "ci_high", "p_value", "verdict",
    "error", "source", "reproducer", "job_id",
]
_STAT_COLUMNS = ("n", "min_us", "median_us", "mean_us", "max_us", "stddev_us", "p10_us", "p90_us", "iqr_us",
                 "gflops", "gbps")
BOO_DRIVER_STATS = ("min", "max", "mean", "stddev", "num_dispatches")
#: BOO's --verify-numerics CSV columns (iree-turbine driver/driver.py), in its order, after every timing column
BOO_NUMERICS_COLUMNS = ("numerics_pass", "boo_vs_ref_mean", "boo_vs_ref_stddev", "boo_vs_ref_max",
                        "pytorch_vs_ref_mean", "pytorch_vs_ref_stddev", "pytorch_vs_ref_max",
                        "boo_vs_pytorch_mean", "boo_vs_pytorch_stddev", "boo_vs_pytorch_max", "structured_test")
#: ours, after BOO's: the worst relative error over every output, and why a check failed
OUR_NUMERICS_COLUMNS = ("numerics_max_rel_err", "numerics_reason")

Comparisons = Mapping[tuple[str, str, str], Comparison]


class ExportError(BooError):
    """An export cannot be written: unknown format, or a path that is not writable. One line, names the path."""


# --- paths and atomic writes ---------------------------------------------------------------------------------

def export_format(path: str | os.PathLike[str]) -> str:
    """The format an export path asks for (".csv", ".json" or ".md"); ExportError for anything else."""
    suffix = Path(path).suffix.lower()
    if suffix == ".markdown":
        suffix = ".md"
    if suffix not in FORMATS:
        raise ExportError(f"export {os.fspath(path)}: unknown format {suffix or '(no extension)'!r};"
                          f" use one of {', '.join(FORMATS)}")
    return suffix


def check_export_path(path: str | os.PathLike[str], *, formats: Sequence[str] = FORMATS) -> Path:
    """Validate an export path before any work: a known extension, an existing directory we can create files
    in, and not itself a directory. Returns the path. Raises ExportError with a one-line reason."""
    p = Path(path)
    if list(formats) == list(FORMATS):
        export_format(p)
    elif p.suffix.lower() not in formats:
        raise ExportError(f"export {p}: unknown format {p.suffix or '(no extension)'!r}; use {', '.join(formats)}")
    if p.is_dir():
        raise ExportError(f"export {p}: is a directory")
    parent = p.parent
    if not parent.is_dir():
        what = "is not a directory" if parent.exists() else "does not exist"
        raise ExportError(f"export {p}: directory {parent} {what}")
    try:   # the only reliable test (permissions, read-only mounts, ACLs): create a file there
        fd, probe = tempfile.mkstemp(dir=parent, prefix=f".{p.name}.", suffix=".probe")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise ExportError(f"export {p}: cannot write in {parent}: {e.strerror or e}") from None
    return p


def _write_atomic(path: Path, text: str) -> None:
    try:
        atomic_write(path, text, fsync=True)
    except OSError as e:
        raise ExportError(f"export {path}: {e.strerror or e}") from None


# --- entry points --------------------------------------------------------------------------------------------

def export_results(
    path: str | os.PathLike[str],
    results: Sequence[JobResult],
    *,
    environment: dict[str, Any] | None = None,
    run: dict[str, Any] | None = None,
    comparisons: Comparisons | None = None,
    min_effect: float = DEFAULT_MIN_EFFECT,
) -> None:
    """Write `results` to `path` in the format its extension names (.csv, .json, .md).

    `comparisons` maps `compare.comparison_key(result)` to its Comparison against the baseline; when None they
    are computed here from the samples (`compare.compare_results`). `min_effect`: the run's --min-effect (the
    Markdown legend states it).
    """
    p = check_export_path(path)
    fmt = export_format(p)
    results = list(results)
    if comparisons is None:
        comparisons = compare_results(results, min_effect=min_effect)
    if fmt == ".csv":
        text = render_csv(results, comparisons)
    elif fmt == ".json":
        text = render_json(results, environment=environment, run=run, comparisons=comparisons)
    else:
        text = render_markdown(results, environment=environment, run=run, comparisons=comparisons,
                               min_effect=min_effect)
    _write_atomic(p, text)


def write_boo_driver_csv(path: str | os.PathLike[str], rows: Sequence[tuple[str, Mapping[str, JobResult]]], *,
                         numerics: bool = False) -> None:
    """iree-boo-driver's `--csv` file. `rows`: one (arguments text, {backend: JobResult}) per command.

    Columns, as BOO's: `arguments`, then for each backend (in first-seen order) `<b> min`, `<b> max`, `<b> mean`,
    `<b> stddev`, `<b> num_dispatches` (times in us); with `numerics` (--verify-numerics) or when some result
    carries a check (a command's `-V 1`), BOO's 11 numerics columns (BOO_NUMERICS_COLUMNS, see `boo_csv_cells`)
    from the command's IREE kernel, then ours (OUR_NUMERICS_COLUMNS). Anything a result cannot provide (failed,
    missing) is `N.A.`.
    """
    p = check_export_path(path, formats=(".csv",))
    _write_atomic(p, render_boo_driver_csv(rows, numerics=numerics))


def boo_csv_cells(info: NumericsInfo | None, *, failed: bool = False) -> list[str]:
    """BOO's 11 --verify-numerics CSV cells for one command, from its IREE kernel's check: PASS/FAIL, then the
    main output's (output 0, as BOO judges only its main result) signed error mean, unbiased std and max |err|
    for kernel vs reference, eager torch vs reference, kernel vs eager torch (`%.6e`), then the structured test
    (PASS/FAIL, N.A. when skipped). No check: N.A. everywhere; `failed` (the kernel did not build or run): FAIL
    then N.A., as BOO writes an execution error."""
    if info is None:
        return ["FAIL" if failed else NA] + [NA] * (len(BOO_NUMERICS_COLUMNS) - 1)
    cells = ["PASS" if info.verdict == "pass" else "FAIL"]
    outputs = info.stats.get("outputs") or []
    main = outputs[0] if outputs else {}
    for keys in (("mean_err", "std_err", "max_abs_err"), ("torch_mean_err", "torch_std_err", "torch_max_abs_err"),
                 ("vs_torch_mean", "vs_torch_std", "vs_torch_max_abs")):
        cells += [NA if not isinstance(main.get(k), (int, float)) else f"{main[k]:.6e}" for k in keys]
    structured = info.stats.get("structured")
    cells.append(NA if not isinstance(structured, dict) else ("PASS" if structured.get("pass") else "FAIL"))
    return cells


# --- CSV -----------------------------------------------------------------------------------------------------

def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "" if math.isnan(v) else repr(v)
    return str(v)


def _csv_text(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


def _result_record(r: JobResult, comparisons: Comparisons) -> dict[str, Any]:
    d: dict[str, Any] = {
        "command": r.command, "func_name": r.func_name, "op": r.op, "variant": r.variant, "target": r.target,
        "backend": r.backend, "status": r.status, "numerics": r.numerics.verdict if r.numerics else None,
        "noisy": r.noisy, "noise_reason": r.noise_reason, "host_load": r.host_load, "block_k": r.block_k,
        "warmup_calls": r.warmup_calls, "error": r.error, "source": r.source, "reproducer": r.reproducer,
        "job_id": r.job_id,
    }
    for f in _STAT_COLUMNS:
        d[f] = getattr(r.stats, f) if r.stats else None
    c = r.compile
    d.update(compile_seconds=c.seconds if c else None, cache_hit=c.cache_hit if c else None,
             num_dispatches=c.num_dispatches if c else None, spec_applied=c.spec_applied if c else None,
             compile_flags=" ".join(chosen_flags(c.command)) if c else None)
    cmp = comparisons.get(comparison_key(r))
    d.update(ratio_vs_baseline=cmp.ratio if cmp else None, ci_low=cmp.ci_low if cmp else None,
             ci_high=cmp.ci_high if cmp else None, p_value=cmp.p_value if cmp else None,
             verdict=cmp.verdict if cmp else None)
    return d


def render_csv(results: Sequence[JobResult], comparisons: Comparisons) -> str:
    rows = []
    for r in results:
        rec = _result_record(r, comparisons)
        rows.append([_cell(rec[k]) for k in CSV_COLUMNS])
    return _csv_text(CSV_COLUMNS, rows)


# --- JSON ----------------------------------------------------------------------------------------------------

def _json_safe(v: Any) -> Any:
    """JSON has no NaN / inf: they become null, so every JSON parser reads the file."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {str(k): _json_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_safe(x) for x in v]
    return v


def render_json(results: Sequence[JobResult], *, environment: dict[str, Any] | None, run: dict[str, Any] | None,
                comparisons: Comparisons) -> str:
    out_results = []
    for r in results:
        d = r.to_dict()
        cmp = comparisons.get(comparison_key(r))
        d["column"] = column_label(r)
        d["comparison"] = cmp.to_dict() if cmp else None
        out_results.append(d)
    doc = {
        "format": "boo-tui-results",
        "format_version": 1,
        "exported_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "environment": environment,
        "run": run,
        "results": out_results,
        "comparisons": [
            {"target": t, "command": cmd, "variant": label, "baseline": BASELINE_LABEL, **c.to_dict()}
            for (t, cmd, label), c in comparisons.items()
        ],
        "summary": {label: s.to_dict() for label, s in summarize(by_variant(comparisons)).items()},
    }
    return json.dumps(_json_safe(doc), indent=1, allow_nan=False, default=str) + "\n"


# --- Markdown ------------------------------------------------------------------------------------------------

#: the mark of each verdict, in the Markdown export and the dashboard's "vs base" column alike
VERDICT_MARK = {FASTER: "✅", SLOWER: "❌", SAME: "≈", UNCLEAR: "❓", INSUFFICIENT: "❔"}
_MARK = {v: f"{VERDICT_MARK[v]} {'too few samples' if v == INSUFFICIENT else v}" for v in VERDICT_MARK}


def verdict_legend(min_effect: float) -> str:
    """What a verdict means, with the run's --min-effect (the Markdown export's legend; the dashboard shows it too)."""
    pct = f"{min_effect * 100:g}%"
    return ("Ratios: median(variant) / median(baseline) (< 1 is faster) with a 95% bootstrap CI. faster / slower: "
            f"Mann-Whitney p < 0.05, a change of at least {pct} and a CI excluding 1; same: a change within ±{pct}; "
            "unclear: a bigger change the data cannot confirm (measure longer or on a quieter machine).")


def _md_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    return "`" + text.replace("`", "'").replace("|", "\\|").replace("\n", " ") + "`"


def format_us(x: float | None) -> str:
    """A latency in microseconds as people read it: 12,345 / 123.4 / 1.23 (and "-" for none)."""
    if x is None or not math.isfinite(x):
        return "-"
    if x >= 1000:
        return f"{x:,.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def _fmt_ratio(c: Comparison) -> str:
    if not math.isfinite(c.ratio):
        return "-"
    s = f"{c.ratio:.3f}x"
    if math.isfinite(c.ci_low) and math.isfinite(c.ci_high):
        s += f" [{c.ci_low:.3f}, {c.ci_high:.3f}]"
    return f"{s} {_MARK.get(c.verdict, c.verdict)}"


def _short(text: str | None, limit: int = 80) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _latency_cell(r: JobResult | None) -> str:
    if r is None:
        return "-"
    if r.status == FAILED:
        return "**failed**: " + _md_escape(_short(r.error or "unknown error"))
    if r.status != DONE or r.stats is None:
        return _md_escape(r.status)
    cell = format_us(r.stats.median_us)
    if r.noisy:
        cell += " ⚠"
    if r.compile is not None and r.compile.spec_applied is False:
        cell += " (**spec not applied**: not a tuned result)"
    if r.numerics is not None and r.numerics.verdict != "pass":
        cell += " (numerics **" + _md_escape(r.numerics.verdict) + "**)"
    return cell


def _header_lines(results: Sequence[JobResult], environment: dict[str, Any] | None,
                  run: dict[str, Any] | None) -> list[str]:
    env = environment or (run or {}).get("environment") or {}
    targets = sorted({r.target for r in results}) or [str((run or {}).get("target") or env.get("target") or "?")]
    when = _when((run or {}).get("started_at"))
    facts = [f"target {', '.join(_code(t) for t in targets)}"]
    machine = machine_label(env)
    if machine:
        facts.append(f"host {_md_escape(machine)}")
    facts.append(_md_escape(str(when)))
    if env.get("iree_compile_version"):
        facts.append(_md_escape(_short_iree_version(str(env["iree_compile_version"]))))
    if env.get("torch_version"):
        facts.append(f"torch {_md_escape(str(env['torch_version']))}")
    if defaults_label(env):
        facts.append(_md_escape(str(defaults_label(env))))
    partial = ["**partial: run interrupted** (unfinished jobs are `interrupted`; `--resume` measures them)", ""]
    return ["## boo-tui results", "", " · ".join(facts), "", *(partial if (run or {}).get("status") == "interrupted"
                                                                 else [])]


def _when(started_at: Any) -> str:
    """The run's start (ISO text from the store, or Unix seconds) as "YYYY-MM-DD HH:MM UTC"; now if unknown."""
    t = None
    if isinstance(started_at, (int, float)):
        t = datetime.datetime.fromtimestamp(started_at, datetime.UTC)
    elif isinstance(started_at, str):
        try:
            t = datetime.datetime.fromisoformat(started_at)
        except ValueError:
            return started_at
        if t.tzinfo is not None:
            t = t.astimezone(datetime.UTC)
    t = t or datetime.datetime.now(datetime.UTC)
    return t.strftime("%Y-%m-%d %H:%M UTC")


def _short_iree_version(line: str) -> str:
    """"IREE compiler version 3.13.0rc20261016 @ 89ece87..." -> "IREE 3.13.0rc20261016" (the hash is in the JSON)."""
    words = line.split()
    if "version" in words and words.index("version") + 1 < len(words):
        return "IREE " + words[words.index("version") + 1]
    return line


def render_markdown(results: Sequence[JobResult], *, environment: dict[str, Any] | None = None,
                    run: dict[str, Any] | None = None, comparisons: Comparisons | None = None,
                    min_effect: float = DEFAULT_MIN_EFFECT) -> str:
    """The Markdown document (also what the headless run prints). `comparisons` None: computed from samples."""
    results = list(results)
    comparisons = comparisons if comparisons is not None else compare_results(results, min_effect=min_effect)
    lines = _header_lines(results, environment, run)
    labels: list[str] = []
    cells: dict[tuple[str, str], dict[str, JobResult]] = {}
    for r in results:
        label = column_label(r)
        if label not in labels:
            labels.append(label)
        cells.setdefault((r.target, r.command), {})[label] = r
    if BASELINE_LABEL in labels:
        labels.remove(BASELINE_LABEL)
        labels.insert(0, BASELINE_LABEL)
    multi_target = len({t for t, _ in cells}) > 1
    if labels == [BASELINE_LABEL] or len(labels) == 1:
        lines += _single_column_table(cells, labels[0] if labels else BASELINE_LABEL, multi_target)
    else:
        lines += _side_by_side_table(cells, labels, comparisons, multi_target)
    if not cells:
        lines.append("_no results_")
    summary = summarize(by_variant(comparisons)) if comparisons else {}
    if summary:
        parts = []
        for label in labels:
            s = summary.get(label)
            if s is None:
                continue
            gm = f"{s.geomean_ratio:.3f}x" if math.isfinite(s.geomean_ratio) else "-"
            parts.append(f"**{_md_escape(label)}** {gm} ({s.faster} faster, {s.slower} slower, {s.same} same"
                         + (f", {s.unclear} unclear" if s.unclear else "")
                         + (f", {s.insufficient} too few samples" if s.insufficient else "") + ")")
        lines += ["", "Geomean latency ratio vs baseline (< 1 is faster): " + " · ".join(parts)]
    n_failed = sum(1 for r in results if r.status == FAILED)
    n_noisy = sum(1 for r in results if r.noisy)
    notes = ["Times are median microseconds per call."]
    if comparisons:
        notes.append(verdict_legend(min_effect))
    if n_noisy:
        notes.append(f"⚠ = noisy measurement ({n_noisy}).")
    if n_failed:
        notes.append(f"{n_failed} failed.")
    lines += ["", " ".join(notes), ""]
    return "\n".join(lines)


def _row_head(target: str, command: str, multi_target: bool) -> list[str]:
    return ([_code(target)] if multi_target else []) + [_code(command)]


def _flags_column(cells: dict[tuple[str, str], dict[str, JobResult]], label: str) -> dict[tuple[str, str], str]:
    """The compile flags of each row's `label` job beyond the target's own (per-op defaults, the variant's own), or
    {} when no row has any: a column only where it says something."""
    out = {}
    for key, by_label in cells.items():
        r = by_label.get(label)
        flags = chosen_flags(r.compile.command) if r is not None and r.compile is not None else []
        out[key] = " ".join(_code(f) for f in flags) or "-"
    return out if any(v != "-" for v in out.values()) else {}


def _single_column_table(cells: dict[tuple[str, str], dict[str, JobResult]], label: str,
                         multi_target: bool) -> list[str]:
    flags = _flags_column(cells, label)
    head = (["target"] if multi_target else []) + ["command"] + (["flags"] if flags else []) + [
        "median (us)", "min (us)", "p10-p90 (us)", "GFLOP/s", "n"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] * (len(head) - 5) + ["---:"] * 5) + "|"]
    for (target, command), by_label in cells.items():
        r = by_label.get(label)
        row = _row_head(target, command, multi_target) + ([flags[(target, command)]] if flags else [])
        if r is not None and r.status == DONE and r.stats is not None:
            s = r.stats
            row += [_latency_cell(r), format_us(s.min_us), f"{format_us(s.p10_us)}-{format_us(s.p90_us)}",
                    f"{s.gflops:.1f}" if s.gflops is not None else "-", str(s.n)]
        else:
            row += [_latency_cell(r), "", "", "", ""]
        lines.append("| " + " | ".join(row) + " |")
    return lines


def _side_by_side_table(cells: dict[tuple[str, str], dict[str, JobResult]], labels: list[str],
                        comparisons: Comparisons, multi_target: bool) -> list[str]:
    flags = _flags_column(cells, BASELINE_LABEL)
    head = (["target"] if multi_target else []) + ["command"] + (["baseline flags"] if flags else [])
    align = ["---"] * len(head)
    for label in labels:
        head.append(f"{_md_escape(label)} (us)")
        align.append("---:")
        if label != BASELINE_LABEL:
            head.append(f"{_md_escape(label)} vs baseline")
            align.append("---")
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(align) + "|"]
    for (target, command), by_label in cells.items():
        row = _row_head(target, command, multi_target) + ([flags[(target, command)]] if flags else [])
        for label in labels:
            row.append(_latency_cell(by_label.get(label)))
            if label != BASELINE_LABEL:
                c = comparisons.get((target, command, label))
                row.append(_fmt_ratio(c) if c else "-")
        lines.append("| " + " | ".join(row) + " |")
    return lines


# --- iree-boo-driver CSV -------------------------------------------------------------------------------------

def render_boo_driver_csv(rows: Sequence[tuple[str, Mapping[str, JobResult]]], *, numerics: bool = False) -> str:
    backends: list[str] = []
    for _, by_backend in rows:
        for b, res in by_backend.items():
            if b not in backends:
                backends.append(b)
            numerics = numerics or res.numerics is not None
    header = ["arguments"]
    for b in backends:
        header += [f"{b} {k}" for k in BOO_DRIVER_STATS]
    if numerics:
        header += [*BOO_NUMERICS_COLUMNS, *OUR_NUMERICS_COLUMNS]
    out = []
    for arguments, by_backend in rows:
        line = [arguments]
        for b in backends:
            r = by_backend.get(b)
            s = r.stats if r is not None and r.status == DONE else None
            if r is not None and s is not None:
                nd = r.compile.num_dispatches if r.compile and r.compile.num_dispatches is not None else NA
                line += [_cell(s.min_us), _cell(s.max_us), _cell(s.mean_us), _cell(s.stddev_us), _cell(nd)]
            else:
                line += [NA] * len(BOO_DRIVER_STATS)
        if numerics:
            line += _numerics_cells(by_backend.values())
        out.append(line)
    return _csv_text(header, out)


def _numerics_cells(results: Iterable[JobResult]) -> list[str]:
    """A command's numerics cells: its IREE kernel's check (the only one checked); N.A. throughout without one,
    but FAIL first when the kernel failed before a check could run (BOO's execution-error row)."""
    results = list(results)   # (a line that did not parse has no IREE job: N.A. throughout)
    checked = next((r for r in results if r.numerics is not None), None)
    kernel = next((r for r in results if r.backend == IREE), None)
    failed = kernel is not None and kernel.status == FAILED
    cells = boo_csv_cells(checked.numerics if checked else None, failed=failed)
    if checked is None or checked.numerics is None:
        return cells + [NA] * len(OUR_NUMERICS_COLUMNS)
    stats = checked.numerics.stats
    rel = stats.get("max_rel_err")
    return cells + [NA if not isinstance(rel, (int, float)) else f"{rel:.6e}", str(stats.get("reason") or "")]
