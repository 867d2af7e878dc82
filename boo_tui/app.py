"""The boo-tui dashboard: a live results table, latency plots, the details of one kernel, and actions.

Threading (the one rule that keeps the dashboard responsive): the UI thread never compiles, exports, measures,
runs iree-opt, reads files or writes the DB. The `Session` does its work on its own threads and reports through
its listener, which only posts messages (`bridge.EventBridge`). Calls into the session run on one `engine` thread
of our own (so they keep their order and never block the event loop); what they return comes back as a typed
message (`messages`).

`BooApp` is put together from parts: `live_table.LiveTableMixin` (the table, filter, plots and detail pane),
`actions.ActionsMixin` (what the keys do), `tuning.TuneMixin` (the Tune action: a tuner on its own thread, and
no dashboard run while it measures) and, here, the session's life and the engine's events. The key bindings
and the command palette derived from them are in `palette`.
"""
from __future__ import annotations

import asyncio
import gc
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

# The engine imports torch only when it must (the headless front end never does over cached kernels), but a
# session with a UI may need it mid-run (the reproducer inputs of a newly compiled kernel), and importing torch
# then, in an engine thread, would hold the GIL (C extension initialisation) and freeze the UI for ~1 s. So the
# dashboard pays for it here, before its first frame.
import torch  # noqa: F401
from rich.text import Text
from textual import work
from textual.app import App, ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import Footer, Header, Input, RichLog, Static, TabbedContent, TabPane

from boo_engine.api import (
    DEFAULT_MIN_EFFECT,
    FINAL_STATUSES,
    BooError,
    Session,
    Status,
    check_named_kernels,
    one_line,
    warm_imports,
)
from boo_engine.api import events as ev

from .actions import ActionsMixin
from .bridge import EventBridge
from .cells import COLUMN_WIDTHS, Filter
from .live_table import TABLE_FLUSH_S, LiveTableMixin
from .messages import ComparisonsComputed, EngineFailed, EventsReady, SessionFailed, SessionOpened
from .palette import BINDINGS as DASHBOARD_BINDINGS
from .palette import BooCommands, palette_entries
from .plots import PlotView
from .process import (
    GC_FREEZE_S,
    close_child_output,
    freeze_long_lived,
    handle_stop_signals,
    route_child_output,
    start_resource_tracker,
    warm_plotext,
)
from .run_model import RunModel
from .table import ResultsTable
from .tuning import TuneMixin

__all__ = ["PALETTE", "BooApp", "BooCommands", "run_app"]

EVENTS_PER_TURN = 256   # engine events applied before the event loop gets a turn (~10 us each)


