"""The dashboard's Tune action: the part of `BooApp` that starts a tune, keeps the dashboard's own measurements
out of its way and stops it on quit.

One measurement at a time on the machine: the tuner measures in a session of its own (its own benchmark worker
process), so while a tune is pending or active the dashboard starts no run (`refuse_while_tuning`), and a tune
starts only once the dashboard's session is idle. That check runs on the engine thread, after every session call
queued before it (a run the user started just before is seen). The tune itself runs on a thread of its own
(`tune_run.TuneRun`); stopping it (`Tuner.stop()`, then joining its thread) happens in a worker, never on the UI.
"""
from __future__ import annotations

import asyncio
import shlex
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from textual import work
from textual.message import Message

from .dialogs import TuneDialog, TuneRequest
from .messages import TuneGate
from .run_model import JobView, RunModel
from .screens.tune import TuneScreen
from .tune_run import STOP_WAIT_S, TuneRun

if TYPE_CHECKING:
    from textual.app import App

    _AppBase = App[int]
else:
    _AppBase = object

#: the dialog's first values (the headless `boo-tui tune` defaults for the folder; a smaller budget, since the
#: dashboard is where one tries a few kernels)
DEFAULT_BUDGET = 16
DEFAULT_OUT = "tuned"


class TuneMixin(_AppBase):
    """Tune from the dashboard (a part of `BooApp`)."""

    session: Any
    config: Any
    model: RunModel
    tune_run: TuneRun | None
    _tune_pending: bool

    if TYPE_CHECKING:
        def _require_session(self) -> bool: ...

        def _call_engine(self, fn: Callable[..., Any], *args: Any,
                         reply: Callable[[Any], Message] | None = None, what: str = "") -> None: ...

        def _selected_view(self) -> JobView | None: ...

        def _row_keys(self) -> set[str]: ...

    # ---- one measurement at a time ----------------------------------------------------------------------------
    @property
    def tuning(self) -> bool:
        """A tune is being set up, runs, or is stopping: the dashboard measures nothing meanwhile."""
        return self._tune_pending or (self.tune_run is not None and self.tune_run.active)

    def refuse_while_tuning(self) -> bool:
        """True (and says why) when a run must not start now."""
        if not self.tuning:
            return False
        self.notify("a tune is measuring on this machine: runs wait until it ends (close the tune screen to stop "
                    "it; one measurement at a time)", severity="warning")
        return True

    # ---- starting ---------------------------------------------------------------------------------------------
    def tune_commands(self, scope: str) -> list[str]:
        """The commands a tune of `scope` covers: the selected row's, or every command the table shows (in
        table order), each once; rows that are not a valid command (a bad input line) are left out."""
        views = [self.model.jobs[j] for j in self.model.jobs if j in self._row_keys()]
        if scope == "selected":
            view = self._selected_view()
            views = [view] if view is not None else []
        return list(dict.fromkeys(v.result.command for v in views if v.result.func_name and v.result.command))

    def action_tune(self) -> None:
        if not self._require_session():
            return
        if self.tune_run is not None and self.tune_run.active or self._tune_pending:
            self.notify("a tune is already running", severity="warning")
            return
        shown = self.tune_commands("shown")
        if not shown:
            self.notify("no command to tune: add one (a) or load a commands file (o)", severity="warning")
            return
        selected = self.tune_commands("selected")

        def done(request: TuneRequest | None) -> None:
            if request is None:
                return
            inputs = self.tune_commands(request.scope) or shown
            self._tune_pending = True        # from now on no run starts
            self._call_engine(self._session_idle, reply=lambda idle: TuneGate(idle, request, inputs),
                              what="tune: ")

        self.push_screen(TuneDialog(selected=selected[0] if selected else None, shown=len(shown),
                                    budget=DEFAULT_BUDGET, out_dir=DEFAULT_OUT), done)

    def _session_idle(self) -> bool:
        """Engine thread: whether the dashboard's session has nothing queued or measuring (a session that cannot
        say counts as busy: the tune is refused, never started beside a measurement)."""
        try:
            return bool(self.session.wait(timeout=0))
        except Exception:  # noqa: BLE001
            return False

    def on_tune_gate(self, message: TuneGate) -> None:
        if not message.idle:
            self._tune_pending = False
            self.notify("the dashboard is measuring: the tune would measure beside it. Let the run finish or "
                        "cancel it (X), then tune", severity="warning", timeout=8)
            return
        settings = self.tune_settings(message.request, message.inputs)
        self.tune_run = TuneRun(settings, message.inputs)
        self._tune_pending = False
        what = (shlex.quote(message.inputs[0]) if len(message.inputs) == 1
                else f"{len(message.inputs)} commands")
        self.push_screen(TuneScreen(self.tune_run, what))

    def tune_settings(self, request: TuneRequest, inputs: list[str]) -> Any:
        """The tune's settings: the dialog's budget and folder on the dashboard's target, DB, cache, seed,
        --min-effect and threads; the command line that repeats it headless is recorded with it."""
        from boo_engine.api import TuneSettings

        cfg = self.config
        target = self.session.target.name
        db = str(self.session.store.path)
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
    def stop_tune(self) -> None:
        """Stop the tune (the tune screen closed): in a worker, since Tuner.stop() waits for its session."""
        if self.tune_run is not None and self.tune_run.active:
            self._stop_tune_worker(self.tune_run)

    @work(group="tune-stop", exclusive=True)
    async def _stop_tune_worker(self, run: TuneRun) -> None:
        self.notify("stopping the tune: what it measured is kept", timeout=4)
        ended = await asyncio.to_thread(run.stop_and_wait, STOP_WAIT_S)
        finished = run.finished
        if not ended:
            self.notify("the tune did not stop in time", severity="error")
        elif finished is not None and finished.tune_id is not None:
            self.notify(f"tune {finished.tune_id} stopped: boo-tui tune --resume {finished.tune_id} "
                        f"--db {finished.db_path} continues it", timeout=10)

    async def stop_tune_and_wait(self) -> None:
        """Quitting: stop a running tune and wait for its thread (its session closes its worker processes)."""
        run = self.tune_run
        if run is not None and run.active:
            self.sub_title = "closing: stopping the tune..."
            await asyncio.to_thread(run.stop_and_wait, STOP_WAIT_S)


__all__ = ["DEFAULT_BUDGET", "DEFAULT_OUT", "TuneMixin"]
