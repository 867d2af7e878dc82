"""The Markdown export: one row per command, variants (and the torch reference) side by side with their ratio to
the baseline, its 95% CI and a verdict mark, the geomean per variant and, for a file with weights, the model line
beside it; fit to paste into a pull request (and what the headless run prints). Also the one latency formatter
and verdict marks the dashboard uses, so the table and the export read alike."""
from __future__ import annotations

import datetime
import math
from collections.abc import Mapping, Sequence
from typing import Any

from .columns import columns_note, vs_torch_line
from .compare import BASELINE_LABEL, DEFAULT_MIN_EFFECT, FASTER, INSUFFICIENT, SAME, SLOWER, UNCLEAR, Comparison
from .comparisons import by_variant, column_label, compare_results, summarize
from .compile.flags import chosen_flags
from .environment import defaults_label, machine_label
from .results import DONE, FAILED, TORCH, JobResult
from .weights import ModelLine, has_weights, model_lines

Comparisons = Mapping[tuple[str, str, str], Comparison]

#: the mark of each verdict, in the Markdown export and the dashboard's "vs base" column alike
VERDICT_MARK = {FASTER: "✅", SLOWER: "❌", SAME: "≈", UNCLEAR: "❓", INSUFFICIENT: "❔"}


def verdict_words(verdict: str, *, reference: bool = False) -> tuple[str, str]:
    """(mark, words) of a verdict. A variant's row says how it does against the baseline: `✅ faster`. The eager
    torch reference's row (`reference`) says which side is faster, and its mark is the IREE kernel's side: torch
    faster is `❌ torch faster`, IREE faster `✅ iree faster` (a green check had marked torch beating IREE)."""
    if reference and verdict in (FASTER, SLOWER):
        return ("❌", "torch faster") if verdict == FASTER else ("✅", "iree faster")
    mark = next((m for v, m in VERDICT_MARK.items() if v == verdict), "")
    return mark, "too few samples" if verdict == INSUFFICIENT else str(verdict)


def verdict_legend(min_effect: float) -> str:
    """What a verdict means, with the run's --min-effect (the Markdown export's legend; the dashboard shows it too)."""
    pct = f"{min_effect * 100:g}%"
    return ("Ratios: variant / baseline (< 1 is faster): the geometric mean over the measuring rounds of the ratio "
            "of the rounds' medians, with a 95% t interval over the rounds (in one run a round of each column is "
            "measured side by side; across runs each run's own spread counts once more: one run is one draw). "
            f"faster / slower: p < 0.05, a change of at least {pct} and a CI excluding 1; same: a change within "
            f"±{pct}; unclear: a bigger change the data cannot confirm (measure longer or on a quieter machine), or "
            "a side whose timing cannot be trusted (its reason is given).")


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


def format_ratio(c: Comparison, *, reference: bool = False) -> str:
    """`0.912x [0.900, 0.925] ✅ faster`: the ratio, its CI and the verdict (`-` without a ratio); for the torch
    reference's column (`reference`) the verdict names the faster side (`verdict_words`)."""
    if not math.isfinite(c.ratio):
        return "-"
    s = f"{c.ratio:.3f}x"
    if math.isfinite(c.ci_low) and math.isfinite(c.ci_high):
        s += f" [{c.ci_low:.3f}, {c.ci_high:.3f}]"
    return " ".join(part for part in (s, *verdict_words(c.verdict, reference=reference)) if part)


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
    if r.numerics is not None and r.numerics.failed:
        cell += " (numerics **" + _md_escape(r.numerics.verdict) + "**)"
    return cell


def _header_lines(results: Sequence[JobResult], environment: dict[str, Any] | None,
                  run: Mapping[str, Any] | None) -> list[str]:
    env = environment or (run or {}).get("environment") or {}
    targets = sorted({r.target for r in results}) or [str((run or {}).get("target") or env.get("target") or "?")]
    when = _when((run or {}).get("started_at"))
    facts = [f"target {', '.join(_code(t) for t in targets)}"]
    devices = result_devices(results)
    if devices:
        facts.append(f"device{'s' if len(devices) > 1 else ''} {', '.join(_code(d) for d in devices)}")
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


