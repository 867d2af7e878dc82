"""The boo-tui dashboard: a live results table, latency plots, the details of one kernel, and actions.

Threading (the one rule that keeps the dashboard responsive): the UI thread never compiles, exports, measures,
runs iree-opt, reads files or writes the DB. The `Session` does its work on its own threads and reports through
its listener, which only posts messages (`bridge.EventBridge`). Calls into the session run on one engine thread
of our own (`engine_client.EngineClient`: they keep their order and never block the event loop); what they
return comes back as a typed message (`messages`).

`BooApp` puts the parts together and routes messages to them; each part owns its state:
- `engine` (`EngineClient`): the session, typed, and the engine thread;
- `results` (`TableController`): the table, filter, sort, selection, plots and detail pane, drawn from `model`
  (`RunModel`: the jobs and the engine's verdicts, no Textual);
- `tune` (`TuneController`): the Tune action, and no dashboard run while a tune measures;
- `actions` (`DashboardActions`): what the keys do (the `action_*` methods below call it).
Here: the layout, the session's life, the engine's events, quitting. The key bindings and the command palette
derived from them are in `palette`.
"""
from __future__ import annotations

import asyncio
import gc
import sys
from typing import TYPE_CHECKING

# The engine imports torch only when it must (the headless front end never does over cached kernels), but a
# session with a UI may need it mid-run (the reproducer inputs of a newly compiled kernel), and importing torch
# then, in an engine thread, would hold the GIL (C extension initialisation) and freeze the UI for ~1 s. So the
# dashboard pays for it here, before its first frame.
import torch  # noqa: F401
from textual import on, work
from textual.app import App, ComposeResult
from textual.widgets import Input

from boo_engine.api import SessionConfig, Status
from boo_engine.api import events as ev

from .actions import DashboardActions
from .bridge import EventBridge
from .engine_client import EngineClient
from .layout import RESULTS, dashboard_widgets
from .messages import (
    ComparisonsComputed,
    EngineFailed,
    EventsReady,
    ExportWritten,
    JobsAdded,
    ModelLinesComputed,
    SessionFailed,
    SessionOpened,
    TuneGate,
)
from .palette import BINDINGS as DASHBOARD_BINDINGS
from .palette import BooCommands, palette_entries
from .process import (
    GC_FREEZE_S,
    close_child_output,
    freeze_long_lived,
    handle_stop_signals,
    route_child_output,
    start_resource_tracker,
    warm_up,
)
from .run_log import RunLog
from .run_model import RunModel
from .table import ResultsTable
from .table_controller import TABLE_FLUSH_S, TableController, columns_legend, subtitle_of
from .tune_controller import TuneController

if TYPE_CHECKING:
    from boo_engine.api import StopSignals

__all__ = ["PALETTE", "BooApp", "BooCommands", "run_app"]

EVENTS_PER_TURN = 256   # engine events applied before the event loop gets a turn (~10 us each)


