"""Export results as CSV, JSON or Markdown, and as iree-boo-driver's CSV.

Every writer is atomic (a temp file in the same directory, then os.replace): an export that fails, or a process
killed while writing, never leaves a half-written file where a previous good one may have been. Paths are
checked up front (`check_export_path`) so a long run cannot end in "unknown extension".

- CSV: one row per (command, variant, backend): the stats a spreadsheet needs, plus the comparison against the
  baseline of the same command.
- JSON: everything: environment, run, every result with its raw samples, compile and numerics details,
  reproducer, the comparisons and a per-variant summary.
- Markdown (`markdown.py`): one row per command, variants (and the torch reference) side by side with their
  ratio to the baseline, its 95% CI and a verdict mark; fit to paste into a pull request.

Results whose commands file gave weights (`# boo-tui: calls=N share=P% us=T`) carry `calls` and `share` in every
format (`captured_us` too in the CSV and JSON), and every format adds the model line of each column
(`weights.model_lines`: sum of calls x median, its ratio to the baseline with a CI and a verdict, partial when some
weighted command is not counted, and what part of the capture it counts): CSV rows with status `model`, a `model`
list in the JSON, a line beside the geomean in the Markdown. Rows stay in the file's order.
"""
from __future__ import annotations

import csv
import io
import itertools
import math
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from .columns import build_label, torch_ratios
from .compare import (
    DEFAULT_MIN_EFFECT,
    Comparison,
    compare_results,
    comparison_key,
)
from .compile.flags import chosen_flags
from .errors import BooError
from .fsutil import atomic_write
from .jsondoc import write_json
from .markdown import render_markdown
from .results import DONE, FAILED, IREE, TORCH, JobResult, NumericsInfo
from .weights import ModelLine, model_lines

FORMATS = (".csv", ".json", ".md")
NA = "N.A."

CSV_COLUMNS = [
    "command", "func_name", "op", "variant", "target", "device", "node", "backend", "status",
    "n", "min_us", "median_us", "mean_us", "max_us", "stddev_us", "p10_us", "p90_us", "iqr_us", "gflops", "gbps",
    "roofline_us", "pct_roofline",
    "numerics", "noisy", "noise_reason", "host_load", "steal", "disturbed", "rounds", "block_k", "warmup_calls",
    "compile_seconds", "cache_hit", "num_dispatches", "spec_applied", "compile_flags", "build", "chosen_by",
    "ratio_vs_baseline", "ci_low", "ci_high", "p_value", "verdict", "verdict_reason",
    "calls", "share", "captured_us", "weighted_us", "ratio_vs_torch",
    "error", "source", "reproducer", "job_id",
]
#: the `command` and `status` of a CSV row holding a model line (`weights.ModelLine`): its `median_us` is the
#: column's sum of calls x median, `n` the kernels counted, `calls` / `share` / `captured_us` their sums, `error`
#: says "partial"
MODEL_COMMAND = "model: sum of calls x median"
MODEL_STATUS = "model"
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


#: the files SQLite keeps beside a database: an export onto any of them loses the database too
DB_COMPANIONS = ("", "-wal", "-shm", "-journal")


def _same_file(a: Path, b: Path) -> bool:
    """The same file: the same resolved path (whether or not it exists yet), or the same inode (a hard link)."""
    try:
        if os.path.realpath(a) == os.path.realpath(b):
            return True
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def check_export_path(path: str | os.PathLike[str], *, formats: Sequence[str] = FORMATS,
                      databases: Iterable[str | os.PathLike[str] | None] = (),
                      inputs: Iterable[str | os.PathLike[str]] = (),
                      others: Iterable[str | os.PathLike[str]] = ()) -> Path:
    """Validate an export path before any work: a known extension, an existing directory we can create files
    in, and not itself a directory; never a file the run reads or keeps: a results database (`databases`, with its
    -wal, -shm and -journal files), an input (`inputs`: commands files, variants files), another export
    (`others`). `boo-tui CMD --db same.csv --export same.csv` used to replace the database with 3 lines of CSV.
    Returns the path. Raises ExportError with a one-line reason."""
    p = Path(path)
    for db in databases:
        if db is None:
            continue
        for suffix in DB_COMPANIONS:
            if _same_file(p, Path(str(db) + suffix)):
                what = "the results database" if not suffix else f"the results database's {suffix[1:]} file"
                raise ExportError(f"export {p}: is {what} ({db}); export to another file")
    for f in inputs:
        if _same_file(p, Path(f)):
            raise ExportError(f"export {p}: is an input of this run ({f}); export to another file")
    for f in others:
        if _same_file(p, Path(f)):
            raise ExportError(f"export {p}: given twice; each --export needs its own file")
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