def _when(started_at: str | float | None) -> str:
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
                    run: Mapping[str, Any] | None = None, comparisons: Comparisons | None = None,
                    min_effect: float = DEFAULT_MIN_EFFECT, model: Sequence[ModelLine] | None = None) -> str:
    """The Markdown document (also what the headless run prints). `comparisons` / `model` None: computed from
    the samples."""
    results = list(results)
    comparisons = comparisons if comparisons is not None else compare_results(results, min_effect=min_effect)
    if model is None:
        model = model_lines(results, comparisons, min_effect=min_effect)
    lines = _header_lines(results, environment, run)
    note = columns_note(results)
    if note:
        lines += [_md_escape(note), ""]
    labels, cells = _columns(results)
    multi_target = len({t for t, _ in cells}) > 1
    lines += _results_table(results, cells, labels, comparisons, multi_target) + _geomean_lines(comparisons, labels)
    vs_torch = vs_torch_line(results)
    if vs_torch:
        lines += ["", vs_torch]
    if model:
        lines += ["", "Model time in these kernels (sum of calls x median; ratio vs the baseline's sum over the same"
                  " kernels, 95% CI, verdict): " + " · ".join(_model_md(m, multi_target) for m in model)]
    lines += ["", " ".join(_notes(results, comparisons, min_effect)), ""]
    return "\n".join(lines)


def _columns(results: Sequence[JobResult]) -> tuple[list[str], dict[tuple[str, str], dict[str, JobResult]]]:
    """The column labels in first-seen order, the baseline's first, and each (target, command)'s results by label."""
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
    return labels, cells


def _results_table(results: Sequence[JobResult], cells: dict[tuple[str, str], dict[str, JobResult]],
                   labels: list[str], comparisons: Comparisons, multi_target: bool) -> list[str]:
    """The table's lines: one column alone, or the columns side by side; `_no results_` below it when empty."""
    weights = _weights_columns(cells) if has_weights(results) else {}
    devices = _devices_column(cells) if len(result_devices(results)) > 1 else {}
    if labels == [BASELINE_LABEL] or len(labels) == 1:
        lines = _single_column_table(cells, labels[0] if labels else BASELINE_LABEL, multi_target, weights, devices)
    else:
        lines = _side_by_side_table(cells, labels, comparisons, multi_target, weights, devices)
    if not cells:
        lines.append("_no results_")
    return lines


def _geomean_lines(comparisons: Comparisons, labels: list[str]) -> list[str]:
    """The line of each variant's geomean latency ratio to the baseline and verdict counts (none without any)."""
    summary = summarize(by_variant(comparisons)) if comparisons else {}
    if not summary:
        return []
    parts = []
    for label in labels:
        s = summary.get(label)
        if s is None:
            continue
        gm = f"{s.geomean_ratio:.3f}x" if math.isfinite(s.geomean_ratio) else "-"
        parts.append(f"**{_md_escape(label)}** {gm} ({s.faster} faster, {s.slower} slower, {s.same} same"
                     + (f", {s.unclear} unclear" if s.unclear else "")
                     + (f", {s.insufficient} too few samples" if s.insufficient else "") + ")")
    return ["", "Geomean latency ratio vs baseline (< 1 is faster): " + " · ".join(parts)]


def _notes(results: Sequence[JobResult], comparisons: Comparisons, min_effect: float) -> list[str]:
    """The notes below the table: units, roofline, verdicts' legend, noisy, unclear, disturbed and failed results."""
    n_failed = sum(1 for r in results if r.status == FAILED)
    n_noisy = sum(1 for r in results if r.noisy)
    notes = ["Times are median microseconds per call."]
    if any(r.pct_roofline is not None for r in results):
        notes.append("% roof = the roofline (the least time the kernel's FLOPs and bytes allow on this machine's "
                     "measured peaks, `boo-tui peak`) / median x 100"
                     + ("; ▲ = above it: the kernel beat a measured peak (why: the JSON export's "
                        "device_detail.roofline)." if any((r.pct_roofline or 0) > 100 for r in results) else "."))
    if comparisons:
        notes.append(verdict_legend(min_effect))
    if n_noisy:
        notes.append(f"⚠ = noisy measurement ({n_noisy}).")
    reasons = sorted({c.reason for c in (comparisons or {}).values() if c.reason})
    if reasons:
        notes.append("Unclear whatever the numbers say: " + "; ".join(_md_escape(r) for r in reasons) + ".")
    disturbed = [r for r in results if r.disturbed]
    if disturbed:
        notes.append(f"{len(disturbed)} result(s) had samples whose thread lost its core to another process "
                     "(counted at the thread's CPU time, the time the kernel ran).")
    if n_failed:
        notes.append(f"{n_failed} failed.")
    return notes


