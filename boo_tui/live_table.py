"""The live results table, the filter line and the selected job's plots and details: the part of `BooApp` that
turns the `RunModel` into what the screen shows, a few times a second.

Changed rows are collected in `_dirty` as events arrive and redrawn together every TABLE_FLUSH_S; a table that is
filtered or sorted is rebuilt at most every RESORT_S (rows may join, leave or move). A commands file with weights
(`# boo-tui:` lines) adds the share and calls columns, makes share (descending) the default order, and shows the
engine's model line above the table (`Session.model_lines`, asked for on the engine thread at most every
MODEL_LINE_S while results settle). Handlers here are named ones
(`on_results_table_...`) checking the widget's id: Textual's `@on` decorator only works in message-pump classes.
"""
from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import events
from textual.widgets import Input, Static

from boo_engine.api import JobResult, ModelLine, describe_model_line

from .cells import COLUMN_WIDTHS, VERDICT_STYLE, Filter, columns, ordered, row_cells
from .detail import render_detail, reproducer_text
from .messages import ModelLinesComputed
from .plots import PlotView, Series
from .run_model import JobView, RunModel
from .table import ResultsTable

if TYPE_CHECKING:
    from textual.app import App

    from .bridge import EventBridge

    _AppBase = App[int]
else:
    _AppBase = object

TABLE_FLUSH_S = 0.1      # dirty table rows are redrawn at most this often
RESORT_S = 1.0           # a live-updated sorted table is re-sorted at most this often
RESULTS = "results"      # the results table's id
#: sort columns whose values never change while a job runs: a table sorted by one is never re-sorted for an update
#: (sorting by share is the default for a captured model)
STATIC_SORT_KEYS = frozenset({None, "cmd", "op", "shape", "share", "calls", "variant", "backend", "kernel"})
MODEL_LINE_S = 1.0       # the model line is recomputed at most this often (a bootstrap over every weighted kernel)
#: the header's counts change at most this often: a new sub-title is a layout of the whole screen in Textual (15-30
#: ms of the event loop on a loaded 2-core host), and while a file's jobs arrive or compiles start it changes every
#: flush
SUBTITLE_S = 0.5


