"""The boo-tui dashboard: a live results table, latency plots, the details of one kernel, and actions.

Threading (the one rule that keeps the dashboard responsive): the UI thread never compiles, exports, measures,
reads files or writes the DB. The `Session` does its work on its own threads and reports through its listener,
which only posts messages (`bridge.EventBridge`). Calls into the session run on one `engine` thread of our own
(so they keep their order and never block the event loop); their results come back as `Deferred` messages.
"""
from __future__ import annotations

import asyncio
import gc
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterable

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.containers import Vertical, VerticalScroll
from textual.widgets import DataTable, Footer, Header, Input, RichLog, Static, TabbedContent, TabPane

from boo_engine import events as ev
from boo_engine.errors import BooError, one_line
from boo_engine.results import FINAL_STATUSES, QUEUED
from boo_engine.session import Session, warm_imports

# The engine imports torch only when it must (the headless front end never does over cached kernels), but a
# session with a UI may need it mid-run (the reproducer inputs of a newly compiled kernel), and importing torch
# then, in an engine thread, would hold the GIL (C extension initialisation) and freeze the UI for ~1 s. So the
# dashboard pays for it here, before its first frame.
import torch  # noqa: E402,F401

from . import dialogs
from .bridge import Deferred, EngineEvent, EventBridge, SamplesReady
from .detail import render_detail, reproducer_text
from .model import COLUMNS, Filter, JobView, RunModel, ordered, row_cells
from .plots import PlotView, Series
from .table import ResultsTable

TABLE_FLUSH_S = 0.1      # dirty table rows are redrawn at most this often
RESORT_S = 1.0           # a live-updated sorted table is re-sorted at most this often

#: (action, title, help) of every action, for the command palette.
PALETTE: list[tuple[str, str, str]] = [
    ("run_all", "Run all", "Compile and measure every queued job"),
    ("run_selected", "Run selected", "Run the job under the cursor (re-run it if it finished)"),
    ("rerun", "Re-run selected", "Measure the selected job again"),
    ("rerun_all", "Re-run all finished", "Measure every finished job again"),
    ("cancel", "Cancel selected", "Cancel the job under the cursor"),
    ("cancel_all", "Cancel all", "Cancel every queued or running job"),
    ("add_command", "Add a command", "Type a MIOpenDriver command line (validated as you submit)"),
    ("load_file", "Load a commands file", "Add every command of a .txt/.tsv commands file"),
    ("add_variant", "Add a variant", "A tuning spec (.mlir) or compiler flags, compared against the baseline"),
    ("export", "Export results", "Write the results as .csv, .json or .md"),
    ("history", "History", "Past runs in the results database; open or compare two"),
    ("compare", "Compare variants", "Commands x variants ratios and overlaid histograms"),
    ("copy_repro", "Copy reproducer", "Copy the selected job's reproducer command to the clipboard"),
    ("sort", "Sort by next column", "Cycle the results table's sort column"),
    ("focus_filter", "Filter", "Filter rows: op:conv status:failed free text"),
]


class BooCommands(Provider):
    """Every dashboard action in the command palette (ctrl+p)."""

    def _commands(self) -> Iterable[tuple[str, str, Callable[[], Any]]]:
        app = self.app
        for action, title, help_text in PALETTE:
            yield title, help_text, (lambda a=action: getattr(app, f"action_{a}")())

    async def discover(self) -> Hits:
        for title, help_text, callback in self._commands():
            yield DiscoveryHit(title, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, help_text, callback in self._commands():
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), callback, help=help_text)


