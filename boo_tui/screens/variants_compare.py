"""This session's variants compared: commands x variants, each cell the latency ratio against the baseline IREE
kernel with the engine's verdict (`comparisons.compare_results` with the session's --min-effect and seed, as the
exports give it), and the variants' histograms overlaid for the selected command."""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Footer, Header, Static

from boo_engine.api import (
    BASELINE_LABEL,
    DEFAULT_MIN_EFFECT,
    Backend,
    Comparison,
    JobResult,
    Status,
    VariantSummary,
    by_variant,
    column_label,
    compare_results,
    summarize,
    verdict_legend,
)

from ..cells import command_cell
from ..plots import PlotView, Series
from .base import WorkerScreen, plain_ratio_text, ratio_text

#: the results as last shown: per job its id, status and median (polled: the table is refilled when it changes)
_State = tuple[tuple[str, Status, float | None], ...]

Comparisons = dict[tuple[str, str, str], Comparison]


class CompareScreen(WorkerScreen):
    """Commands x variants: each cell the latency ratio against the baseline IREE kernel (< 1 faster), coloured
    by the engine's verdict; below, the variants' histograms overlaid for the selected command."""

    BINDINGS = [Binding("escape,m", "app.pop_screen", "Back")]

    #: how often an open compare screen looks for newly finished results (it follows a running session)
    POLL_S = 1.0

    def __init__(self, results: Iterable[JobResult], source: Callable[[], Iterable[JobResult]] | None = None, *,
                 min_effect: float = DEFAULT_MIN_EFFECT, seed: int = 0) -> None:
        """`results` to show; `source` (optional) gives the current results again: the screen then keeps up
        with a run that is still going. `min_effect` and `seed`: the session's, so the verdicts are the exports'."""
        super().__init__(id="compare")
        self.results = list(results)
        self.source = source
        self.min_effect = min_effect
        self.seed = seed
        self.commands: list[str] = []
        self.labels: list[str] = []
        self._shown_state: _State = ()
        self._generation = 0

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("latency ratio vs baseline (< 1 faster); computing statistics...", id="compare-summary",
                     classes="hint")
        with Vertical(id="compare-body"):
            yield DataTable(id="compare-table", cursor_type="row", zebra_stripes=True)
            yield PlotView("histogram", id="compare-hist", empty="select a command with finished results")
        yield Footer()

    def on_mount(self) -> None:
        self.title = "boo-tui: variants compared"
        self._fill()
        if self.source is not None:
            self.set_interval(self.POLL_S, self._poll)

    @staticmethod
    def _state(results: list[JobResult]) -> _State:
        return tuple((r.job_id, r.status, r.median_us) for r in results)

    def _poll(self) -> None:
        fresh = list(self.source()) if self.source is not None else self.results
        if self._state(fresh) != self._shown_state:
            self.results = fresh
            self._fill()

    def _fill(self) -> None:
        """(Re)build the table from self.results, keep the selected command, recompute statistics off-thread."""
        self._shown_state = self._state(self.results)
        self._generation += 1
        table = self.query_one(DataTable)
        selected = None
        if table.row_count:
            with contextlib.suppress(Exception):
                selected = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        finished = [r for r in self.results if r.status == Status.DONE and r.samples_us]
        self.commands = list(dict.fromkeys(r.command for r in self.results))
        labels = list(dict.fromkeys(column_label(r) for r in self.results))
        self.labels = sorted(labels, key=lambda x: (x != BASELINE_LABEL, x == Backend.TORCH, x))
        table.clear(columns=True)
        table.add_column("kernel", key="kernel")
        for label in self.labels:
            table.add_column(label, key=label)
        table.add_column("command", key="command")
        base_median = {(r.target, r.command): r.stats.median_us for r in finished
                       if column_label(r) == BASELINE_LABEL and r.stats}
        cells: dict[tuple[str, str], Text] = {}
        for r in self.results:
            label = column_label(r)
            if r.status != Status.DONE or not r.stats:
                cells[(r.command, label)] = Text(r.status, style="dim")
            elif label == BASELINE_LABEL:
                cells[(r.command, label)] = Text(f"{r.stats.median_us:.4g}us")
            else:   # until the engine's verdict comes back from the worker: the plain ratio, not judged
                b = base_median.get((r.target, r.command))
                cells[(r.command, label)] = plain_ratio_text(r.stats.median_us / b if b else None)
        for cmd in self.commands:
            table.add_row(command_cell(cmd), *[cells.get((cmd, lab), Text("")) for lab in self.labels],
                          Text(cmd, style="dim"), key=cmd)
        generation = self._generation
        self._call_in_thread(self._compute, finished,
                             then=lambda out: self._show_stats(*out) if generation == self._generation else None)
        if selected in self.commands:
            table.move_cursor(row=self.commands.index(selected), animate=False)
            self._plot(selected)
        elif self.commands:
            self._plot(self.commands[0])

    def _compute(self, finished: list[JobResult]) -> tuple[Comparisons, dict[str, VariantSummary]]:
        """Worker thread: the engine's comparisons, with the session's settings."""
        comps = compare_results(finished, min_effect=self.min_effect, seed=self.seed)
        return comps, summarize(by_variant(comps))

    def _show_stats(self, comparisons: Comparisons, summary: dict[str, VariantSummary]) -> None:
        table = self.query_one(DataTable)
        for (_target, command, label), c in comparisons.items():
            with contextlib.suppress(Exception):   # a cell for a job that left the table meanwhile
                table.update_cell(command, label, ratio_text(c, reference=label == Backend.TORCH))
        parts = [f"{name}: geomean {s.geomean_ratio:.3f} ({s.faster} faster, {s.slower} slower, {s.same} same"
                 + (f", {s.unclear} unclear" if s.unclear else "") + ")" for name, s in summary.items()]
        self.query_one("#compare-summary", Static).update(
            "  ".join(["ratio vs baseline (< 1 faster)", *parts])
            + "\ncolour = the verdict (green faster, red slower, yellow unclear; the torch column red where torch is "
              "faster than the IREE baseline, green where IREE is). " + verdict_legend(self.min_effect))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key is not None and event.row_key.value:
            self._plot(event.row_key.value)

    def _plot(self, command: str) -> None:
        series = [Series(column_label(r), tuple(r.samples_us)) for r in self.results
                  if r.command == command and r.samples_us]
        self.query_one(PlotView).set_series(series, title="")
