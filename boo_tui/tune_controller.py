"""The dashboard's Tune action: the part that starts a tune, keeps the dashboard's own measurements out of its
way and stops it on quit; it owns the tune (`run`) and whether one is being set up.

One measurement at a time on the machine: the tuner measures in a session of its own (its own benchmark worker
process), so while a tune is pending or active the dashboard starts no run (`refuse_while_tuning`), and a tune
starts only once the dashboard's session is idle. That check runs on the engine thread, after every session call
queued before it (a run the user started just before is seen). The tune itself runs on a thread of its own
(`tune_run.TuneRun`); stopping it (`Tuner.stop()`, then joining its thread) happens in a worker, never on the UI.
"""
from __future__ import annotations

import asyncio
import shlex

from textual.app import App

from boo_engine.api import Session, TuneSettings

from .dialogs import TuneDialog
from .engine_client import EngineClient
from .messages import TuneGate, TuneRequest
from .screens.tune import TuneScreen
from .table_controller import TableController
from .tune_run import STOP_WAIT_S, TuneRun

#: the dialog's first values (the headless `boo-tui tune` defaults for the folder; a smaller budget, since the
#: dashboard is where one tries a few kernels)
DEFAULT_BUDGET = 16
DEFAULT_OUT = "tuned"


class TuneController:
    """Tune from the dashboard `app`: its commands come from the results table, its session calls go through
    the engine client."""

    def __init__(self, app: App[int], engine: EngineClient, results: TableController) -> None:
        self.app = app
        self.engine = engine
        self.results = results
        self.run: TuneRun | None = None     # the tune started from the dashboard, if any
        self._pending = False               # asked for: the engine thread is checking the session is idle

    # ---- one measurement at a time ----------------------------------------------------------------------------
    @property
    def tuning(self) -> bool:
        """A tune is being set up, runs, or is stopping: the dashboard measures nothing meanwhile."""
        return self._pending or (self.run is not None and self.run.active)

    def refuse_while_tuning(self) -> bool:
        """True (and says why) when a run must not start now."""
        if not self.tuning:
            return False
        self.app.notify("a tune is measuring on this machine: runs wait until it ends (close the tune screen to "
                        "stop it; one measurement at a time)", severity="warning")
        return True

    # ---- starting ---------------------------------------------------------------------------------------------
    def commands(self, scope: str) -> list[str]:
        """The commands a tune of `scope` covers: the selected row's, or every command the table shows (in
        table order), each once; rows that are not a valid command (a bad input line) are left out."""
        model, shown = self.results.model, self.results.shown
        views = [model.jobs[j] for j in model.jobs if j in shown]
        if scope == "selected":
            view = self.results.selected_view()
            views = [view] if view is not None else []
        return list(dict.fromkeys(v.result.command for v in views if v.result.func_name and v.result.command))

    def start(self) -> None:
        """The Tune key: the dialog, then (once the engine says the session is idle) the tune screen."""
        session = self.engine.require()
        if session is None:
            return
        if self.tuning:
            self.app.notify("a tune is already running", severity="warning")
            return
        shown = self.commands("shown")
        if not shown:
            self.app.notify("no command to tune: add one (a) or load a commands file (o)", severity="warning")
            return
        selected = self.commands("selected")

        def done(request: TuneRequest | None) -> None:
            if request is None:
                return
            inputs = self.commands(request.scope) or shown
            self._pending = True        # from now on no run starts
            self.engine.call(_session_idle, session, reply=lambda idle: TuneGate(idle, request, inputs),
                             what="tune: ")

        self.app.push_screen(TuneDialog(selected=selected[0] if selected else None, shown=len(shown),
                                        budget=DEFAULT_BUDGET, out_dir=DEFAULT_OUT), done)

    def gate(self, message: TuneGate) -> None:
        """The engine's answer: start the tune when the session was idle."""
        if not message.idle or self.engine.session is None:
            self._pending = False
            self.app.notify("the dashboard is measuring: the tune would measure beside it. Let the run finish or "
                            "cancel it (X), then tune", severity="warning", timeout=8)
            return
        settings = self.settings(self.engine.session, message.request, message.inputs)
        self.run = TuneRun(settings, message.inputs)
        self._pending = False
        what = (shlex.quote(message.inputs[0]) if len(message.inputs) == 1
                else f"{len(message.inputs)} commands")
        self.app.push_screen(TuneScreen(self.run, what, stop=self.stop))

    def settings(self, session: Session, request: TuneRequest, inputs: list[str]) -> TuneSettings:
        """The tune's settings: the dialog's budget and folder on the dashboard's target, DB, cache, seed,
        --min-effect and threads; the command line that repeats it headless is recorded with it."""
        cfg = session.config
        target = session.target.name
        db = str(session.store.path)
        argv = ["boo-tui", "tune", *inputs, "--target", target, "--budget", str(request.budget),
                "--out", request.out_dir, "--db", db]
        if cfg.cache_dir:
            argv += ["--cache-dir", str(cfg.cache_dir)]
        # the dashboard's own run settings, on the session's resolved target and database (and not on its Ray
        # cluster: a tune from the dashboard runs here)
        run = {**cfg.run_settings(), "target": target, "db_path": db, "command_line": shlex.join(argv),
               "ray_address": None}
        return TuneSettings(**run, out_dir=request.out_dir, budget=request.budget)

    # ---- stopping ---------------------------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop the tune (the tune screen closed): in a worker, since Tuner.stop() waits for its session."""
        if self.run is not None and self.run.active:
            self.app.run_worker(self._stop(self.run), group="tune-stop", exclusive=True)

    async def _stop(self, run: TuneRun) -> None:
        self.app.notify("stopping the tune: what it measured is kept", timeout=4)
        ended = await asyncio.to_thread(run.stop_and_wait, STOP_WAIT_S)
        finished = run.finished
        if not ended:
            self.app.notify("the tune did not stop in time", severity="error")
        elif finished is not None and finished.tune_id is not None:
            self.app.notify(f"tune {finished.tune_id} stopped: boo-tui tune --resume {finished.tune_id} "
                            f"--db {finished.db_path} continues it", timeout=10)

    async def stop_and_wait(self) -> None:
        """Quitting: stop a running tune and wait for its thread (its session closes its worker processes)."""
        run = self.run
        if run is not None and run.active:
            self.app.sub_title = "closing: stopping the tune..."
            await asyncio.to_thread(run.stop_and_wait, STOP_WAIT_S)

    def stop_now(self) -> None:
        """After the app ended (a stop signal): stop a tune still running, and wait for it."""
        if self.run is not None and self.run.active:
            self.run.stop_and_wait()

    def kill_children(self) -> None:
        if self.run is not None:
            self.run.kill_children()


def _session_idle(session: Session) -> bool:
    """Engine thread: whether the dashboard's session has nothing queued or measuring (a session that cannot
    say counts as busy: the tune is refused, never started beside a measurement)."""
    try:
        return bool(session.wait(timeout=0))
    except Exception:  # noqa: BLE001
        return False


__all__ = ["DEFAULT_BUDGET", "DEFAULT_OUT", "TuneController"]