class BooApp(App[int]):
    """The dashboard. `config` and `inputs` are what `boo-tui` was given; the session opens on mount."""

    CSS_PATH = "app.tcss"
    TITLE = "boo-tui"
    COMMANDS = App.COMMANDS | {BooCommands}
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (150, "-wide")]
    BINDINGS = [
        Binding("q", "quit", "Quit", priority=False),
        Binding("r", "run_all", "Run"),
        Binding("space", "run_selected", "Run sel.", show=False),
        Binding("R", "rerun", "Re-run", show=False),
        Binding("x", "cancel", "Cancel", show=False),
        Binding("X", "cancel_all", "Cancel all", show=False),
        Binding("a", "add_command", "Add"),
        Binding("o", "load_file", "Load file", show=False),
        Binding("v", "add_variant", "Variant", show=False),
        Binding("w", "export", "Export"),
        Binding("h", "history", "History"),
        Binding("m", "compare", "Compare"),
        Binding("c", "copy_repro", "Copy"),
        Binding("s", "sort", "Sort", show=False),
        Binding("slash", "focus_filter", "Filter"),
    ]

    def __init__(self, config: Any, inputs: list[str] | None = None, *, autostart: bool = True) -> None:
        super().__init__()
        self.config = config
        self.inputs = list(inputs or [])
        self.autostart = autostart
        self.session: Any = None
        self._created_session: Any = None
        self.session_error: str | None = None
        self.model = RunModel()
        self.bridge = EventBridge(self)
        self.filter = Filter()
        self.sort_by: str | None = None
        self.sort_reverse = False
        self.selected: str | None = None
        self._dirty: set[str] = set()
        self._shown: set[str] = set()
        self._last_warning = 0.0
        self._rebuild = False
        self._last_resort = 0.0
        self._detail_for: tuple | None = None
        self._engine = ThreadPoolExecutor(max_workers=1, thread_name_prefix="boo-tui-engine")
        self._quitting = False
        self.max_flush_s = 0.0      # slowest table/plot/detail refresh (benchmarks report it)
        _start_resource_tracker()

    # ---- layout ------------------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Header()
        yield Input(placeholder="filter: op:conv status:failed words...  (/ to focus, esc to leave)",
                    id="filter")
        with Vertical(id="body"):
            yield ResultsTable(id="results", cursor_type="row", zebra_stripes=True)
            with TabbedContent(id="panes"):
                with TabPane("Histogram", id="tab-hist"):
                    yield PlotView("histogram", id="hist", empty="select a job: its samples appear here")
                with TabPane("Samples", id="tab-timeline"):
                    yield PlotView("timeline", id="timeline", empty="samples over time appear here")
                with TabPane("Detail", id="tab-detail"):
                    with VerticalScroll(id="detail-scroll"):
                        yield Static("select a job", id="detail")
                        yield Static("", id="repro")
                with TabPane("Log", id="tab-log"):
                    yield RichLog(id="log", wrap=True, markup=False, max_lines=2000)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#results", DataTable)
        for key, label in COLUMNS:
            table.add_column(label, key=key)
        table.focus()
        self.sub_title = "opening session..."
        self.set_interval(TABLE_FLUSH_S, self._flush_views)
        _freeze_long_lived()
        self.set_interval(GC_FREEZE_S, _freeze_long_lived)
        self._opening = self._open_session()

    # ---- the session ------------------------------------------------------------------------------------
    @work(thread=True, group="session-open")
    def _open_session(self) -> None:
        """Create the session and add the inputs off the UI thread (opening the DB, reading files)."""
        try:
            warm_imports()
            _warm_plotext()
            session = Session(self.config, listener=self.bridge.listener)
        except Exception as e:  # noqa: BLE001 - a bad target or DB path is a message, not a traceback
            self.post_message(Deferred(self._session_failed, one_line(e)))
            return
        self._created_session = session      # so a quit during the opening still closes it
        added: list[Any] = []
        errors: list[str] = []
        for item in self.inputs:
            try:
                added += session.add_inputs([item])
            except Exception as e:  # noqa: BLE001
                errors.append(one_line(e))
        self.post_message(Deferred(self._session_opened, session, added, errors))

    def _session_failed(self, message: str) -> None:
        self.session_error = message
        self.sub_title = "no session"
        self._log_line("error", message)
        self.notify(message, title="cannot open the session", severity="error", timeout=15)

    def _session_opened(self, session: Any, added: list[Any], errors: list[str]) -> None:
        if self._quitting:
            return
        gc.freeze()  # the session's imports and objects are here for good (see _freeze_long_lived)
        self.session = session
        self._add_results(added)
        for msg in errors:
            self._log_line("error", msg)
            self.notify(msg, severity="error", timeout=10)
        target = getattr(getattr(session, "target", None), "name", None) or getattr(self.config, "target", "")
        self.title = f"boo-tui  {target}" if target else "boo-tui"
        self._update_subtitle()
        if self.autostart and any(v.status == QUEUED for v in self.model.jobs.values()):
            # Draw the queued table first: its first paint renders every visible cell (25-30 ms), and the
            # run's start-up (three processes importing torch on the host's cores) would stretch it 2-3x.
            self._flush_views()
            self.call_after_refresh(self._call_engine, session.start)

    def _call_engine(self, fn: Callable[..., Any], *args: Any, then: Callable[[Any], None] | None = None,
                     what: str = "") -> None:
        """Run a session call on the engine thread; errors become notifications, results go to `then`."""

        def task() -> None:
            try:
                value = fn(*args)
            except BooError as e:
                self.post_message(Deferred(self._error, f"{what}{e}"))
                return
            except Exception as e:  # noqa: BLE001
                self.post_message(Deferred(self._error, f"{what}{type(e).__name__}: {e}"))
                return
            if then is not None:
                self.post_message(Deferred(then, value))

        if self._quitting:
            return
        self._engine.submit(task)

    def _require_session(self) -> bool:
        if self.session is None:
            self.notify(self.session_error or "the session is still opening", severity="warning")
            return False
        return True

    # ---- messages from other threads ---------------------------------------------------------------------
    def on_deferred(self, message: Deferred) -> None:
        try:
            message.callback(*message.args)
        except Exception as e:  # noqa: BLE001 - never a traceback over the screen
            self._error(f"{type(e).__name__}: {e}")

    def on_engine_event(self, message: EngineEvent) -> None:
        event = message.event
        try:
            changed = self.model.apply(event)
        except Exception as e:  # noqa: BLE001
            self._error(f"bad event {type(event).__name__}: {e}")
            return
        if isinstance(event, (ev.JobQueued,)) and event.result is not None:
            if event.result.job_id not in self._row_keys():
                self._rebuild = True
        if isinstance(event, ev.JobStatus) and event.status == QUEUED:
            view = self.model.jobs.get(event.job_id or "")
            if view is not None:
                view.samples_us = []
                view.target_count = None
        if isinstance(event, ev.JobFinished) and event.result is not None and event.result.error:
            self._log_line("error", f"{event.result.func_name} [{event.result.variant}/{event.result.backend}]: "
                               f"{event.result.error}")
        elif isinstance(event, ev.Log):
            self._log_line(event.level, event.message)
            if event.level == "error":
                self.notify(event.message, severity="error")
            elif event.level == "warning" and time.monotonic() - self._last_warning > 10:
                # warnings can come per job (a noisy host): one toast per 10 s, all of them in the Log tab
                self._last_warning = time.monotonic()
                self.notify(event.message + "  (more in the Log tab)", severity="warning")
        elif isinstance(event, ev.RunStarted):
            self._log_line("info", f"run {event.run_id} started: {event.total_jobs} jobs")
        elif isinstance(event, ev.RunFinished):
            self._log_line("info", f"run {event.run_id} {event.status}: {event.ok} ok, {event.failed} failed")
            self.notify(f"run {event.run_id} {event.status}: {event.ok} ok, {event.failed} failed",
                        severity="information" if not event.failed else "warning")
        self._dirty |= changed
        if isinstance(event, (ev.RunStarted, ev.RunFinished, ev.JobFinished, ev.JobQueued, ev.JobStatus)):
            self._update_subtitle()

    def on_samples_ready(self, message: SamplesReady) -> None:
        for batch in self.bridge.drain():
            view = self.model.jobs.get(batch.job_id or "")
            if view is not None:
                self.model.add_samples(view, batch.samples_us, batch.total, batch.target_count)
                self._dirty.add(view.job_id)

    # ---- the table ---------------------------------------------------------------------------------------
    def _row_keys(self) -> set[str]:
        """Job ids shown in the table (kept by _rebuild_table, so no per-event scan of the rows)."""
        return self._shown

    def _add_results(self, results: Iterable[Any]) -> None:
        for r in results:
            self.model.upsert(r)
            self._dirty.add(r.job_id)
        self._rebuild = True

    def _flush_views(self) -> None:
        """Bring the table, the plots and the detail pane up to date (runs every TABLE_FLUSH_S)."""
        t0 = time.perf_counter()
        try:
            self._flush_dirty()
        except Exception as e:  # noqa: BLE001 - a refresh bug is shown, and the next flush tries again
            self._error(f"refresh failed: {type(e).__name__}: {e}")
        self.max_flush_s = max(self.max_flush_s, time.perf_counter() - t0)

    def _flush_dirty(self) -> None:
        dirty, self._dirty = self._dirty, set()
        now = time.monotonic()
        # re-sorting rebuilds the table (about 50 us a row): big tables are re-sorted less often
        resort_every = RESORT_S * max(1.0, len(self.model.jobs) / 500)
        if dirty and (self.filter.active or self.sort_by) and now - self._last_resort >= resort_every:
            self._rebuild = True    # a status or a median changed: rows may join, leave or move
        if self._rebuild:
            self._rebuild_table()
            self._last_resort = now
        elif dirty:
            self._update_rows(dirty)
        if dirty or self._detail_for is None:
            self._refresh_selection(dirty)

    def _rebuild_table(self) -> None:
        self._rebuild = False
        table = self.query_one("#results", DataTable)
        keep = self.selected
        views = ordered(self.model, self.filter, self.sort_by, self.sort_reverse)
        table.clear()
        for view in views:
            cells = row_cells(self.model, view)
            table.add_row(*[cells[k] for k, _ in COLUMNS], key=view.job_id)
        self._shown = {v.job_id for v in views}
        if keep is not None and keep in self._row_keys():
            table.move_cursor(row=table.get_row_index(keep), animate=False)
        elif views:
            self._select(views[0].job_id)
        self._label_sorted_column()

    def _update_rows(self, ids: set[str]) -> None:
        table = self.query_one("#results", ResultsTable)
        present = self._row_keys()
        for job_id in ids & present:
            cells = row_cells(self.model, self.model.jobs[job_id])
            table.update_row(job_id, {key: cells[key] for key, _ in COLUMNS})
        # a finished baseline changes its siblings' speedup column
        commands = {self.model.jobs[j].result.command for j in ids if j in self.model.jobs}
        for view in self.model.jobs.values():
            if view.job_id in present and view.job_id not in ids and view.result.command in commands:
                table.update_row(view.job_id, {"speedup": row_cells(self.model, view)["speedup"]})

    def _label_sorted_column(self) -> None:
        table = self.query_one("#results", DataTable)
        for key, label in COLUMNS:
            col = table.columns.get(key)  # type: ignore[call-overload]
            if col is None:
                continue
            arrow = (" v" if self.sort_reverse else " ^") if key == self.sort_by else ""
            col.label = Text(label + arrow)
        table.refresh()

    @on(DataTable.RowHighlighted, "#results")
    def _row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key is not None and event.row_key.value is not None:
            self._select(event.row_key.value)

    @on(DataTable.HeaderSelected, "#results")
    def _header_selected(self, event: DataTable.HeaderSelected) -> None:
        key = event.column_key.value
        if key == self.sort_by:
            self.sort_reverse = not self.sort_reverse
        else:
            self.sort_by, self.sort_reverse = key, False
        self._rebuild_table()

    def action_sort(self) -> None:
        keys = [k for k, _ in COLUMNS]
        self.sort_by = keys[(keys.index(self.sort_by) + 1) % len(keys)] if self.sort_by in keys else keys[0]
        self.sort_reverse = False
        self.notify(f"sorted by {dict(COLUMNS)[self.sort_by]} (click a header to sort; again to reverse)",
                    timeout=2)
        self._rebuild_table()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.filter = Filter.parse(event.value)
        self._rebuild_table()

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        self.query_one("#results", DataTable).focus()

    def action_focus_filter(self) -> None:
        self.query_one("#filter", Input).focus()

    def on_key(self, event) -> None:
        if event.key == "escape" and self.focused is self.query_one("#filter", Input):
            self.query_one("#results", DataTable).focus()
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
        stamp = (view.job_id, view.status, view.detail, id(view.result), len(view.log),
                 view.result.stats is not None)
        if stamp != self._detail_for:
            self._detail_for = stamp
            self.query_one("#detail", Static).update(render_detail(view))
            repro = reproducer_text(view)
            self.query_one("#repro", Static).update(
                Text.assemble(("\nreproducer ", "bold"), ("(c copies)\n", "dim"), repro) if repro else "")

    # ---- actions -----------------------------------------------------------------------------------------
    def action_run_all(self) -> None:
        if self._require_session():
            queued = [j for j, v in self.model.jobs.items() if v.status == QUEUED]
            if not queued:
                self.notify("nothing queued (R re-runs the selected job)", severity="warning")
                return
            self._call_engine(self.session.start, what="run: ")

    def action_run_selected(self) -> None:
        view = self._selected_view()
        if not self._require_session() or view is None:
            return
        if view.status in FINAL_STATUSES:
            self._call_engine(self.session.rerun, [view.job_id], what="re-run: ")
        elif view.status == QUEUED:
            self._call_engine(self.session.start, [view.job_id], what="run: ")

    def action_rerun(self) -> None:
        view = self._selected_view()
        if not self._require_session() or view is None:
            return
        if view.status not in FINAL_STATUSES:
            self.notify("the job has not finished yet", severity="warning")
            return
        self._call_engine(self.session.rerun, [view.job_id], what="re-run: ")

    def action_rerun_all(self) -> None:
        if self._require_session():
            ids = self.model.finished_ids()
            if ids:
                self._call_engine(self.session.rerun, ids, what="re-run: ")

    def action_cancel(self) -> None:
        view = self._selected_view()
        if self._require_session() and view is not None:
            self._call_engine(self.session.cancel, [view.job_id], what="cancel: ")

    def action_cancel_all(self) -> None:
        if self._require_session():
            self._call_engine(self.session.cancel, what="cancel: ")

    def action_add_command(self) -> None:
        if not self._require_session():
            return

        def done(text: str | None) -> None:
            if text:
                self._call_engine(self.session.add_command, text, then=self._jobs_added, what="add: ")

        self.push_screen(dialogs.PromptDialog(
            "Add a command", placeholder="conv -n 1 -c 16 -H 14 -W 14 -k 16 -y 3 -x 3 -p 1 -q 1",
            hint="MIOpenDriver syntax (conv, convbfp16, layernorm, gemm, ...). Enter adds, Esc cancels.",
            validate=dialogs.validate_command, dialog_id="add-command"), done)

    def action_load_file(self) -> None:
        if not self._require_session():
            return

        def done(path: str | None) -> None:
            if path:
                self._call_engine(self.session.add_inputs, [path], then=self._jobs_added, what=f"{path}: ")

        self.push_screen(dialogs.PromptDialog(
            "Load a commands file", placeholder="sample_commands.txt", hint="one command per line (.txt/.tsv)",
            validate=dialogs.validate_existing_file, dialog_id="load-file"), done)

    def action_add_variant(self) -> None:
        if not self._require_session():
            return

        def done(text: str | None) -> None:
            if text:
                self._call_engine(self._add_variants, text, then=self._jobs_added, what="variant: ")

        self.push_screen(dialogs.PromptDialog(
            "Add a variant", placeholder="NAME=spec.mlir   or   NAME='--iree-flag=value ...'   or   variants.toml",
            hint="a tuning spec, iree-compile flags, a dispatch folder (NAME=DIR/) or a variants file; "
                 "checked with iree-opt before any compile",
            validate=dialogs.validate_variant, dialog_id="add-variant"), done)

    def _add_variants(self, text: str) -> list[Any]:
        """Engine thread: parse, pre-flight (runs iree-opt on specs) and add each variant's jobs."""
        from boo_engine.variants import preflight_variant

        added: list[Any] = []
        for variant in dialogs.parse_variants_text(text):
            preflight_variant(variant)
            added += self.session.add_variant(variant)
        return added

    def _jobs_added(self, results: list[Any]) -> None:
        results = list(results or [])
        self._add_results(results)
        failed = sum(1 for r in results if r.status == "failed")
        msg = f"added {len(results)} job(s)" + (f", {failed} failed to parse" if failed else "")
        self.notify(msg + ("" if failed == len(results) else "  (r runs them)"))

    def action_export(self) -> None:
        if not self._require_session():
            return

        def done(path: str | None) -> None:
            if path:
                self._call_engine(self.session.export, path, what="export: ",
                                  then=lambda _: self.notify(f"wrote {path}"))

        self.push_screen(dialogs.PromptDialog(
            "Export results", value="boo-results.md", hint="the suffix picks the format: .csv, .json or .md",
            validate=dialogs.validate_export_path, dialog_id="export"), done)

    def action_history(self) -> None:
        if self._require_session():
            from .screens import HistoryScreen

            self.push_screen(HistoryScreen(self.session.store))

    def action_compare(self) -> None:
        from .screens import CompareScreen

        results = [v.result for v in self.model.jobs.values()]
        if not results:
            self.notify("no jobs yet", severity="warning")
            return
        self.push_screen(CompareScreen(results, source=lambda: [v.result for v in self.model.jobs.values()]))

    def action_copy_repro(self) -> None:
        repro = reproducer_text(self._selected_view())
        if not repro:
            self.notify("the selected job has no reproducer yet (it appears once measured)", severity="warning")
            return
        self.copy_to_clipboard(repro)
        self.notify("reproducer copied to the clipboard", timeout=3)

    # ---- quitting ----------------------------------------------------------------------------------------
    async def action_quit(self) -> None:
        if self._quitting:          # a second q: leave now
            self.exit(0)
            return
        self._quitting = True
        self.sub_title = "closing: stopping workers, saving the run..."
        self._close_and_exit()

    @work(group="closing", exclusive=True)
    async def _close_and_exit(self) -> None:
        for _ in range(600):                 # a quit while the session opens: let it open, then close it
            if self._opening.is_finished:
                break
            await asyncio.sleep(0.05)
        session = self.session or self._created_session
        if session is not None:
            try:
                await asyncio.wait_for(asyncio.to_thread(session.close), timeout=30)
            except Exception as e:  # noqa: BLE001
                self._log_line("error", f"closing the session: {e}")
        self._engine.shutdown(wait=False, cancel_futures=True)
        self.exit(0)

    # ---- messages for the user ---------------------------------------------------------------------------
    def _update_subtitle(self) -> None:
        counts = self.model.counts()
        total = len(self.model.jobs)
        done = sum(counts.get(s, 0) for s in FINAL_STATUSES)
        parts = []
        if self.model.run_id is not None:
            parts.append(f"run {self.model.run_id} {self.model.run_status}")
        parts.append(f"{done}/{total} finished")
        if counts.get("failed"):
            parts.append(f"{counts['failed']} failed")
        self.sub_title = "  ".join(parts)

    def _log_line(self, level: str, message: str) -> None:
        style = {"error": "bold red", "warning": "yellow"}.get(level, "")
        stamp = time.strftime("%H:%M:%S")
        try:
            self.query_one("#log", RichLog).write(Text(f"{stamp} {level}: {message}", style=style))
        except Exception:  # noqa: BLE001 - the log panel is not mounted on every screen state
            pass

    def _error(self, message: str) -> None:
        self._log_line("error", message)
        self.notify(message, severity="error", timeout=10)


