"""A tune, live: per kernel its stage, candidates compiled / failed / measured, the best ratio so far and what it
changes; the selected kernel's leader against its baseline as overlaid latency histograms; the tuner's log.

The tune runs on its own thread (`tune_run.TuneRun`); its events arrive as `TuneEventPosted` messages, in order,
and each updates one row's cells. The histogram reads the two jobs' samples from the tuner's session at most
plots.MAX_HZ times a second, and only when they changed (or the selection or the leader did); PlotView then
rebuilds the figure only when its data did. Closing the screen stops the tune (the app waits for its thread).
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, RichLog, Static

from boo_engine.api import IMPROVED, KERNEL_FAILED, KernelTuned, TunedKernel, TuneLog, TuneUpdate

from ..messages import TuneEventPosted, TuneFinished
from ..plots import MAX_HZ, PlotView, Series
from ..run_model import shape_label
from ..tune_run import TuneRun

COLUMNS = [("n", "#"), ("kernel", "kernel"), ("stage", "stage"), ("compiled", "compiled"), ("failed", "failed"),
           ("measured", "measured"), ("best", "best"), ("changes", "what it changes")]


@dataclass
class KernelRow:
    """What the table shows of one kernel: its last TuneUpdate, then its outcome."""

    update: TuneUpdate
    outcome: TunedKernel | None = None

    @property
    def func_name(self) -> str:
        return self.update.func_name

    def cells(self) -> dict[str, Text | str]:
        u, k = self.update, self.outcome
        op = u.command.split()[0] if u.command else ""
        stage: Text | str = u.stage
        best = _ratio(u.best_ratio)
        changes = u.best or u.message or ""
        if k is not None:
            if k.status == IMPROVED and k.ratio is not None:
                stage = Text("done: faster", style="green")
                ci = f" [{k.ci_low:.3f}, {k.ci_high:.3f}]" if k.ci_low is not None and k.ci_high is not None else ""
                best = Text(f"{k.ratio:.3f}x{ci}", style="bold green")
                changes = k.best.description if k.best is not None else changes
            else:
                stage = Text("failed" if k.status == KERNEL_FAILED else "done: kept", style="yellow")
                changes = k.message or k.status
        return {"n": f"{u.index}/{u.total}", "kernel": f"{op} {shape_label(u.command)}".strip() or u.func_name,
                "stage": stage, "compiled": str(u.compiled), "failed": str(u.failed), "measured": str(u.measured),
                "best": best, "changes": changes}


def _ratio(r: float | None) -> Text:
    if r is None:
        return Text("-", style="dim")
    return Text(f"{r:.3f}x", style="green" if r < 1.0 else "dim")


class TuneScreen(Screen):
    """The live view of one tune (`run`, started when the screen mounts)."""

    BINDINGS = [Binding("escape", "close", "Close (stops a running tune)")]

    def __init__(self, tune_run: TuneRun, what: str, stop: Callable[[], None]) -> None:
        super().__init__(id="tune")
        self.tune_run = tune_run
        self.what = what
        self._stop = stop    # closing the screen while the tune runs stops it (in a worker of the dashboard)
        self.rows: dict[str, KernelRow] = {}
        self.selected: str | None = None
        self._plot_stale = True
        self.plot_updates = 0        # how often the histogram's data was handed to the plot (tests check it)

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(f"tuning {self.what}: starting...", id="tune-status", classes="hint")
        yield DataTable(id="tune-kernels", cursor_type="row", zebra_stripes=True)
        yield PlotView("histogram", id="tune-hist", empty="the selected kernel's leader and baseline appear here")
        yield RichLog(id="tune-log", wrap=True, markup=False, max_lines=500)
        yield Footer()

    def on_mount(self) -> None:
        self.title = "boo-tui: tune"
        table = self.query_one(DataTable)
        for key, label in COLUMNS:
            table.add_column(label, key=key)
        table.focus()
        self.set_interval(1.0 / MAX_HZ, self._refresh_plot)
        self.tune_run.start(self)
        s = self.tune_run.settings
        self._status(f"tuning {self.what} on {s.target}, {s.budget} candidates per kernel, into {s.out_dir}. "
                     "The dashboard's runs wait until it ends; Esc stops it (resumable).")

    # ---- the tuner's news -----------------------------------------------------------------------------------
    def on_tune_event_posted(self, message: TuneEventPosted) -> None:
        event = message.event
        if isinstance(event, TuneUpdate):
            row = self.rows.get(event.func_name)
            if row is None:
                self.rows[event.func_name] = row = KernelRow(event)
                cells = row.cells()
                self.query_one(DataTable).add_row(*[cells[k] for k, _ in COLUMNS], key=event.func_name)
                if self.selected is None:
                    self.selected = event.func_name
                self._count()
            else:
                if (row.update.leader_job, row.update.baseline_job) != (event.leader_job, event.baseline_job):
                    self._plot_stale = self._plot_stale or event.func_name == self.selected
                row.update = event
                self._update_row(row)
            if event.message and event.stage != "done":
                self._log(f"{event.func_name} {event.stage}: {event.message}")
        elif isinstance(event, KernelTuned):
            row = self.rows.get(event.kernel.func_name)
            if row is not None:
                row.outcome = event.kernel
                self._update_row(row)
            k = event.kernel
            self._log(f"[{event.index}/{event.total}] {k.func_name}: {k.message or k.status}")
        elif isinstance(event, TuneLog):
            self._log(f"{event.level}: {event.message}")

    def on_tune_finished(self, message: TuneFinished) -> None:
        where = f"tune {message.tune_id} in {message.db_path}" if message.tune_id is not None else ""
        if message.error:
            self._status(f"tune failed: {message.error}", style="bold red")
            self._log(f"error: {message.error}")
        elif message.stopped:
            self._status(f"stopped; {where}: boo-tui tune --resume {message.tune_id} --db {message.db_path} "
                         "continues it")
        else:
            improved = sum(1 for r in self.rows.values() if r.outcome is not None and r.outcome.status == IMPROVED)
            self._status(f"done: {improved} of {len(self.rows)} kernels faster; {where}. Wrote "
                         + ", ".join(message.paths) + ".  Esc closes.", style="bold")
            for p in message.paths:
                self._log(f"wrote {p}")

    def _update_row(self, row: KernelRow) -> None:
        table = self.query_one(DataTable)
        cells = row.cells()
        for key, _ in COLUMNS:
            with contextlib.suppress(Exception):     # a cell of a row not added yet
                table.update_cell(row.func_name, key, cells[key], update_width=True)
        self._count()

    def _count(self) -> None:
        done = sum(1 for r in self.rows.values() if r.outcome is not None)
        self.sub_title = f"{done}/{len(self.rows)} kernels tuned"

    # ---- the histogram --------------------------------------------------------------------------------------
    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        if event.row_key is not None and event.row_key.value and event.row_key.value != self.selected:
            self.selected = event.row_key.value
            self._plot_stale = True

    def _refresh_plot(self) -> None:
        """At most MAX_HZ times a second: hand the plot the selected kernel's leader and baseline samples when
        they (or the selection, or the leader) changed."""
        changed = self.tune_run.take_changed()
        row = self.rows.get(self.selected or "")
        if row is None:
            return
        u = row.update
        if not self._plot_stale and not changed & {u.leader_job, u.baseline_job}:
            return
        self._plot_stale = False
        series = [Series("baseline", self.tune_run.samples(u.baseline_job))]
        if u.leader_job and u.leader_job != u.baseline_job:
            label = f"leader {u.best_ratio:.3f}x" if u.best_ratio is not None else "leader"
            series.append(Series(label, self.tune_run.samples(u.leader_job)))
        self.plot_updates += 1
        self.query_one(PlotView).set_series([s for s in series if s.samples_us], title=u.func_name)

    # ---- closing --------------------------------------------------------------------------------------------
    def action_close(self) -> None:
        if self.tune_run.active:
            self._stop()
        self.app.pop_screen()

    def _status(self, text: str, style: str = "") -> None:
        self.query_one("#tune-status", Static).update(Text(text, style=style))

    def _log(self, line: str) -> None:
        self.query_one("#tune-log", RichLog).write(line)