def describe_model_line(line: ModelLine, *, label: bool = True) -> str:
    """One line a person reads (the dashboard, the Markdown export): `tuned 9,876 us 0.800x [0.780, 0.820]
    faster (3 kernels, 12 calls, 70.1% of the captured compute: 12,345 of 17,610 us, this column 0.80x it;
    partial: 3 of 4 weighted commands)`. A file without captured times (`us=`) says its shares' sum only."""
    name = f"{line.label} " if label else ""
    if not line.commands:
        return f"{name}no kernel counted yet (0 of {line.weighted} weighted commands)"
    parts = [f"{name}{format_us(line.total_us)} us"]
    if line.verdict is not None:
        if math.isfinite(line.ratio):
            ci = (f" [{line.ci_low:.3f}, {line.ci_high:.3f}]"
                  if math.isfinite(line.ci_low) and math.isfinite(line.ci_high) else "")
            parts.append(f"{line.ratio:.3f}x{ci}")
        parts.append("too few samples" if line.verdict == INSUFFICIENT else str(line.verdict))
    notes = [f"{line.commands} kernels, {line.calls} calls, {_coverage(line)}"]
    if line.partial:
        notes.append(f"partial: {line.commands} of {line.weighted} weighted commands")
    if line.unweighted:
        notes.append(f"{line.unweighted} without weight not counted")
    return " ".join(parts) + " (" + "; ".join(notes) + ")"


def _coverage(line: ModelLine) -> str:
    """What part of the capture the line counts, and this column's time against the capture's."""
    if line.captured_us is None or line.vs_captured is None:
        return f"share {line.share:.1f}% (the file gives no captured times)"
    total = f" of {format_us(line.captured_total_us)}" if line.captured_total_us is not None else ""
    return (f"{line.share:.1f}% of the captured compute: {format_us(line.captured_us)}{total} us, "
            f"this column {line.vs_captured:.2f}x it")


def _model_md(line: ModelLine, multi_target: bool) -> str:
    """`**tuned** 9,876 us 0.800x [0.780, 0.820] faster (...; **partial**: 3 of 4 weighted commands)`."""
    text = _md_escape(describe_model_line(line, label=False)).replace("partial:", "**partial**:")
    return (f"{_code(line.target)} " if multi_target else "") + f"**{_md_escape(line.label)}** {text}"


def _row_head(target: str, command: str, multi_target: bool, devices: dict[tuple[str, str], str]) -> list[str]:
    return ([_code(target)] if multi_target else []) + [_code(command)] + (
        [devices[(target, command)]] if devices else [])


def result_devices(results: Sequence[JobResult]) -> list[str]:
    """The devices the results were measured on, in order ("cpu"; "cuda:0", "cuda:1" with --devices)."""
    return sorted({r.device for r in results if r.device})


def _devices_column(cells: dict[tuple[str, str], dict[str, JobResult]]) -> dict[tuple[str, str], str]:
    """Each row's device (a command's jobs run on one; several only when a re-run landed elsewhere)."""
    return {key: ", ".join(_code(d) for d in sorted({r.device for r in by_label.values() if r.device})) or "-"
            for key, by_label in cells.items()}


def _weights_columns(cells: dict[tuple[str, str], dict[str, JobResult]]) -> dict[tuple[str, str], list[str]]:
    """Each row's `calls` and `share` cells (the first result of the row that has them)."""
    out = {}
    for key, by_label in cells.items():
        r = next((x for x in by_label.values() if x.calls is not None), None)
        out[key] = [str(r.calls), f"{r.share:.2f}%" if r.share is not None else "-"] if r else ["-", "-"]
    return out