#: How often objects that survived so far are moved out of the cyclic collector's way (see _freeze_long_lived).
GC_FREEZE_S = 2.0


def _freeze_long_lived() -> None:
    """Keep full garbage collections short, so they never freeze the UI.

    Measured on a full run of sample_commands.txt: torch, Textual and the engine leave ~360k long-lived objects
    in this process, and Textual's render caches (Segments, Strips, row renderables) add ~50k more per minute.
    Every full collection walked them all, holding the GIL for 120-200 ms: the event loop and the engine threads
    stood still. gc.freeze() moves everything alive now into a generation the collector never scans. Frozen
    objects are still freed by reference counting (the render caches are acyclic), so only cyclic garbage
    older than GC_FREEZE_S waits for the process to exit; young cycles are still collected as usual."""
    gc.freeze()


def _warm_plotext() -> None:
    """plotext imports most of itself on the first plot: draw one now, while the session opens."""
    from .plots import Series, render_histogram

    render_histogram([Series("warm-up", (1.0, 2.0, 3.0))], 40, 10)


def _start_resource_tracker() -> None:
    """Start multiprocessing's resource tracker now, while sys.stderr is still the real one.

    The session starts its worker processes lazily, from its own threads, while the app runs. By then Textual
    has replaced sys.stdout/stderr with capture objects whose fileno() is -1, and the tracker's first start
    (which passes stderr's fd to the child) fails with "bad value(s) in fds_to_keep". Once running, the
    tracker is reused and nothing else needs a real stderr fd."""
    try:
        from multiprocessing import resource_tracker

        resource_tracker.ensure_running()
    except Exception:  # noqa: BLE001 - without it a spawn may fail later, and that failure is reported then
        pass


def _route_child_output() -> str:
    """Worker processes inherit this terminal: send their output to a log file instead of over the screen."""
    import os
    import tempfile

    from boo_engine.child import CHILD_LOG_ENV

    path = os.environ.get(CHILD_LOG_ENV) or os.path.join(tempfile.gettempdir(), f"boo-tui-{os.getpid()}-workers.log")
    os.environ[CHILD_LOG_ENV] = path
    return path


def run_app(config: Any, inputs: list[str], *, autostart: bool = True) -> int:
    """Run the dashboard until the user quits. `config` is a boo_engine SessionConfig, `inputs` the commands
    files and command strings to queue. Returns the process exit code (0 after a normal quit)."""
    _route_child_output()
    app = BooApp(config, inputs, autostart=autostart)
    try:
        app.run()
    finally:
        session = app.session or app._created_session
        if session is not None:
            try:
                session.close()          # idempotent; covers ctrl+c and crashes
            except Exception:  # noqa: BLE001
                pass
        app._engine.shutdown(wait=False, cancel_futures=True)
    rc = app.return_code
    return int(rc) if isinstance(rc, int) else 0