class LiveTableMixin(_AppBase):
    """Table, filter, sort, selection, plots and detail pane of the dashboard (a part of `BooApp`)."""

    model: RunModel
    filter: Filter
    sort_by: str | None
    sort_reverse: bool
    selected: str | None
    bridge: EventBridge
    max_flush_s: float
    _dirty: set[str]
    _shown: set[str]
    _rebuild: bool
    _last_resort: float
    _detail_for: tuple[Any, ...] | None

    if TYPE_CHECKING:
        @property
        def min_effect(self) -> float: ...
    session: Any
    _weights_seen: bool = False
    _model_line_asked: int = -1          # the model's version the last model line was asked for
    _model_line_at: float = 0.0
    _model_line_busy: bool = False

    _subtitle_stale: bool
    _subtitle_at: float = 0.0

    if TYPE_CHECKING:
        def _error(self, message: str) -> None: ...
        def _update_subtitle(self) -> None: ...
        def _call_engine(self, fn: Any, *args: Any, reply: Any = None, what: str = "") -> None: ...

    @property
    def table_columns(self) -> list[tuple[str, str]]:
        """(key, label) of the table's columns: the weight columns only for a file with weights, the device
        column only once results came from several devices; the ratios are "vs boo" where the run's baseline is
        BOO's build (the legend in the Log says what the columns are)."""
        base = "boo" if getattr(getattr(self, "config", None), "build", None) == "boo" else "base"
        return columns(self.model.weighted, len(self.model.devices) > 1, base)

    # ---- rows --------------------------------------------------------------------------------------------
    def settled(self) -> bool:
        """Every engine event applied and the table up to date with them (tests wait for this before looking)."""
        return self.bridge.idle() and not self._rebuild and not self._dirty

    def _row_keys(self) -> set[str]:
        """Job ids shown in the table (kept by _rebuild_table, so no per-event scan of the rows)."""
        return self._shown

    def _add_results(self, results: Iterable[JobResult]) -> None:
        """Jobs a session call added (their `JobQueued` events, applied already, carry the same records: those are
        skipped, which for 20,000 lines was 80-120 ms of one handler)."""
        jobs = self.model.jobs
        for r in results:
            view = jobs.get(r.job_id)
            if view is not None and view.result is r:
                continue
            self.model.upsert(r)
            self._dirty.add(r.job_id)
        self._rebuild = True

    def _flush_views(self) -> None:
        """Bring the table, the plots and the detail pane up to date (runs every TABLE_FLUSH_S)."""
        t0 = time.perf_counter()
        if self._subtitle_stale and time.monotonic() - self._subtitle_at >= SUBTITLE_S:
            self._subtitle_stale = False
            self._subtitle_at = time.monotonic()
            self._update_subtitle()
        try:
            self._flush_dirty()
        except Exception as e:  # noqa: BLE001 - a refresh bug is shown, and the next flush tries again
            self._error(f"refresh failed: {type(e).__name__}: {e}")
        self.max_flush_s = max(self.max_flush_s, time.perf_counter() - t0)

    def _flush_dirty(self) -> None:
        dirty, self._dirty = self._dirty, set()
        now = time.monotonic()
        if self.model.weighted:
            self._weights_arrived()
            self._ask_for_model_line(now)
        # re-sorting orders the job ids again (~5 ms for 2,000 on a loaded host; the table draws the rows on screen)
        if (dirty and (self.filter.active or self.sort_by not in STATIC_SORT_KEYS)
                and now - self._last_resort >= RESORT_S):
            self._rebuild = True    # a status or a median changed: rows may join, leave or move
        if dirty and len(self.model.devices) > 1 and not self._rebuild:   # a second device: its column appears
            self._rebuild = "device" not in self.query_one(f"#{RESULTS}", ResultsTable).columns
        if dirty:
            self._update_rows(dirty)
        if self._rebuild:
            self._rebuild_table()
            self._last_resort = now
        if dirty or self._detail_for is None:
            self._refresh_selection(dirty)

    def _rebuild_table(self) -> None:
        """Order (and filter) the rows again: the table keeps the cursor on the selected job when it is still shown,
        and draws only the rows on screen (their cells come from `_row_cells`)."""
        self._rebuild = False
        table = self.query_one(f"#{RESULTS}", ResultsTable)
        keep = self.selected
        views = ordered(self.model, self.filter, self.sort_by, self.sort_reverse)
        wanted = self.table_columns
        if list(table.columns) != [k for k, _ in wanted]:
            table.set_columns(wanted, COLUMN_WIDTHS)
        table.set_rows([v.job_id for v in views], cursor_key=keep)
        self._shown = set(table.keys)
        if views and (keep is None or keep not in self._shown):
            self._select(views[0].job_id)
        self._label_sorted_column()

    def _row_cells(self, job_id: str) -> dict[str, Any]:
        """A row's cells, when the table draws or measures it."""
        return row_cells(self.model, self.model.jobs[job_id])

    def _update_rows(self, ids: set[str]) -> None:
        """The given jobs changed (the model says which rows an event changed: the engine's verdicts for a command
        change all of its rows): the table draws those on screen again and re-measures the others."""
        self.query_one(f"#{RESULTS}", ResultsTable).invalidate(ids)

    # ---- weights: the share and calls columns, the model line ---------------------------------------------
    def _weights_arrived(self) -> None:
        """The first weighted command: show its columns, sort by share (largest first) unless the user chose an
        order, and show the model line's bar."""
        if self._weights_seen:
            return
        self._weights_seen = True
        if self.sort_by is None:
            self.sort_by, self.sort_reverse = "share", True
        self._rebuild = True
        bar = self.query_one("#model-line", Static)
        bar.update(Text("model: sum of calls x median appears as results come in", style="dim"))
        bar.display = True

    def _ask_for_model_line(self, now: float) -> None:
        """Ask the engine for the model lines when results settled or verdicts arrived since the last ask (one
        ask in flight, at most every MODEL_LINE_S)."""
        if (self.session is None or self._model_line_busy or self._model_line_asked == self.model.version
                or now - self._model_line_at < MODEL_LINE_S):
            return
        self._model_line_asked = self.model.version
        self._model_line_at = now
        self._model_line_busy = True
        session, results, comparisons = self.session, [v.result for v in self.model.jobs.values()], \
            self.model.all_comparisons()

        def compute() -> ModelLinesComputed:   # engine thread; an error comes back too, so the next ask goes out
            try:
                return ModelLinesComputed(session.model_lines(results, comparisons))
            except Exception as e:  # noqa: BLE001 - shown in the bar
                return ModelLinesComputed([], error=f"{type(e).__name__}: {e}")

        self._call_engine(compute, reply=lambda message: message)

    def on_model_lines_computed(self, message: ModelLinesComputed) -> None:
        self._model_line_busy = False
        bar = self.query_one("#model-line", Static)
        bar.update(Text(f"model line: {message.error}", style="red") if message.error
                   else model_line_text(message.lines))

    # ---- sorting and filtering ---------------------------------------------------------------------------
    def _label_sorted_column(self) -> None:
        arrow = " v" if self.sort_reverse else " ^"
        self.query_one(f"#{RESULTS}", ResultsTable).set_labels(
            {key: label + (arrow if key == self.sort_by else "") for key, label in self.table_columns})

    def on_results_table_row_highlighted(self, event: ResultsTable.RowHighlighted) -> None:
        if event.table.id == RESULTS:
            self._select(event.key)

    def on_results_table_row_selected(self, event: ResultsTable.RowSelected) -> None:
        """Enter on a row: its detail (the row is the selected job already, by highlighting it)."""
        if event.table.id == RESULTS:
            self._select(event.key)
            self.action_show_pane("detail")  # type: ignore[attr-defined]  # (the app's, from actions.py)

    def on_results_table_header_selected(self, event: ResultsTable.HeaderSelected) -> None:
        if event.table.id != RESULTS:
            return
        key = event.key
        if key == self.sort_by:
            self.sort_reverse = not self.sort_reverse
        else:
            self.sort_by, self.sort_reverse = key, False
        self._rebuild_table()

    def action_sort(self) -> None:
        keys = [k for k, _ in self.table_columns]
        self.sort_by = keys[(keys.index(self.sort_by) + 1) % len(keys)] if self.sort_by in keys else keys[0]
        self.sort_reverse = False
        self.notify(f"sorted by {dict(self.table_columns)[self.sort_by]} (click a header to sort; again to reverse)",
                    timeout=2)
        self._rebuild_table()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter":
            self.filter = Filter.parse(event.value)
            self._rebuild_table()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            self.query_one(f"#{RESULTS}", ResultsTable).focus()

    def action_focus_filter(self) -> None:
        self.query_one("#filter", Input).focus()

    def on_key(self, event: events.Key) -> None:
        if event.key == "escape" and self.focused is self.query_one("#filter", Input):
            self.query_one(f"#{RESULTS}", ResultsTable).focus()
            event.stop()

    # ---- selection: plots and detail ---------------------------------------------------------------------
    def _select(self, job_id: str) -> None:
        if job_id != self.selected:
            self.selected = job_id
            self._detail_for = None
            self._refresh_selection({job_id})

    def _selected_view(self) -> JobView | None:
        return self.model.jobs.get(self.selected or "")

    def _refresh_selection(self, dirty: set[str]) -> None:
        view = self._selected_view()
        if view is None:
            return
        siblings = self.model.siblings(view.job_id)
        if dirty & {s.job_id for s in siblings} or self._detail_for is None:
            series = [Series(s.series_label, tuple(s.samples_us)) for s in siblings]
            title = view.result.func_name
            self.query_one("#hist", PlotView).set_series(series, title)
            self.query_one("#timeline", PlotView).set_series(series, title)
        comparison = self.model.comparison_of(view)
        stamp = (view.job_id, view.status, view.detail, id(view.result), len(view.log),
                 view.result.stats is not None, id(comparison))
        if stamp != self._detail_for:
            self._detail_for = stamp
            self.query_one("#detail", Static).update(render_detail(view, comparison, self.min_effect))
            repro = reproducer_text(view)
            self.query_one("#repro", Static).update(
                Text.assemble(("\nreproducer ", "bold"), ("(c copies)\n", "dim"), repro) if repro else "")


def model_line_text(lines: list[ModelLine]) -> Text:
    """The model line bar: each column's line as the engine describes it, coloured by its verdict."""
    text = Text("model ", style="bold")
    for i, line in enumerate(lines):
        if i:
            text.append(" · ", style="dim")
        text.append(describe_model_line(line), style=VERDICT_STYLE.get(line.verdict, "") if line.verdict else "")
    return text
