"""A kernel's trend over every stored run (of any machine) that measured it: the median per run with its 95% CI,
oldest first, runs whose compiler version or flags changed marked. The data is the engine's
(`boo_engine.history.kernel_trend`); this screen only draws it.

Top: the kernels of the run it was opened from (command, variant, backend, target); the one under the cursor
gets its trend below, as a plot (median, CI ends; a dotted line where the compiler or the flags changed) and a
table of the points.
"""
from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Footer, Header, Static

from boo_engine.api import TrendPoint, format_us, kernel_trend, run_kernels

from ..cells import command_cell
from ..plots import _fresh_figure, series_color
from .base import WorkerScreen, fmt_time

if TYPE_CHECKING:
    from boo_engine.api import Store

Key = tuple[str, str, str, str]


def render_trend(points: list[TrendPoint], width: int, height: int) -> str:
    """Median per run (with the CI's ends as two thinner series) against the run's place in time; a vertical line
    before each run whose compiler or flags changed."""
    if not points:
        return ""
    fig = _fresh_figure(width, height, "median us per run (95% CI), oldest first")
    xs = list(range(1, len(points) + 1))
    for ys in ([p.ci_low_us for p in points], [p.median_us for p in points], [p.ci_high_us for p in points]):
        ok = [(x, y) for x, y in zip(xs, ys) if math.isfinite(y)]
        if ok:
            fig.draw(fig.signal([x for x, _ in ok], [y for _, y in ok]))
    for x, p in zip(xs, points):
        if p.compiler_changed or p.flags_changed:
            fig.line(x - 0.5, orientation="vertical", pixel=series_color(2), style="dotted")
    ticks = _tick_places(len(points), max(2, (width - 10) // 14))   # labels ~10 wide, a gap between
    fig.ruler("x").ticks(ticks, [run_label(points[x - 1]) for x in ticks])
    fig.label("run (oldest first)", axis="x")
    fig.label("us", axis="y")
    return fig.build().string()


def run_label(p: TrendPoint) -> str:
    """A run on the plot's x axis: its id and the day it started (`#12 11-27`)."""
    return f"#{p.run_id} {p.started_at[5:10]}" if len(p.started_at) >= 10 else f"#{p.run_id}"


def _tick_places(n: int, most: int) -> list[int]:
    """At most `most` of the places 1..n, evenly spread, the first and the last among them."""
    if n <= most:
        return list(range(1, n + 1))
    step = (n - 1) / (most - 1)
    return sorted({1 + round(i * step) for i in range(most)})


def changes_text(p: TrendPoint) -> Text:
    what = [w for w, changed in (("compiler", p.compiler_changed), ("flags", p.flags_changed)) if changed]
    return Text(" + ".join(what) + " changed", style="bold yellow") if what else Text("")


class TrendScreen(WorkerScreen):
    """One kernel over time, across runs and machines."""

    BINDINGS = [Binding("escape", "app.pop_screen", "Back")]

    def __init__(self, store: Store, run_id: int, key: Key | None = None) -> None:
        super().__init__(id="trend")
        self.store = store
        self.run_id = run_id
        self.key = key
        self.kernels: list[Key] = []
        self.points: list[TrendPoint] = []

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(f"kernels of run {self.run_id}: the one under the cursor over every stored run",
                     id="trend-hint", classes="hint")
        with Vertical():
            yield DataTable(id="trend-kernels", cursor_type="row", zebra_stripes=True)
            yield Static("", id="trend-plot")
            yield DataTable(id="trend-points", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        self.title = f"boo-tui: kernel trend (run {self.run_id})"
        kernels = self.query_one("#trend-kernels", DataTable)
        for label in ("kernel", "variant", "backend", "target", "command"):
            kernels.add_column(label, key=label)
        points = self.query_one("#trend-points", DataTable)
        for label in ("run", "started", "host", "CPU/GPU", "median us", "95% CI", "n", "compiler", "flags", "change"):
            points.add_column(label, key=label)
        kernels.focus()
        self._call_in_thread(run_kernels, self.store, self.run_id, then=self._show_kernels)

    def _show_kernels(self, kernels: list[Key]) -> None:
        self.kernels = kernels
        table = self.query_one("#trend-kernels", DataTable)
        for command, *rest in kernels:
            table.add_row(command_cell(command), *rest, Text(command, style="dim"))
        if not kernels:
            self.query_one("#trend-hint", Static).update(f"run {self.run_id} finished no kernel")
            return
        if self.key in kernels:
            table.move_cursor(row=kernels.index(self.key))
        self._load(kernels[table.cursor_row if 0 <= table.cursor_row < len(kernels) else 0])

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "trend-kernels" and 0 <= event.cursor_row < len(self.kernels):
            event.stop()
            self._load(self.kernels[event.cursor_row])

    def _load(self, key: Key) -> None:
        self.key = key
        self._call_in_thread(kernel_trend, self.store, *key, then=functools.partial(self._show_points, key))

    def _show_points(self, key: Key, points: list[TrendPoint]) -> None:
        if key != self.key:   # the cursor moved on meanwhile
            return
        self.points = points
        table = self.query_one("#trend-points", DataTable)
        table.clear()
        for p in points:
            ci = (f"{format_us(p.ci_low_us)}-{format_us(p.ci_high_us)}"
                  if math.isfinite(p.ci_low_us) and math.isfinite(p.ci_high_us) else "-")
            compiler = (p.compiler or "-").replace("IREE compiler version ", "").split(" @")[0]
            table.add_row(str(p.run_id), fmt_time(p.started_at), p.host or "-", p.device or "-",
                          format_us(p.median_us) + (" ⚠" if p.noisy else ""), ci, str(p.n), compiler,
                          " ".join(p.flags) or "-", changes_text(p))
        plot = self.query_one("#trend-plot", Static)
        width = max(40, (self.size.width or 100) - 2)
        plot.update(Text.from_ansi(render_trend(points, width, 12)) if len(points) > 1 else
                    Text(f"{len(points)} run measured this kernel: no trend yet", style="dim"))


__all__ = ["TrendScreen", "changes_text", "render_trend"]
