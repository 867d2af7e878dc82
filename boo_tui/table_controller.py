"""The live results table, the filter line and the selected job's plots and details: the dashboard's part that
turns the `RunModel` into what the screen shows, a few times a second, and owns what that needs (the filter, the
sort, the selection, which rows changed).

Changed rows are collected as events arrive (`mark`) and redrawn together every TABLE_FLUSH_S (`flush`); a table
that is filtered or sorted is rebuilt at most every RESORT_S (rows may join, leave or move). A commands file with
weights (`# boo-tui:` lines) adds the share and calls columns, makes share (descending) the default order, and
shows the engine's model line above the table (`Session.model_lines`, asked for on the engine thread at most every
MODEL_LINE_S while results settle). The engine's verdicts for commands it sent none for are asked for here too.
The app's message handlers call in; the controller queries the app's widgets and calls the engine through the
`EngineClient`.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import App
from textual.widgets import Static

from boo_engine.api import FINAL_STATUSES, Comparison, JobResult, ModelLine, Status, describe_model_line
from boo_engine.api import events as ev

from .bridge import EventBridge
from .cells import COLUMN_WIDTHS, VERDICT_STYLE, Filter, columns, ordered, row_cells
from .detail import render_detail, reproducer_text
from .engine_client import EngineClient
from .layout import RESULTS
from .messages import ComparisonsComputed, ModelLinesComputed
from .plots import PlotView, Series
from .run_model import JobView, RunModel
from .table import ResultsTable
from .table_lines import Cell

if TYPE_CHECKING:
    from boo_engine.api import SessionConfig

#: the selected job as its detail pane was drawn: job id, status, status detail, result object, log lines, measured
#: or not, comparison object (ids: a new object is new content)
_DetailStamp = tuple[str, str, str | None, int, int, bool, int]

TABLE_FLUSH_S = 0.1      # dirty table rows are redrawn at most this often
RESORT_S = 1.0           # a live-updated sorted table is re-sorted at most this often
#: sort columns whose values never change while a job runs: a table sorted by one is never re-sorted for an update
#: (sorting by share is the default for a captured model)
STATIC_SORT_KEYS = frozenset({None, "cmd", "op", "shape", "share", "calls", "variant", "backend", "kernel"})
MODEL_LINE_S = 1.0       # the model line is recomputed at most this often (a bootstrap over every weighted kernel)
#: the header's counts change at most this often: a new sub-title is a layout of the whole screen in Textual (15-30
#: ms of the event loop on a loaded 2-core host), and while a file's jobs arrive or compiles start it changes every
#: flush
SUBTITLE_S = 0.5


class TableController:
    """Table, filter, sort, selection, plots and detail pane of the dashboard `app`, drawn from `model` as
    `bridge` hands the engine's events over; `report` shows an error (the Log, a toast)."""

    def __init__(self, app: App[int], engine: EngineClient, model: RunModel, bridge: EventBridge, *,
                 report: Callable[[str], None]) -> None:
        self.app = app
        self.engine = engine
        self.model = model
        self.bridge = bridge
        self._report = report
        self.filter = Filter()
        self.sort_by: str | None = None
        self.sort_reverse = False
        self.selected: str | None = None
        self.max_flush_s = 0.0      # slowest table/plot/detail refresh (benchmarks report it)
        self._dirty: set[str] = set()
        self.shown: set[str] = set()   # job ids the table shows (kept by `rebuild`: no per-event scan)
        self._rebuild = False
        self._last_resort = 0.0
        #: what the detail pane was last drawn for (`_DetailStamp`): drawn again when that changes
        self._detail_for: _DetailStamp | None = None
        self._weights_seen = False
        self._model_line_asked = -1       # the model's version the last model line was asked for
        self._model_line_at = 0.0
        self._model_line_busy = False
        self._subtitle_stale = False
        self._subtitle_at = 0.0

    @property
    def table(self) -> ResultsTable:
        return self.app.query_one(f"#{RESULTS}", ResultsTable)

    @property
    def columns(self) -> list[tuple[str, str]]:
        """(key, label) of the table's columns: the weight columns only for a file with weights, the device
        column only once results came from several devices; the ratios are "vs boo" where the run's baseline is
        BOO's build (the legend in the Log says what the columns are)."""
        base = "boo" if self.engine.config.build == "boo" else "base"
        return columns(self.model.weighted, len(self.model.devices) > 1, base)

    def mounted(self) -> None:
        """The widgets exist: the table's first columns, the focus on it; the model line hidden until weights come."""
        self.table.set_columns(self.columns, COLUMN_WIDTHS)
        self.app.query_one("#model-line", Static).display = False
        self.table.focus()

    # ---- rows --------------------------------------------------------------------------------------------
    def settled(self) -> bool:
        """Every engine event applied and the table up to date with them (tests wait for this before looking)."""
        return self.bridge.idle() and not self._rebuild and not self._dirty

    def apply(self, event: ev.Event) -> None:
        """An engine event: the model changes, and the rows it names are drawn again at the next flush."""
        if isinstance(event, ev.SamplesAdded):   # the one flood while a kernel is measured: no more than this
            view = self.model.jobs.get(event.job_id or "")
            if view is not None:
                self.model.add_samples(view, event.samples_us, event.total, event.target_count)
                self._dirty.add(view.job_id)
            return
        self._dirty |= self.model.apply(event)
        if isinstance(event, ev.JobQueued) and event.result is not None and event.result.job_id not in self.shown:
            self._rebuild = True       # a job the table does not show yet: the rows are ordered again
        if isinstance(event, (ev.RunStarted, ev.RunFinished, ev.JobFinished, ev.JobQueued, ev.JobStatus)):
            self._subtitle_stale = True   # counted at the next flush: counting per event was O(jobs^2) on a load

    def add_results(self, results: Iterable[JobResult]) -> None:
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

    def flush(self) -> None:
        """Bring the table, the plots and the detail pane up to date (runs every TABLE_FLUSH_S)."""
        t0 = time.perf_counter()
        if self._subtitle_stale and time.monotonic() - self._subtitle_at >= SUBTITLE_S:
            self._subtitle_stale = False
            self._subtitle_at = time.monotonic()
            self.app.sub_title = subtitle_of(self.model)
        try:
            self._flush_dirty()
        except Exception as e:  # noqa: BLE001 - a refresh bug is shown, and the next flush tries again
            self._report(f"refresh failed: {type(e).__name__}: {e}")
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
            self._rebuild = "device" not in self.table.columns
        if dirty:   # the model says which rows an event changed (the engine's verdicts for a command: all of its
            self.table.invalidate(dirty)   # rows): those on screen are drawn again, the others re-measured
        if self._rebuild:
            self.rebuild()
            self._last_resort = now
        if dirty or self._detail_for is None:
            self._refresh_selection(dirty)

    def rebuild(self) -> None:
        """Order (and filter) the rows again: the table keeps the cursor on the selected job when it is still shown,
        and draws only the rows on screen (their cells come from `row_cells`)."""
        self._rebuild = False
        table = self.table
        keep = self.selected
        views = ordered(self.model, self.filter, self.sort_by, self.sort_reverse)
        wanted = self.columns
        if list(table.columns) != [k for k, _ in wanted]:
            table.set_columns(wanted, COLUMN_WIDTHS)
        table.set_rows([v.job_id for v in views], cursor_key=keep)
        self.shown = set(table.keys)
        if views and (keep is None or keep not in self.shown):
            self.select(views[0].job_id)
        self._label_sorted_column()

    def row_cells(self, job_id: str) -> dict[str, Cell]:
        """A row's cells, when the table draws or measures it."""
        return row_cells(self.model, self.model.jobs[job_id])

    # ---- the engine's verdicts -------------------------------------------------------------------------
    def ask_for_verdicts(self) -> None:
        """The session sends its verdicts for a command when a batch measured several of its jobs together;
        for the others (a job re-run on its own, a variant added after its baseline ran, a resumed run) ask it
        for them, on the engine thread: `Session.comparisons` is what the exports call."""
        unanswered = self.model.unanswered()
        session = self.engine.session
        if not unanswered or session is None:
            return
        results = [r for _, rs in unanswered.values() for r in rs]
        generations = {key: generation for key, (generation, _) in unanswered.items()}
        self.engine.call(session.comparisons, results, what="verdicts: ",
                         reply=lambda comparisons: ComparisonsComputed(comparisons, generations))

    def verdicts_computed(self, message: ComparisonsComputed) -> None:
        by_key: dict[tuple[str, str], dict[str, Comparison]] = {key: {} for key in message.generations}
        for (target, command, label), c in message.comparisons.items():
            by_key.setdefault((target, command), {})[label] = c
        for key, generation in message.generations.items():
            self._dirty |= self.model.set_comparisons(key, by_key[key], generation)

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
        bar = self.app.query_one("#model-line", Static)
        bar.update(Text("model: sum of calls x median appears as results come in", style="dim"))
        bar.display = True

    def _ask_for_model_line(self, now: float) -> None:
        """Ask the engine for the model lines when results settled or verdicts arrived since the last ask (one
        ask in flight, at most every MODEL_LINE_S)."""
        session = self.engine.session
        if (session is None or self._model_line_busy or self._model_line_asked == self.model.version
                or now - self._model_line_at < MODEL_LINE_S):
            return
        self._model_line_asked = self.model.version
        self._model_line_at = now
        self._model_line_busy = True
        results, comparisons = [v.result for v in self.model.jobs.values()], self.model.all_comparisons()

        def compute() -> ModelLinesComputed:   # engine thread; an error comes back too, so the next ask goes out
            try:
                return ModelLinesComputed(session.model_lines(results, comparisons))
            except Exception as e:  # noqa: BLE001 - shown in the bar
                return ModelLinesComputed([], error=f"{type(e).__name__}: {e}")

        self.engine.call(compute, reply=lambda message: message)

    def model_lines_computed(self, message: ModelLinesComputed) -> None:
        self._model_line_busy = False
        bar = self.app.query_one("#model-line", Static)
        bar.update(Text(f"model line: {message.error}", style="red") if message.error
                   else model_line_text(message.lines))

    # ---- sorting and filtering ---------------------------------------------------------------------------
    def _label_sorted_column(self) -> None:
        arrow = " v" if self.sort_reverse else " ^"
        self.table.set_labels({key: label + (arrow if key == self.sort_by else "") for key, label in self.columns})

    def sort_by_column(self, key: str) -> None:
        """A header clicked: sort by it, or reverse the order when it is the sort column already."""
        if key == self.sort_by:
            self.sort_reverse = not self.sort_reverse
        else:
            self.sort_by, self.sort_reverse = key, False
        self.rebuild()

    def sort_next(self) -> str:
        """Sort by the next column; its label."""
        keys = [k for k, _ in self.columns]
        self.sort_by = keys[(keys.index(self.sort_by) + 1) % len(keys)] if self.sort_by in keys else keys[0]
        self.sort_reverse = False
        self.rebuild()
        return dict(self.columns)[self.sort_by]

    def filter_changed(self, text: str) -> None:
        self.filter = Filter.parse(text)
        self.rebuild()

    # ---- selection: plots and detail ---------------------------------------------------------------------
    def select(self, job_id: str) -> None:
        if job_id != self.selected:
            self.selected = job_id
            self._detail_for = None
            self._refresh_selection({job_id})

    def selected_view(self) -> JobView | None:
        return self.model.jobs.get(self.selected or "")

    def _refresh_selection(self, dirty: set[str]) -> None:
        view = self.selected_view()
        if view is None:
            return
        app = self.app
        siblings = self.model.siblings(view.job_id)
        if dirty & {s.job_id for s in siblings} or self._detail_for is None:
            series = [Series(s.series_label, tuple(s.samples_us)) for s in siblings]
            title = view.result.func_name
            app.query_one("#hist", PlotView).set_series(series, title)
            app.query_one("#timeline", PlotView).set_series(series, title)
        comparison = self.model.comparison_of(view)
        stamp = (view.job_id, view.status, view.detail, id(view.result), len(view.log),
                 view.result.stats is not None, id(comparison))
        if stamp != self._detail_for:
            self._detail_for = stamp
            app.query_one("#detail", Static).update(render_detail(view, comparison, self.engine.config.min_effect))
            repro = reproducer_text(view)
            app.query_one("#repro", Static).update(
                Text.assemble(("\nreproducer ", "bold"), ("(c copies)\n", "dim"), repro) if repro else "")