def _flags_column(cells: dict[tuple[str, str], dict[str, JobResult]], label: str) -> dict[tuple[str, str], str]:
    """The compile flags of each row's `label` job beyond the target's own (per-op defaults, the variant's own), or
    {} when no row has any: a column only where it says something."""
    out = {}
    for key, by_label in cells.items():
        r = by_label.get(label)
        flags = chosen_flags(r.compile.command) if r is not None and r.compile is not None else []
        out[key] = " ".join(_code(f) for f in flags) or "-"
    return out if any(v != "-" for v in out.values()) else {}


def roof_cell(r: JobResult | None) -> str:
    """A result's % of its roofline (`limits/`), one decimal, `▲` above 100% (it beat a measured peak: its
    `device_detail["roofline"]` says why); "-" without one."""
    if r is None or r.status != DONE or r.pct_roofline is None:
        return "-"
    return f"{r.pct_roofline:.1f}" + (" ▲" if r.pct_roofline > 100 else "")


def _has_roofline(cells: dict[tuple[str, str], dict[str, JobResult]]) -> bool:
    """A `% roof` column only when some result has a roofline (results of an older run have none)."""
    return any(r.pct_roofline is not None for by_label in cells.values() for r in by_label.values())


def _single_column_table(cells: dict[tuple[str, str], dict[str, JobResult]], label: str,
                         multi_target: bool, weights: dict[tuple[str, str], list[str]],
                         devices: dict[tuple[str, str], str]) -> list[str]:
    flags = _flags_column(cells, label)
    roof = _has_roofline(cells)
    head = (["target"] if multi_target else []) + ["command"] + (["device"] if devices else []) + (
        ["flags"] if flags else []) + (
        ["calls", "share"] if weights else []) + ["median (us)", "min (us)", "p10-p90 (us)", "GFLOP/s"] + (
        ["% roof"] if roof else []) + ["n"]
    n_right = (7 if weights else 5) + roof
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join(["---"] * (len(head) - n_right) + ["---:"] * n_right) + "|"]
    for (target, command), by_label in cells.items():
        r = by_label.get(label)
        row = _row_head(target, command, multi_target, devices) + ([flags[(target, command)]] if flags else []) + (
            weights.get((target, command), []))
        if r is not None and r.status == DONE and r.stats is not None:
            s = r.stats
            row += [_latency_cell(r), format_us(s.min_us), f"{format_us(s.p10_us)}-{format_us(s.p90_us)}",
                    f"{s.gflops:.1f}" if s.gflops is not None else "-"] + (
                [roof_cell(r)] if roof else []) + [str(s.n)]
        else:
            row += [_latency_cell(r)] + [""] * (4 + roof)
        lines.append("| " + " | ".join(row) + " |")
    return lines


def _side_by_side_table(cells: dict[tuple[str, str], dict[str, JobResult]], labels: list[str],
                        comparisons: Comparisons, multi_target: bool,
                        weights: dict[tuple[str, str], list[str]], devices: dict[tuple[str, str], str]) -> list[str]:
    flags = _flags_column(cells, BASELINE_LABEL)
    roof = _has_roofline(cells)
    head = (["target"] if multi_target else []) + ["command"] + (["device"] if devices else []) + (
        ["baseline flags"] if flags else [])
    align = ["---"] * len(head)
    if weights:
        head += ["calls", "share"]
        align += ["---:", "---:"]
    for label in labels:
        head.append(f"{_md_escape(label)} (us)")
        align.append("---:")
        if roof:
            head.append(f"{_md_escape(label)} % roof")
            align.append("---:")
        if label != BASELINE_LABEL:
            head.append(f"{_md_escape(label)} vs baseline")
            align.append("---")
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(align) + "|"]
    for (target, command), by_label in cells.items():
        row = _row_head(target, command, multi_target, devices) + ([flags[(target, command)]] if flags else []) + (
            weights.get((target, command), []))
        for label in labels:
            row += [_latency_cell(by_label.get(label))] + ([roof_cell(by_label.get(label))] if roof else [])
            if label != BASELINE_LABEL:
                c = comparisons.get((target, command, label))
                row.append(format_ratio(c, reference=label == TORCH) if c else "-")
        lines.append("| " + " | ".join(row) + " |")
    return lines
