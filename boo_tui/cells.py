"""The results table's cells, filter and sort order: pure functions of the `RunModel` (no Textual, UI thread)."""
from __future__ import annotations

import math
import shlex
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from rich.text import Text

from boo_engine.api import TORCH, Comparison, JobResult, Status, Verdict, format_us, roof_cell, verdict_words

from .run_model import JobView, RunModel, shape_label
from .table_lines import Cell

if TYPE_CHECKING:
    from _typeshed import SupportsRichComparison

#: "#" numbers the commands in the order they were added and "shape" says what each one computes, so rows can be
#: told apart at a glance; then the answer (median, the ratio vs the baseline with its verdict, numerics, noise),
#: which fits 120 columns; the throughput and roofline columns follow on wider terminals, and the kernel name
#: (long: it spells the shapes) goes last.
COLUMNS: list[tuple[str, str]] = [
    ("cmd", "#"),
    ("op", "op"),
    ("shape", "shape"),
    ("variant", "variant"),
    ("backend", "backend"),
    ("status", "status"),
    ("median", "median us"),
    ("vs_base", "vs base"),
    ("numerics", "numerics"),
    ("noisy", "noisy"),
    ("gflops", "GFLOP/s"),
    ("roof", "% roof"),
    ("kernel", "kernel"),
]
#: the columns a commands file with weights (`# boo-tui: calls=N share=P%` lines) adds, after the shape: the
#: kernel's share of the capture's compute total (of the model's eager time in older files) and how often the model
#: called it
WEIGHT_COLUMNS: list[tuple[str, str]] = [("share", "share %"), ("calls", "calls")]


def columns(weighted: bool, several_devices: bool = False, baseline: str = "base") -> list[tuple[str, str]]:
    """The table's columns: the weight columns only when some command has a weight, the device column (after the
    backend) only when results came from more than one device (--devices). `baseline`: what the ratio column is
    against, in its header ("vs boo" when the baseline is BOO's build)."""
    cols = [(k, f"vs {baseline}" if k == "vs_base" else label) for k, label in COLUMNS]
    if several_devices:
        at = [k for k, _ in cols].index("backend") + 1
        cols = cols[:at] + [("device", "device")] + cols[at:]
    if not weighted:
        return cols
    at = [k for k, _ in cols].index("shape") + 1
    return cols[:at] + WEIGHT_COLUMNS + cols[at:]


#: columns of a fixed width: the engine's verdicts arrive as row updates, which keep column widths (table.py), so
#: "vs base" is wide enough for them from the start (`0.912x ✅`, `0.0912x ❓`: the mark takes two cells; the
#: torch reference's `0.0912x torch`)
COLUMN_WIDTHS: dict[str, int] = {"vs_base": 13}

#: the widest shape label the table shows (longer ones lose tokens in the middle: see `elide_tokens`). With it,
#: the 80-column table shows #, op, shape, variant, backend, status and the median.
SHAPE_WIDTH = 23

STATUS_STYLE: dict[str, str] = {
    Status.QUEUED: "dim",
    Status.EXPORTING: "cyan",
    Status.COMPILING: "cyan",
    Status.CACHED: "blue",
    Status.MEASURING: "bold yellow",
    Status.DONE: "green",
    Status.FAILED: "bold red",
    Status.CANCELLED: "magenta",
    Status.INTERRUPTED: "magenta",
}

#: each verdict's colour here (its mark is the Markdown export's own, `exporters.VERDICT_MARK`)
VERDICT_STYLE: dict[Verdict, str] = {Verdict.FASTER: "bold green", Verdict.SLOWER: "bold red", Verdict.SAME: "dim",
                                     Verdict.UNCLEAR: "yellow", Verdict.INSUFFICIENT: "dim"}

# ---- cells -----------------------------------------------------------------------------------------------
def status_text(view: JobView) -> Text:
    """The status cell; a job being measured counts its samples: `timing 17/100` (short: the columns up to
    "noisy" fit 120 terminal columns)."""
    label = str(view.status)
    if view.status == Status.MEASURING:
        n = len(view.samples_us)
        label = f"timing {n}/{view.target_count}" if view.target_count else f"timing {n}"
    return Text(label, style=STATUS_STYLE.get(view.status, ""))




def fmt_ratio(ratio: float) -> str:
    """A latency ratio with three significant digits: 0.912, 1.04, 12.3."""
    if not math.isfinite(ratio) or ratio <= 0:
        return "-"
    decimals = max(0, 2 - math.floor(math.log10(ratio)))
    return f"{ratio:.{decimals}f}"


#: the torch reference's row is coloured for the IREE kernel's side: torch faster is red, IREE faster green
REFERENCE_STYLE = {**VERDICT_STYLE, Verdict.FASTER: VERDICT_STYLE[Verdict.SLOWER],
                    Verdict.SLOWER: VERDICT_STYLE[Verdict.FASTER]}