def _write_atomic(path: Path, text: str | Callable[[IO[bytes]], object]) -> None:
    """`text` (or what the callable writes into the binary file) to `path`, atomically."""
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
    model: Sequence[ModelLine] | None = None,
) -> None:
    """Write `results` to `path` in the format its extension names (.csv, .json, .md).

    `comparisons` maps `compare.comparison_key(result)` to its Comparison against the baseline; when None they
    are computed here from the samples (`compare.compare_results`). `min_effect`: the run's --min-effect (the
    Markdown legend states it). `model`: the model lines (`weights.model_lines`), computed here when None.
    """
    p = check_export_path(path)
    fmt = export_format(p)
    results = list(results)
    if comparisons is None:
        comparisons = compare_results(results, min_effect=min_effect)
    if model is None:
        model = model_lines(results, comparisons, min_effect=min_effect)
    if fmt == ".csv":   # row by row into the file: the text of 200,000 rows was ~80 MB, twice at its peak
        _write_atomic(p, lambda f: _write_csv(f, results, comparisons, model))
        return
    if fmt == ".json":   # a result at a time into the file, as the CSV
        _write_atomic(p, lambda f: write_json(f, results, environment=environment, run=run, comparisons=comparisons,
                                              model=model))
        return
    _write_atomic(p, render_markdown(results, environment=environment, run=run, comparisons=comparisons,
                                     min_effect=min_effect, model=model))


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


def _result_record(r: JobResult, comparisons: Comparisons, vs_torch: Mapping[str, float]) -> dict[str, Any]:
    d: dict[str, Any] = {
        "command": r.command, "func_name": r.func_name, "op": r.op, "variant": r.variant, "target": r.target,
        "device": r.device,
        "node": r.node,
        "backend": r.backend, "status": r.status, "numerics": r.numerics.verdict if r.numerics else None,
        "noisy": r.noisy, "noise_reason": r.noise_reason, "host_load": r.host_load, "steal": r.steal,
        "disturbed": r.disturbed, "rounds": len(r.rounds) or None, "block_k": r.block_k,
        "warmup_calls": r.warmup_calls, "error": r.error, "source": r.source, "reproducer": r.reproducer,
        "job_id": r.job_id,
    }
    for f in _STAT_COLUMNS:
        d[f] = getattr(r.stats, f) if r.stats else None
    c = r.compile
    d.update(compile_seconds=c.seconds if c else None, cache_hit=c.cache_hit if c else None,
             num_dispatches=c.num_dispatches if c else None, spec_applied=c.spec_applied if c else None,
             compile_flags=" ".join(chosen_flags(c.command)) if c else None,
             build=c.build if c else None, chosen_by=c.chosen_by if c else None,
             ratio_vs_torch=vs_torch.get(r.job_id))
    cmp = comparisons.get(comparison_key(r))
    d.update(ratio_vs_baseline=cmp.ratio if cmp else None, ci_low=cmp.ci_low if cmp else None,
             ci_high=cmp.ci_high if cmp else None, p_value=cmp.p_value if cmp else None,
             verdict=cmp.verdict if cmp else None, verdict_reason=cmp.reason if cmp else None)
    d.update(calls=r.calls, share=r.share, captured_us=r.captured_us, weighted_us=weighted_us(r))
    d.update(roofline_us=r.roofline_us, pct_roofline=r.pct_roofline)
    return d


def weighted_us(r: JobResult) -> float | None:
    """calls x median: what this kernel costs the model (None without a weight or a median)."""
    if r.calls is None or r.status != DONE or r.stats is None:
        return None
    return r.calls * r.stats.median_us


def _model_record(line: ModelLine) -> dict[str, Any]:
    d: dict[str, Any] = dict.fromkeys(CSV_COLUMNS)
    d.update(command=MODEL_COMMAND, variant=line.label, target=line.target, status=MODEL_STATUS, n=line.commands,
             backend=TORCH if line.label == TORCH else IREE,
             median_us=line.total_us, ratio_vs_baseline=line.ratio, ci_low=line.ci_low, ci_high=line.ci_high,
             p_value=line.p_value, verdict=line.verdict, calls=line.calls, share=line.share,
             captured_us=line.captured_us,
             weighted_us=line.total_us,
             error=(f"partial: {line.commands} of {line.weighted} weighted commands" if line.partial else None))
    return d


def _csv_rows(results: Sequence[JobResult], comparisons: Comparisons,
              model: Sequence[ModelLine] | None) -> Iterator[list[str]]:
    vs_torch = torch_ratios(results)
    records = (_result_record(r, comparisons, vs_torch) for r in results)
    lines = (_model_record(line) for line in model or ())
    return ([_cell(rec[k]) for k in CSV_COLUMNS] for rec in itertools.chain(records, lines))


def render_csv(results: Sequence[JobResult], comparisons: Comparisons,
               model: Sequence[ModelLine] | None = None) -> str:
    """One row per result, in the given order, then one per model line (status `model`). Each row goes into the
    text as it is made (a list of every row's cells first was 0.7 KB a row more at the peak: 136 MB for 200,000)."""
    return _csv_text(CSV_COLUMNS, _csv_rows(results, comparisons, model))


