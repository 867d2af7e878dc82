"""iree-boo-driver's `--csv` file, as BOO writes it (`boo-driver --csv`): a row per command, per backend BOO's
timing columns, with --verify-numerics BOO's numerics columns then ours, and a model line for a file with
weights."""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping, Sequence

from .columns import build_label
from .exporters import MODEL_COMMAND, NA, check_export_path, csv_cell, csv_text, weighted_us, write_atomic
from .results import DONE, FAILED, IREE, JobResult, NumericsInfo

BOO_DRIVER_STATS = ("min", "max", "mean", "stddev", "num_dispatches")
#: BOO's --verify-numerics CSV columns (iree-turbine driver/driver.py), in its order, after every timing column
BOO_NUMERICS_COLUMNS = ("numerics_pass", "boo_vs_ref_mean", "boo_vs_ref_stddev", "boo_vs_ref_max",
                        "pytorch_vs_ref_mean", "pytorch_vs_ref_stddev", "pytorch_vs_ref_max",
                        "boo_vs_pytorch_mean", "boo_vs_pytorch_stddev", "boo_vs_pytorch_max", "structured_test")
#: ours, after BOO's: the worst relative error over every output, and why a check failed
OUR_NUMERICS_COLUMNS = ("numerics_max_rel_err", "numerics_reason")


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
    write_atomic(p, render_boo_driver_csv(rows, numerics=numerics))


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


def render_boo_driver_csv(rows: Sequence[tuple[str, Mapping[str, JobResult]]], *, numerics: bool = False) -> str:
    """The text of iree-boo-driver's `--csv` file (`write_boo_driver_csv` says what its columns are)."""
    layout = _boo_driver_layout(rows, numerics)
    header = _boo_driver_header(layout)
    out = [_boo_driver_line(arguments, by_backend, layout) for arguments, by_backend in rows]
    if layout.weighted:
        ours = layout.our_width()
        out.append(_boo_driver_model_row(rows, layout.backends, len(header) - ours) + [NA] * ours)
    return csv_text(header, out)


@dataclasses.dataclass(frozen=True)
class _BooDriverLayout:
    """Which columns a boo-driver CSV has: its backends (first-seen order) and the optional column groups."""

    backends: list[str]
    numerics: bool
    weighted: bool
    roof: bool
    dispatch: bool
    several_devices: bool
    built: list[str]

    def our_width(self) -> int:
        """How many of our columns follow iree-boo-driver's (and the weights)."""
        n = len(self.backends)
        return (n if self.roof else 0) + (n if self.dispatch else 0) + self.several_devices + n + len(self.built)


def _boo_driver_layout(rows: Sequence[tuple[str, Mapping[str, JobResult]]], numerics: bool) -> _BooDriverLayout:
    """The columns `rows` need: numerics also when some result carries a check."""
    backends: list[str] = []
    for _, by_backend in rows:
        for b, res in by_backend.items():
            if b not in backends:
                backends.append(b)
            numerics = numerics or res.numerics is not None
    results = [r for _, by_backend in rows for r in by_backend.values()]
    return _BooDriverLayout(
        backends=backends,
        numerics=numerics,
        weighted=any(r.calls is not None for r in results),
        roof=any(r.pct_roofline is not None for r in results),
        dispatch=any(r.device_us is not None for r in results),
        several_devices=len({r.where for r in results if r.device}) > 1,   # GPUs, or Ray nodes
        # how each IREE column's kernels were built (BOO's build for iree_boo; best: what chose its configuration)
        built=[b for b in backends if any((r := by.get(b)) is not None and build_label(r) for _, by in rows)],
    )


def _boo_driver_header(layout: _BooDriverLayout) -> list[str]:
    """The header row of a boo-driver CSV."""
    backends = layout.backends
    header = ["arguments"]
    for b in backends:
        header += [f"{b} {k}" for k in BOO_DRIVER_STATS]
    if layout.numerics:
        header += [*BOO_NUMERICS_COLUMNS, *OUR_NUMERICS_COLUMNS]
    if layout.weighted:   # after iree-boo-driver's own columns (timing, then numerics), so theirs keep their places
        header += ["calls", "share"] + [f"{b} calls_x_median" for b in backends]
    # ours after everything iree-boo-driver has, so its columns keep their places: the roofline, the GPU's
    # dispatch time (beside the wall-time stats), the device with several
    if layout.roof:
        header += [f"{b} pct_roofline" for b in backends]
    if layout.dispatch:
        header += [f"{b} dispatch_us" for b in backends]
    if layout.several_devices:
        header.append("device")
    header += [f"{b} n" for b in backends]   # the samples taken: fewer than --iter when the time limit came first
    header += [f"{b} build" for b in layout.built]
    return header


def _boo_driver_line(arguments: str, by_backend: Mapping[str, JobResult], layout: _BooDriverLayout) -> list[str]:
    """One command's row of a boo-driver CSV."""
    line = [arguments]
    for b in layout.backends:
        r = by_backend.get(b)
        s = r.stats if r is not None and r.status == DONE else None
        if r is not None and s is not None:
            nd = r.compile.num_dispatches if r.compile and r.compile.num_dispatches is not None else NA
            line += [csv_cell(s.min_us), csv_cell(s.max_us), csv_cell(s.mean_us), csv_cell(s.stddev_us), csv_cell(nd)]
        else:
            line += [NA] * len(BOO_DRIVER_STATS)
    if layout.numerics:
        line += _numerics_cells(by_backend.values())
    if layout.weighted:
        line += _boo_driver_weights(by_backend, layout.backends)
    return line + _boo_driver_our_cells(by_backend, layout)


def _boo_driver_our_cells(by_backend: Mapping[str, JobResult], layout: _BooDriverLayout) -> list[str]:
    """A row's cells in our columns: roofline, dispatch time, device, samples taken, build."""
    backends = layout.backends
    cells: list[str] = []
    if layout.roof:
        cells += [_roofline_cell(by_backend.get(b)) for b in backends]
    if layout.dispatch:
        cells += [csv_cell(r.device_us) if (r := by_backend.get(b)) is not None and r.device_us is not None
                  else NA for b in backends]
    if layout.several_devices:
        cells.append(" ".join(sorted({r.where for r in by_backend.values() if r.device})) or NA)
    cells += [str(r.stats.n) if (r := by_backend.get(b)) is not None and r.status == DONE and r.stats else NA
              for b in backends]
    cells += [(build_label(r) if (r := by_backend.get(b)) is not None else None) or NA for b in layout.built]
    return cells


def _roofline_cell(r: JobResult | None) -> str:
    return csv_cell(r.pct_roofline) if r is not None and r.status == DONE and r.pct_roofline is not None else NA


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
    cells = [csv_cell(r.calls) if r else NA, csv_cell(r.share) if r and r.share is not None else NA]
    for b in backends:
        res = by_backend.get(b)
        w = weighted_us(res) if res is not None else None
        cells.append(NA if w is None else csv_cell(w))
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
        sums.append(csv_cell(sum(ws)) if ws else NA)
    calls = sum(next(r.calls or 0 for r in by.values() if r.calls is not None) for by in weighted_rows)
    text = f"{MODEL_COMMAND} ({len(weighted_rows)} weighted commands"
    short = [f"{b} {n} of {len(weighted_rows)}" for b, n in zip(backends, counted) if n < len(weighted_rows)]
    text += f"; partial: {', '.join(short)})" if short else ")"
    return [text] + [NA] * (width - 3 - len(backends)) + [str(calls), NA] + sums