def verdict_text(c: Comparison | None, *, reference: bool = False) -> Text:
    """The "vs base" cell: the engine's ratio median(job) / median(baseline) (< 1 is faster) and its verdict
    mark, as the Markdown export writes them: `0.912x ✅`, `1.04x ≈`, `1.09x ❓`; the torch reference's row
    (`reference`) names the faster side instead of a mark: `0.78x torch` in red, `1.29x iree` in green."""
    if c is None or not math.isfinite(c.ratio):
        return Text("-", style="dim")
    mark, words = verdict_words(c.verdict, reference=reference)
    if reference and c.verdict in (Verdict.FASTER, Verdict.SLOWER):
        mark = words.split()[0]   # the faster side's name: "torch" (red) or "iree" (green)
    return Text(f"{fmt_ratio(c.ratio)}x {mark or c.verdict}",
                style=(REFERENCE_STYLE if reference else VERDICT_STYLE).get(c.verdict, ""))


def ci_text(c: Comparison, *, reference: bool = False) -> str:
    """`0.912x [0.900, 0.925] ✅ faster`: a verdict with its 95% CI, as the detail pane and the screens say it."""
    ci = f" [{c.ci_low:.3f}, {c.ci_high:.3f}]" if math.isfinite(c.ci_low) and math.isfinite(c.ci_high) else ""
    mark, words = verdict_words(c.verdict, reference=reference)
    return " ".join(part for part in (f"{fmt_ratio(c.ratio)}x{ci}", mark, words) if part)


def roof_text(r: JobResult) -> Text:
    """The "% roof" cell: above 100% (a kernel that beat a measured peak: the detail pane says why) marked ▲."""
    if r.pct_roofline is None:
        return Text("-", style="dim")
    return Text(roof_cell(r), style="yellow" if r.pct_roofline > 100 else "")


def row_cells(model: RunModel, view: JobView) -> dict[str, Cell]:
    r = view.result
    st = r.stats
    numerics = Text("-", style="dim")
    if r.numerics is not None:
        ok = not r.numerics.failed
        numerics = Text(r.numerics.verdict, style="green" if ok else "bold red")
    return {
        "cmd": str(model.command_index.get(r.command, "")),
        "op": r.op,
        "shape": shape_cell(r.command),
        "kernel": r.func_name,
        "variant": r.variant,
        "backend": r.backend,
        "device": r.where or Text("-", style="dim"),
        "status": status_text(view),
        "median": Text(format_us(view.median_us), style="" if st else "dim"),
        "gflops": fmt_gflops(st.gflops if st else None),
        "roof": roof_text(r),
        "vs_base": verdict_text(model.comparison_of(view), reference=r.backend == TORCH),
        "numerics": numerics,
        "noisy": Text("noisy", style="yellow") if r.noisy else Text(""),
        "share": Text(f"{r.share:.2f}") if r.share is not None else Text("-", style="dim"),
        "calls": Text(str(r.calls)) if r.calls is not None else Text("-", style="dim"),
    }


def fmt_gflops(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.1f}" if x < 100 else f"{x:,.0f}"


#: the widest command label the compare and trend screens show first (the whole command comes last): a 156-character
#: command first had pushed the ratio, CI and verdict off screen
COMMAND_WIDTH = 40


def command_cell(command: str) -> str:
    """A command as the compare and trend screens name it first: its op word and shape label (`convbfp16 n4 c35
    48x32 k35 1x1 NHWC fwd`), elided in the middle to COMMAND_WIDTH; the command itself when it has no shape."""
    label = shape_label(command)
    text = f"{command.split()[0]} {label}" if label and command.split() else command
    return elide_tokens(text, COMMAND_WIDTH)


@lru_cache(maxsize=4096)
def shape_cell(command: str) -> str:
    """The shape column's text: the command's shape label, elided to SHAPE_WIDTH."""
    return elide_tokens(shape_label(command), SHAPE_WIDTH)


def elide_tokens(text: str, width: int) -> str:
    """`text` when it fits in `width` characters, else its first and last words around an ellipsis, taken
    alternately from both ends while they fit: the sizes lead a shape label and the layout, mode and dtype end
    it, and those are what tell two kernels apart. `n2 c32 28x28 k32 3x3 p1 NCHW bwd-data` -> `n2 c32 … NCHW
    bwd-data`."""
    if len(text) <= width:
        return text
    words = text.split()
    head: list[str] = []
    tail: list[str] = []
    turns = ["head", "tail"]            # a side whose next word does not fit drops out
    while turns and len(head) + len(tail) < len(words):
        side = turns.pop(0)
        if side == "head":
            trial_head, trial_tail = head + [words[len(head)]], tail
        else:
            trial_head, trial_tail = head, [words[len(words) - 1 - len(tail)]] + tail
        if len(" ".join([*trial_head, "…", *trial_tail])) <= width:
            head, tail = trial_head, trial_tail
            turns.append(side)
    if not head and not tail:           # not even one word fits: cut the text
        return text[: max(width - 1, 0)] + "…"
    return " ".join([*head, "…", *tail])


