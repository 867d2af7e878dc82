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

from .columns import torch_ratios
from .compare import DEFAULT_MIN_EFFECT, Comparison
from .comparisons import compare_results, comparison_key
from .compile.flags import chosen_flags
from .errors import BooError
from .fsutil import atomic_write
from .jsondoc import write_json
from .markdown import render_markdown
from .results import DONE, IREE, TORCH, JobResult
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
Comparisons = Mapping[tuple[str, str, str], Comparison]
#: a value of a CSV record before `csv_cell` writes it (a bool is an int: written true / false)
CsvValue = str | int | float | None


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
    _refuse_run_files(p, databases, inputs, others)
    if list(formats) == list(FORMATS):
        export_format(p)
    elif p.suffix.lower() not in formats:
        raise ExportError(f"export {p}: unknown format {p.suffix or '(no extension)'!r}; use {', '.join(formats)}")
    _check_writable_place(p)
    return p


def _refuse_run_files(p: Path, databases: Iterable[str | os.PathLike[str] | None],
                      inputs: Iterable[str | os.PathLike[str]], others: Iterable[str | os.PathLike[str]]) -> None:
    """ExportError when `p` is a results database (or one of its companion files), an input or another export."""
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


def _check_writable_place(p: Path) -> None:
    """ExportError when `p` is a directory, or its directory is missing or refuses a new file."""
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


def write_atomic(path: Path, text: str | Callable[[IO[bytes]], object]) -> None:
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
    run: Mapping[str, Any] | None = None,
    comparisons: Comparisons | None = None,
    min_effect: float = DEFAULT_MIN_EFFECT,
    model: Sequence[ModelLine] | None = None,
) -> None:
    """Write `results` to `path` in the format its extension names (.csv, .json, .md).

    `comparisons` maps `comparisons.comparison_key(result)` to its Comparison against the baseline; when None they
    are computed here from the samples (`comparisons.compare_results`). `min_effect`: the run's --min-effect (the
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
        write_atomic(p, lambda f: _write_csv(f, results, comparisons, model))
        return
    if fmt == ".json":   # a result at a time into the file, as the CSV
        write_atomic(p, lambda f: write_json(f, results, environment=environment, run=run, comparisons=comparisons,
                                              model=model))
        return
    write_atomic(p, render_markdown(results, environment=environment, run=run, comparisons=comparisons,
                                     min_effect=min_effect, model=model))


def export_csv_chunks(path: str | os.PathLike[str], chunks: Iterable[Sequence[JobResult]],
                      compare: Callable[[Sequence[JobResult]], Comparisons],
                      model: Callable[[list[JobResult], Comparisons], Sequence[ModelLine]]) -> None:
    """A run too big to hold, as CSV (`render_csv`'s rows): read a chunk at a time (a command's results in one
    chunk: `compare(chunk)` compares them), then the model lines of the weighted results, which alone are kept
    (`model(weighted, their comparisons)`)."""
    p = check_export_path(path, formats=(".csv",))

    def rows() -> Iterator[list[str]]:
        weighted: list[JobResult] = []
        compared: dict[tuple[str, str, str], Comparison] = {}
        for chunk in chunks:
            comparisons = compare(chunk)
            yield from _csv_rows(chunk, comparisons, None)
            kept = [r for r in chunk if r.calls is not None]
            weighted += kept
            commands = {r.command for r in kept}
            compared.update({k: c for k, c in comparisons.items() if k[1] in commands})
        yield from _csv_rows((), {}, model(weighted, compared) if weighted else ())

    write_atomic(p, lambda f: _write_csv_rows(f, rows()))


# --- CSV -----------------------------------------------------------------------------------------------------

def csv_cell(v: CsvValue) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "" if math.isnan(v) else repr(v)
    return str(v)


def csv_text(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


def _result_record(r: JobResult, comparisons: Comparisons, vs_torch: Mapping[str, float]) -> dict[str, CsvValue]:
    d: dict[str, CsvValue] = {
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


def _model_record(line: ModelLine) -> dict[str, CsvValue]:
    d: dict[str, CsvValue] = dict.fromkeys(CSV_COLUMNS)
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
    return ([csv_cell(rec[k]) for k in CSV_COLUMNS] for rec in itertools.chain(records, lines))


def render_csv(results: Sequence[JobResult], comparisons: Comparisons,
               model: Sequence[ModelLine] | None = None) -> str:
    """One row per result, in the given order, then one per model line (status `model`). Each row goes into the
    text as it is made (a list of every row's cells first was 0.7 KB a row more at the peak: 136 MB for 200,000)."""
    return csv_text(CSV_COLUMNS, _csv_rows(results, comparisons, model))


def _write_csv(f: IO[bytes], results: Sequence[JobResult], comparisons: Comparisons,
               model: Sequence[ModelLine] | None) -> None:
    """`render_csv`'s text, UTF-8, written into `f` row by row (never the whole text in memory)."""
    _write_csv_rows(f, _csv_rows(results, comparisons, model))


def _write_csv_rows(f: IO[bytes], rows: Iterable[list[str]]) -> None:
    """The header and `rows`, UTF-8, into `f` a row at a time."""
    text = io.TextIOWrapper(f, encoding="utf-8", newline="")
    w = csv.writer(text, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    w.writerows(rows)
    text.flush()
    text.detach()   # `f` is the caller's to close