class BooApp(TuneMixin, ActionsMixin, LiveTableMixin, App[int]):
    """The dashboard. `config` and `inputs` are what `boo-tui` was given; the session opens on mount."""

    CSS_PATH = "app.tcss"
    TITLE = "boo-tui"
    COMMANDS = App.COMMANDS | {BooCommands}
    #: side by side (plots and details right of the table) only where the table keeps the 120 columns its answer
    #: columns need (the panes take 60): at 160 the panes had hidden numerics and noisy
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (180, "-wide")]
    BINDINGS = DASHBOARD_BINDINGS

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
        self._detail_for: tuple[Any, ...] | None = None
        self._subtitle_stale = False
        self._engine = ThreadPoolExecutor(max_workers=1, thread_name_prefix="boo-tui-engine")
        self._quitting = False
        self.stop_signals: Any = None   # run_app's StopSignals: SIGINT/SIGTERM/SIGHUP quit, the run interrupted
        self.max_flush_s = 0.0      # slowest table/plot/detail refresh (benchmarks report it)
        self.tune_run: Any = None   # the tune started from the dashboard (tuning.TuneMixin), if any
        self._tune_pending = False
        start_resource_tracker()

    @property
    def min_effect(self) -> float:
        """The run's --min-effect: what the verdicts are decided with (the legend states it)."""
        return float(getattr(self.config, "min_effect", DEFAULT_MIN_EFFECT))

    @property
    def seed(self) -> int:
        return int(getattr(self.config, "seed", 0))

    # ---- layout ------------------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Header()
        yield Input(placeholder="filter: op:conv status:failed words...  (/ to focus, esc to leave)",
                    id="filter")
        yield Static("", id="model-line")        # a file with weights: the engine's model line (live_table)
        with Vertical(id="body"):
            yield ResultsTable(id="results", source=self._row_cells, zebra_stripes=True)
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
        table = self.query_one("#results", ResultsTable)
        table.set_columns(self.table_columns, COLUMN_WIDTHS)
        self.query_one("#model-line", Static).display = False
        table.focus()
        self.sub_title = "opening session..."
        self.set_interval(TABLE_FLUSH_S, self._flush_views)
        freeze_long_lived()
        self.set_interval(GC_FREEZE_S, freeze_long_lived)
        self._opening = self._open_session()
        if self.stop_signals is not None:
            handle_stop_signals(self, self.stop_signals)

    # ---- the session ------------------------------------------------------------------------------------
    @work(thread=True, group="session-open")
    def _open_session(self) -> None:
        """Create the session and add the inputs off the UI thread (opening the DB, reading files). The imports a
        run needs come after, on the engine thread (`on_session_opened`): the table shows the jobs first."""
        try:
            session = Session(self.config, listener=self.bridge.listener)
        except Exception as e:  # noqa: BLE001 - a bad target or DB path is a message, not a traceback
            self.post_message(SessionFailed(one_line(e)))
            return
        self._created_session = session      # so a quit during the opening still closes it
        added: list[Any] = []
        errors: list[str] = []
        for item in self.inputs:
            try:
                added += session.add_inputs([item])
            except Exception as e:  # noqa: BLE001
                errors.append(one_line(e))
        try:   # a per-kernel table naming no kernel of the run: said, and the run waits for the user
            names = [r.func_name for r in added if r.func_name]
            errors += [f"note: {n}" for n in check_named_kernels(session.variants, names)]
        except BooError as e:
            errors.append(str(e))
            self.autostart = False
        self.post_message(SessionOpened(session, added, errors))

    def on_session_failed(self, message: SessionFailed) -> None:
        self.session_error = message.reason
        self.sub_title = "no session"
        self._log_line("error", message.reason)
        self.notify(message.reason, title="cannot open the session", severity="error", timeout=15)

    def on_session_opened(self, message: SessionOpened) -> None:
        if self._quitting:
            return
        gc.freeze()  # the session's imports and objects are here for good (see process.freeze_long_lived)
        session = message.session
        self.session = session
        self.config = session.config
        self._add_results(message.added)
        for msg in message.errors:
            self._log_line("error", msg)
            self.notify(msg, severity="error", timeout=10)
        target = getattr(getattr(session, "target", None), "name", None) or getattr(self.config, "target", "")
        self.title = f"boo-tui  {target}" if target else "boo-tui"
        legend = run_legend(self.config)
        if legend:
            self._log_line("info", legend)
        self._update_subtitle()
        # what a run imports (scipy, the compile pool, plotext...: 1-2 s, 5 s on a loaded host) is imported now, first
        # on the engine thread, so the table showed the jobs without waiting for it and no import holds the GIL in
        # the middle of the run (engine calls run in order: the run starts after it)
        self._call_engine(_warm_up)
        self._ask_for_verdicts()            # a resumed run's finished commands
        if self.autostart and any(v.status == Status.QUEUED for v in self.model.jobs.values()):
            # Draw the queued table first: its first paint renders every visible cell (25-30 ms), and the
            # run's start-up (three processes importing torch on the host's cores) would stretch it 2-3x.
            self._flush_views()
            self.call_after_refresh(self._call_engine, session.start)

    def _call_engine(self, fn: Callable[..., Any], *args: Any, reply: Callable[[Any], Message] | None = None,
                     what: str = "") -> None:
        """Run a session call on the engine thread. What it returns is posted as `reply(value)`; an error as
        `EngineFailed` (prefixed with `what`)."""

        def task() -> None:
            try:
                value = fn(*args)
            except BooError as e:
                self.post_message(EngineFailed(f"{what}{e}"))
                return
            except Exception as e:  # noqa: BLE001
                self.post_message(EngineFailed(f"{what}{type(e).__name__}: {e}"))
                return
            if reply is not None:
                self.post_message(reply(value))

        if self._quitting:
            return
        self._engine.submit(task)

    def _require_session(self) -> bool:
        if self.session is None:
            self.notify(self.session_error or "the session is still opening", severity="warning")
            return False
        return True

    def on_engine_failed(self, message: EngineFailed) -> None:
        self._error(message.reason)

    # ---- the engine's verdicts -------------------------------------------------------------------------
    def _ask_for_verdicts(self) -> None:
        """The session sends its verdicts for a command when a batch measured several of its jobs together;
        for the others (a job re-run on its own, a variant added after its baseline ran, a resumed run) ask it
        for them, on the engine thread: `Session.comparisons` is what the exports call."""
        unanswered = self.model.unanswered()
        if not unanswered or self.session is None:
            return
        results = [r for _, rs in unanswered.values() for r in rs]
        generations = {key: generation for key, (generation, _) in unanswered.items()}
        self._call_engine(self.session.comparisons, results, what="verdicts: ",
                          reply=lambda comparisons: ComparisonsComputed(comparisons, generations))

    def on_comparisons_computed(self, message: ComparisonsComputed) -> None:
        by_key: dict[tuple[str, str], dict[str, Any]] = {key: {} for key in message.generations}
        for (target, command, label), c in message.comparisons.items():
            by_key.setdefault((target, command), {})[label] = c
        for key, generation in message.generations.items():
            self._dirty |= self.model.set_comparisons(key, by_key[key], generation)

    # ---- messages from other threads ---------------------------------------------------------------------
    async def on_events_ready(self, message: EventsReady) -> None:
        """The engine's events, in order, EVENTS_PER_TURN at a time with the event loop running in between (a
        captured model queues 2,000 jobs at once)."""
        while events := self.bridge.take(EVENTS_PER_TURN):
            for event in events:
                self._apply_event(event)
            await asyncio.sleep(0)

    def _apply_event(self, event: ev.Event) -> None:
        if isinstance(event, ev.SamplesAdded):   # the one flood while a kernel is measured: no more than this
            view = self.model.jobs.get(event.job_id or "")
            if view is not None:
                self.model.add_samples(view, event.samples_us, event.total, event.target_count)
                self._dirty.add(view.job_id)
            return
        try:
            changed = self.model.apply(event)
        except Exception as e:  # noqa: BLE001
            self._error(f"bad event {type(event).__name__}: {e}")
            return
        if isinstance(event, ev.JobQueued) and event.result is not None:
            if event.result.job_id not in self._row_keys():
                self._rebuild = True
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
            self._ask_for_verdicts()
        self._dirty |= changed
        if isinstance(event, (ev.RunStarted, ev.RunFinished, ev.JobFinished, ev.JobQueued, ev.JobStatus)):
            self._subtitle_stale = True   # counted at the next flush: counting per event was O(jobs^2) on a load

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
        await self.stop_tune_and_wait()      # the tuner's session closes its worker processes first
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
        if counts.get(Status.FAILED):
            parts.append(f"{counts[Status.FAILED]} failed")
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