def _write_csv(f: IO[bytes], results: Sequence[JobResult], comparisons: Comparisons,
               model: Sequence[ModelLine] | None) -> None:
    """`render_csv`'s text, UTF-8, written into `f` row by row (never the whole text in memory)."""
    text = io.TextIOWrapper(f, encoding="utf-8", newline="")
    w = csv.writer(text, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    w.writerows(_csv_rows(results, comparisons, model))
    text.flush()
    text.detach()   # `f` is the caller's to close


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
    weighted = any(r.calls is not None for _, by_backend in rows for r in by_backend.values())
    if weighted:   # after iree-boo-driver's own columns (timing, then numerics), so theirs keep their places
        header += ["calls", "share"] + [f"{b} calls_x_median" for b in backends]
    # ours after everything iree-boo-driver has, so its columns keep their places: the roofline, the GPU's
    # dispatch time (beside the wall-time stats), the device with several
    results = [r for _, by_backend in rows for r in by_backend.values()]
    roof = any(r.pct_roofline is not None for r in results)
    if roof:
        header += [f"{b} pct_roofline" for b in backends]
    dispatch = any(r.device_us is not None for r in results)
    if dispatch:
        header += [f"{b} dispatch_us" for b in backends]
    several_devices = len({r.where for r in results if r.device}) > 1   # GPUs, or Ray nodes
    if several_devices:
        header.append("device")
    header += [f"{b} n" for b in backends]   # the samples taken: fewer than --iter when the time limit came first
    # how each IREE column's kernels were built (BOO's build for iree_boo; best: what chose its configuration)
    built = [b for b in backends if any((r := by.get(b)) is not None and build_label(r) for _, by in rows)]
    header += [f"{b} build" for b in built]
    ours = (len(backends) if roof else 0) + (len(backends) if dispatch else 0) + several_devices + len(backends) \
        + len(built)
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
        if weighted:
            line += _boo_driver_weights(by_backend, backends)
        if roof:
            line += [_roofline_cell(by_backend.get(b)) for b in backends]
        if dispatch:
            line += [_cell(r.device_us) if (r := by_backend.get(b)) is not None and r.device_us is not None
                     else NA for b in backends]
        if several_devices:
            line.append(" ".join(sorted({r.where for r in by_backend.values() if r.device})) or NA)
        line += [str(r.stats.n) if (r := by_backend.get(b)) is not None and r.status == DONE and r.stats else NA
                 for b in backends]
        line += [(build_label(r) if (r := by_backend.get(b)) is not None else None) or NA for b in built]
        out.append(line)
    if weighted:
        out.append(_boo_driver_model_row(rows, backends, len(header) - ours) + [NA] * ours)
    return _csv_text(header, out)


def _roofline_cell(r: JobResult | None) -> str:
    return _cell(r.pct_roofline) if r is not None and r.status == DONE and r.pct_roofline is not None else NA


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


def _boo_driver_weights(by_backend: Mapping[str, JobResult], backends: Sequence[str]) -> list[str]:
    """A row's `calls`, `share` and `<b> calls_x_median` cells."""
    r = next((x for x in by_backend.values() if x.calls is not None), None)
    cells = [_cell(r.calls) if r else NA, _cell(r.share) if r and r.share is not None else NA]
    for b in backends:
        res = by_backend.get(b)
        w = weighted_us(res) if res is not None else None
        cells.append(NA if w is None else _cell(w))
    return cells


def _boo_driver_model_row(rows: Sequence[tuple[str, Mapping[str, JobResult]]], backends: Sequence[str],
                          width: int) -> list[str]:
    """The model line of the boo-driver CSV: `arguments` says what it is (and `partial` when some weighted command
    has no result on a backend), each `<b> calls_x_median` the backend's sum of calls x median over the
    commands it measured. iree-boo-driver's CSV has no ratios, so neither has this row."""
    weighted_rows = [by for _, by in rows if any(r.calls is not None for r in by.values())]
    sums: list[str] = []
    counted: list[int] = []
    for b in backends:
        ws = [w for by in weighted_rows if (w := weighted_us(by[b]) if b in by else None) is not None]
        counted.append(len(ws))
        sums.append(_cell(sum(ws)) if ws else NA)
    calls = sum(next(r.calls or 0 for r in by.values() if r.calls is not None) for by in weighted_rows)
    text = f"{MODEL_COMMAND} ({len(weighted_rows)} weighted commands"
    short = [f"{b} {n} of {len(weighted_rows)}" for b, n in zip(backends, counted) if n < len(weighted_rows)]
    text += f"; partial: {', '.join(short)})" if short else ")"
    return [text] + [NA] * (width - 3 - len(backends)) + [str(calls), NA] + sums