# ---- filtering -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Filter:
    """`op:conv status:failed words...`: every given part must match (words match anywhere, case-insensitive)."""

    ops: tuple[str, ...] = ()
    statuses: tuple[str, ...] = ()
    words: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str) -> Filter:
        ops: list[str] = []
        statuses: list[str] = []
        words: list[str] = []
        try:
            tokens = shlex.split(text)
        except ValueError:       # an unclosed quote while the user is typing
            tokens = text.split()
        for tok in tokens:
            low = tok.lower()
            if low.startswith("op:") and len(low) > 3:
                ops.extend(low[3:].split(","))
            elif low.startswith("status:") and len(low) > 7:
                statuses.extend(low[7:].split(","))
            else:
                words.append(low)
        return cls(tuple(ops), tuple(statuses), tuple(words))

    @property
    def active(self) -> bool:
        return bool(self.ops or self.statuses or self.words)

    def matches(self, view: JobView) -> bool:
        r = view.result
        if self.ops and r.op.lower() not in self.ops:
            return False
        if self.statuses and not any(view.status.startswith(s) for s in self.statuses):
            return False
        if self.words:
            hay = " ".join(str(x) for x in (r.command, r.func_name, r.variant, r.backend, r.op, view.status,
                                           r.error or "", r.source or "")).lower()
            return all(w in hay for w in self.words)
        return True


# ---- sorting ---------------------------------------------------------------------------------------------
_STATUS_ORDER: dict[str, int] = {s: i for i, s in enumerate(
    [Status.MEASURING, Status.COMPILING, Status.EXPORTING, Status.CACHED, Status.QUEUED, Status.DONE, Status.FAILED,
     Status.CANCELLED, Status.INTERRUPTED])}


def _num(x: float | None) -> tuple[int, float]:
    return (1, 0.0) if x is None else (0, x)


def _vs_base(model: RunModel, v: JobView) -> float | None:
    c = model.comparison_of(v)
    return c.ratio if c is not None and math.isfinite(c.ratio) else None


#: columns whose key is a number or None (missing values sort last), the other computed keys, and the text columns
#: (the result's attribute each shows)
_NUMERIC_KEYS: dict[str, Callable[[RunModel, JobView], float | None]] = {
    "median": lambda m, v: v.median_us,
    "share": lambda m, v: v.result.share,
    "calls": lambda m, v: v.result.calls,
    "gflops": lambda m, v: v.result.stats.gflops if v.result.stats else None,
    "roof": lambda m, v: v.result.pct_roofline,
    "vs_base": _vs_base,
}
_OTHER_KEYS: dict[str, Callable[[RunModel, JobView], SupportsRichComparison]] = {
    "cmd": lambda m, v: m.command_index.get(v.result.command, 0),
    "status": lambda m, v: _STATUS_ORDER.get(v.status, 99),
    "shape": lambda m, v: (v.result.op, shape_label(v.result.command)),
    "numerics": lambda m, v: v.result.numerics.verdict if v.result.numerics else "~",
    "noisy": lambda m, v: not v.result.noisy,
}
_TEXT_KEYS = {"op": "op", "kernel": "func_name", "variant": "variant", "backend": "backend", "device": "where"}


def sort_key(model: RunModel, column: str) -> Callable[[JobView], SupportsRichComparison]:
    """A key that sorts missing values last whatever the column."""
    numeric, other, attr = _NUMERIC_KEYS.get(column), _OTHER_KEYS.get(column), _TEXT_KEYS.get(column)
    if numeric is not None:
        return lambda v: _num(numeric(model, v))
    if other is not None:
        return lambda v: other(model, v)
    if attr is not None:
        return lambda v: str(getattr(v.result, attr))
    return lambda v: ""


def ordered(model: RunModel, flt: Filter, sort_by: str | None, reverse: bool) -> list[JobView]:
    views: Iterable[JobView] = (v for v in model.jobs.values() if flt.matches(v))
    out = list(views)
    if sort_by:
        key = sort_key(model, sort_by)
        out.sort(key=key, reverse=reverse)
        if reverse:   # missing values last in this direction too (a descending share: unweighted rows at the end)
            out.sort(key=lambda v: _missing(key(v)))
    return out


def _missing(key: SupportsRichComparison) -> bool:
    return isinstance(key, tuple) and len(key) == 2 and key[0] == 1 and key[1] == 0.0