def subtitle_of(model: RunModel) -> str:
    """The header's line: the run, how many jobs finished, how many failed."""
    counts = model.counts()
    parts = [f"run {model.run_id} {model.run_status}"] if model.run_id is not None else []
    parts.append(f"{sum(counts.get(s, 0) for s in FINAL_STATUSES)}/{len(model.jobs)} finished")
    parts += [f"{counts[Status.FAILED]} failed"] if counts.get(Status.FAILED) else []
    return "  ".join(parts)


def columns_legend(config: SessionConfig) -> str | None:
    """What the run's IREE columns are, for the Log (the table's "vs boo" header points at it)."""
    names = [v.name for v in config.variants]
    parts = []
    if config.build == "boo" and "baseline" in names:
        parts.append("baseline = boo: each kernel as iree-turbine's BOO builds it (its export, BOO's flags); "
                     "every ratio is vs boo")
    if "best" in names:
        parts.append("best = the best known configuration of each kernel for this machine (detail pane: what "
                     "chose it)")
    return "columns: " + "; ".join(parts) if parts else None


def model_line_text(lines: list[ModelLine]) -> Text:
    """The model line bar: each column's line as the engine describes it, coloured by its verdict."""
    text = Text("model ", style="bold")
    for i, line in enumerate(lines):
        if i:
            text.append(" · ", style="dim")
        text.append(describe_model_line(line), style=VERDICT_STYLE.get(line.verdict, "") if line.verdict else "")
    return text