def run_legend(config: Any) -> str | None:
    """What the run's IREE columns are, for the Log (the table's "vs boo" header points at it)."""
    names = [getattr(v, "name", "") for v in getattr(config, "variants", [])]
    parts = []
    if getattr(config, "build", None) == "boo" and "baseline" in names:
        parts.append("baseline = boo: each kernel as iree-turbine's BOO builds it (its export, BOO's flags); "
                     "every ratio is vs boo")
    if "best" in names:
        parts.append("best = the best known configuration of each kernel for this machine (detail pane: what "
                     "chose it)")
    return "columns: " + "; ".join(parts) if parts else None


#: (action, title, help) of every command the palette offers: derived from the key bindings.
PALETTE: list[tuple[str, str, str]] = palette_entries(BooApp.BINDINGS)


def run_app(config: Any, inputs: list[str], *, autostart: bool = True) -> int:
    """Run the dashboard until the user quits. `config` is a boo_engine SessionConfig, `inputs` the commands
    files and command strings to queue. Returns the process exit code (0 after a normal quit)."""
    route_child_output()
    from boo_engine.api import StopSignals

    app = BooApp(config, inputs, autostart=autostart)
    stops = app.stop_signals = StopSignals("boo-tui", hard_exit=lambda: _kill_children(app))
    try:
        app.run()
    finally:
        if app.tune_run is not None and app.tune_run.active:   # a stop signal ended the app: stop the tune too
            app.tune_run.stop_and_wait()
        session = app.session or app._created_session
        if session is not None:
            try:
                if stops.received:
                    session.interrupt()  # every unfinished job and the run: interrupted, never failed
                session.close()          # idempotent; covers ctrl+c and crashes
            except Exception:  # noqa: BLE001
                pass
        app._engine.shutdown(wait=False, cancel_futures=True)
        kept = close_child_output()
        if kept is not None:
            print(f"boo-tui: what the worker processes printed is in {kept}", file=sys.stderr)
    rc = app.return_code
    return int(rc) if isinstance(rc, int) else 0


def _warm_up() -> None:
    warm_imports()
    warm_plotext()


def _kill_children(app: BooApp) -> None:
    if app.tune_run is not None:
        app.tune_run.kill_children()
    session = app.session or app._created_session
    if session is not None:
        session.kill_children()