class BooApp(App[int]):
    """The dashboard. `config` and `inputs` are what `boo-tui` was given; the session opens on mount."""

    CSS_PATH = "app.tcss"
    TITLE = "boo-tui"
    COMMANDS = App.COMMANDS | {BooCommands}
    #: side by side (plots and details right of the table) only where the table keeps the 120 columns its answer
    #: columns need (the panes take 60): at 160 the panes had hidden numerics and noisy
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (180, "-wide")]
    BINDINGS = DASHBOARD_BINDINGS

    def __init__(self, config: SessionConfig, inputs: list[str] | None = None, *, autostart: bool = True) -> None:
        super().__init__()
        self.inputs = list(inputs or [])
        self.autostart = autostart
        self.model = RunModel()
        self.bridge = EventBridge(self)
        self.run_log = RunLog(self)
        self.engine = EngineClient(config, self.post_message, self.notify)
        self.results = TableController(self, self.engine, self.model, self.bridge, report=self.error)
        self.tune = TuneController(self, self.engine, self.results)
        self.actions = DashboardActions(self, self.engine, self.results, self.tune)
        self.stop_signals: StopSignals | None = None   # run_app's: SIGINT/SIGTERM/SIGHUP quit, the run interrupted
        self._quitting = False
        start_resource_tracker()

    @property
    def config(self) -> SessionConfig:
        """The run's settings (`EngineClient.config`)."""
        return self.engine.config

    # ---- layout ------------------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield from dashboard_widgets(self.results.row_cells)

    def on_mount(self) -> None:
        self.results.mounted()
        self.sub_title = "opening session..."
        self.set_interval(TABLE_FLUSH_S, self.results.flush)
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
        self.engine.open(self.inputs, self.bridge.listener)

    def on_session_failed(self, message: SessionFailed) -> None:
        self.engine.failed(message.reason)
        self.sub_title = "no session"
        self.run_log.error(message.reason, title="cannot open the session", timeout=15)

    def on_session_opened(self, message: SessionOpened) -> None:
        if self._quitting:
            return
        gc.freeze()  # the session's imports and objects are here for good (see process.freeze_long_lived)
        session = message.session
        self.engine.opened(session)
        self.results.add_results(message.added)
        for msg in message.errors:
            self.run_log.error(msg)
        self.title = f"boo-tui  {session.target.name}"
        legend = columns_legend(self.config)
        if legend:
            self.log_line("info", legend)
        self.sub_title = subtitle_of(self.model)
        # what a run imports (scipy, the compile pool, plotext...: 1-2 s, 5 s on a loaded host) is imported now, first
        # on the engine thread, so the table showed the jobs without waiting for it and no import holds the GIL in
        # the middle of the run (engine calls run in order: the run starts after it)
        self.engine.call(warm_up)
        self.results.ask_for_verdicts()      # a resumed run's finished commands
        if (self.autostart and not message.hold
                and any(v.status == Status.QUEUED for v in self.model.jobs.values())):
            # Draw the queued table first: its first paint renders every visible cell (25-30 ms), and the
            # run's start-up (three processes importing torch on the host's cores) would stretch it 2-3x.
            self.results.flush()
            self.call_after_refresh(self.engine.call, session.start)

    def on_engine_failed(self, message: EngineFailed) -> None:
        self.error(message.reason)

    # ---- messages from the parts' calls ---------------------------------------------------------------------
    def on_comparisons_computed(self, message: ComparisonsComputed) -> None:
        self.results.verdicts_computed(message)

    def on_model_lines_computed(self, message: ModelLinesComputed) -> None:
        self.results.model_lines_computed(message)

    def on_jobs_added(self, message: JobsAdded) -> None:
        self.actions.jobs_added(message)

    def on_export_written(self, message: ExportWritten) -> None:
        self.actions.export_written(message)

    def on_tune_gate(self, message: TuneGate) -> None:
        self.tune.gate(message)

    # ---- the table and the filter line --------------------------------------------------------------------
    @on(ResultsTable.RowHighlighted, f"#{RESULTS}")
    def _row_highlighted(self, event: ResultsTable.RowHighlighted) -> None:
        self.results.select(event.key)

    @on(ResultsTable.RowSelected, f"#{RESULTS}")
    def _row_selected(self, event: ResultsTable.RowSelected) -> None:
        """Enter on a row: its detail (the row is the selected job already, by highlighting it)."""
        self.results.select(event.key)
        self.actions.show_pane("detail")

    @on(ResultsTable.HeaderSelected, f"#{RESULTS}")
    def _header_selected(self, event: ResultsTable.HeaderSelected) -> None:
        self.results.sort_by_column(event.key)

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.results.filter_changed(event.value)

    # ---- the keys (palette.BINDINGS names these; what they do is in actions) --------------------------------
    def action_run_all(self) -> None:
        self.actions.run_all()

    def action_run_selected(self) -> None:
        self.actions.run_selected()

    def action_rerun(self) -> None:
        self.actions.rerun()

    def action_rerun_all(self) -> None:
        self.actions.rerun_all()

    def action_cancel(self) -> None:
        self.actions.cancel()

    def action_cancel_all(self) -> None:
        self.actions.cancel_all()

    def action_add_command(self) -> None:
        self.actions.add_command()

    def action_load_file(self) -> None:
        self.actions.load_file()

    def action_add_variant(self) -> None:
        self.actions.add_variant()

    def action_tune(self) -> None:
        self.tune.start()

    def action_export(self) -> None:
        self.actions.export()

    def action_history(self) -> None:
        self.actions.history()

    def action_compare(self) -> None:
        self.actions.compare()

    def action_roofline(self) -> None:
        self.actions.roofline()

    def action_copy_repro(self) -> None:
        self.actions.copy_repro()

    def action_sort(self) -> None:
        self.actions.sort()

    def action_focus_filter(self) -> None:
        self.query_one("#filter", Input).focus()

    def action_show_pane(self, pane: str) -> None:
        self.actions.show_pane(pane)

    # ---- the engine's events -----------------------------------------------------------------------------
    async def on_events_ready(self, message: EventsReady) -> None:
        """The engine's events, in order, EVENTS_PER_TURN at a time with the event loop running in between (a
        captured model queues 2,000 jobs at once)."""
        while events := self.bridge.take(EVENTS_PER_TURN):
            for event in events:
                self._apply_event(event)
            await asyncio.sleep(0)

    def _apply_event(self, event: ev.Event) -> None:
        """An event changes the model and the rows it names (`TableController.apply`), and the Log says it."""
        try:
            self.results.apply(event)
        except Exception as e:  # noqa: BLE001
            self.error(f"bad event {type(event).__name__}: {e}")
            return
        self.run_log.event(event)
        if isinstance(event, ev.RunFinished):
            self.results.ask_for_verdicts()

    # ---- quitting ----------------------------------------------------------------------------------------
    async def action_quit(self) -> None:
        if self._quitting:          # a second q: leave now
            self.exit(0)
            return
        self._quitting = True
        self.engine.closing = True
        self.sub_title = "closing: stopping workers, saving the run..."
        self._close_and_exit()

    @work(group="closing", exclusive=True)
    async def _close_and_exit(self) -> None:
        for _ in range(600):                 # a quit while the session opens: let it open, then close it
            if self._opening.is_finished:
                break
            await asyncio.sleep(0.05)
        await self.tune.stop_and_wait()      # the tuner's session closes its worker processes first
        error = await self.engine.close()
        if error:
            self.log_line("error", error)
        self.exit(0)

    async def on_unmount(self) -> None:
        """The app ends, however it ends (a quit closed the session already; a test's pilot or a crash did not):
        no session outlives it with its worker processes. A stop signal's run is marked interrupted."""
        stops = self.stop_signals
        await asyncio.to_thread(self.engine.close_now, interrupted=bool(stops is not None and stops.received))

    # ---- messages for the user ---------------------------------------------------------------------------
    def log_line(self, level: str, message: str) -> None:
        self.run_log.line(level, message)

    def error(self, message: str) -> None:
        self.run_log.error(message)

    def kill_children(self) -> None:
        """A second stop signal: every worker process (the run's, a tune's) dies now."""
        self.tune.kill_children()
        self.engine.kill_children()


#: (action, title, help) of every command the palette offers: derived from the key bindings.
PALETTE: list[tuple[str, str, str]] = palette_entries(BooApp.BINDINGS)


def run_app(config: SessionConfig, inputs: list[str], *, autostart: bool = True) -> int:
    """Run the dashboard until the user quits. `config` is what `boo-tui` was given, `inputs` the commands
    files and command strings to queue. Returns the process exit code (0 after a normal quit)."""
    route_child_output()
    from boo_engine.api import StopSignals

    app = BooApp(config, inputs, autostart=autostart)
    stops = app.stop_signals = StopSignals("boo-tui", hard_exit=app.kill_children)
    try:
        app.run()
    finally:
        app.tune.stop_now()                             # a stop signal ended the app: stop the tune too
        app.engine.close_now(interrupted=bool(stops.received))
        kept = close_child_output()
        if kept is not None:
            print(f"boo-tui: what the worker processes printed is in {kept}", file=sys.stderr)
    rc = app.return_code
    return int(rc) if isinstance(rc, int) else 0

