"""A tune started from the dashboard: the engine's `Tuner` on a thread of its own, reporting to the tune screen.

The tuner blocks while it runs a session of its own (a compile pool, another benchmark worker process) and calls
its listener from that thread, so:
- `Tuner.run` and `report.write_outputs` run on the `boo-tui-tune` thread, never on the UI thread (which never
  compiles, measures or writes the DB);
- the tune listener only `post_message`s (a non-blocking queue put; `call_from_thread` would hold the tuner up
  until the UI ran);
- the session listener (samples streaming in, a job re-queued or finished) only adds the job id to a set under
  a lock: the screen takes that set at most plots.MAX_HZ times a second and redraws the histogram only when the
  jobs it shows are in it, reading a copy of their samples;
- `stop_and_wait` (closing the screen, quitting) calls `Tuner.stop()` (which interrupts the tuner's session: it
  may wait seconds for its runner) and joins the thread: call it from a worker thread, never from the UI.
No Textual here beyond the messages: the thread is ours, so quitting can wait for it.
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from boo_engine.api import BooError, one_line
from boo_engine.api import events as ev

from .messages import TuneEventPosted, TuneFinished

if TYPE_CHECKING:
    from textual.message import Message
    from textual.message_pump import MessagePump

    from boo_engine.api import TuneEvent, Tuner, TuneSettings

#: how long quitting waits for a stopped tune to end (its session closes its worker processes)
STOP_WAIT_S = 60.0
_SAMPLE_EVENTS = (ev.SamplesAdded, ev.JobStatus, ev.JobFinished, ev.JobQueued)


class TuneRun:
    """One tune of `inputs` (command lines) with `settings` (a boo_engine TuneSettings), reporting to a target
    (the tune screen) by messages. Active from construction until its thread ended (or it was stopped before it
    started): the dashboard starts no measurement of its own meanwhile."""

    def __init__(self, settings: TuneSettings, inputs: list[str]) -> None:
        self.settings = settings
        self.inputs = list(inputs)
        self.tuner: Tuner | None = None
        self.finished: TuneFinished | None = None
        self._target: MessagePump | None = None
        self._thread: threading.Thread | None = None
        self._over = threading.Event()
        self._lock = threading.Lock()
        self._changed: set[str] = set()
        self._life = threading.Lock()     # start and stop_and_wait: a stop never misses a tune starting
        self._stop_requested = False

    # ---- life ------------------------------------------------------------------------------------------------
    def start(self, target: MessagePump) -> None:
        """Start the tune; its messages go to `target` (anything with `post_message`)."""
        from boo_engine.api import Tuner

        with self._life:
            self._target = target
            if self._stop_requested:        # closed before it started
                self._over.set()
                return
            self.tuner = Tuner(self.settings, listener=self._on_tune_event)
            self.tuner.on_session_event(self._on_session_event)
            self._thread = threading.Thread(target=self._work, name="boo-tui-tune", daemon=True)
            self._thread.start()

    @property
    def active(self) -> bool:
        return not self._over.is_set()

    @property
    def stopping(self) -> bool:
        return self._stop_requested and self.active

    def stop_and_wait(self, timeout: float = STOP_WAIT_S) -> bool:
        """Stop the tune (what it measured is stored; `boo-tui tune --resume ID` continues it) and wait for its
        thread. Blocking: call it from a worker thread. True when the thread ended."""
        with self._life:
            self._stop_requested = True
            thread, tuner = self._thread, self.tuner
            if thread is None or tuner is None:   # (a thread is started with its tuner)
                self._over.set()
                return True
        tuner.stop()
        thread.join(timeout)
        return not thread.is_alive()

    def kill_children(self) -> None:
        """Last resort (a second stop signal): kill the tuner session's worker processes, taking no lock."""
        session = getattr(self.tuner, "session", None)
        if session is not None:
            session.kill_children()

    def _work(self) -> None:
        assert self.tuner is not None
        paths: list[str] = []
        error: str | None = None
        try:
            import optuna  # noqa: F401  (imported now rather than mid-search: ~0.6 s of import in this thread)

            self.tuner.run(self.inputs)
            if not self.tuner.stopped:
                paths = self._write(self.tuner)
        except BooError as e:
            error = str(e)
        except OSError as e:
            error = f"cannot write the results to {self.settings.out_dir}: {e.strerror or e}"
        except Exception as e:  # noqa: BLE001 - shown in the tune screen, never as a traceback
            error = f"{type(e).__name__}: {one_line(e)}"
        stopped = self._stop_requested or bool(self.tuner.stopped)
        self.finished = TuneFinished(paths=paths, tune_id=self.tuner.tune_id, db_path=str(self.settings.db_path),
                                     stopped=stopped, error=None if stopped else error)
        self._over.set()
        self._post(self.finished)

    def _write(self, tuner: Tuner) -> list[str]:
        from boo_engine.api import write_outputs

        target = tuner.session.target.name if tuner.session is not None else (self.settings.target or "cpu")
        written = write_outputs(self.settings.out_dir, tuner.kernels, tuner.environment, target=target,
                                settings=tuner.settings.to_dict())
        return [str(p) for p in written]

    # ---- from the tuner's thread -----------------------------------------------------------------------------
    def _on_tune_event(self, event: TuneEvent) -> None:
        self._post(TuneEventPosted(event))

    def _on_session_event(self, event: ev.Event) -> None:
        if isinstance(event, _SAMPLE_EVENTS) and event.job_id:
            with self._lock:
                self._changed.add(event.job_id)

    def _post(self, message: Message) -> None:
        try:
            if self._target is not None:
                self._target.post_message(message)
        except Exception:  # noqa: BLE001 - the tuner must never die of a UI problem (a screen closing)
            pass

    # ---- for the UI thread -----------------------------------------------------------------------------------
    def take_changed(self) -> set[str]:
        """The jobs whose samples changed since the last call."""
        with self._lock:
            out, self._changed = self._changed, set()
        return out

    def samples(self, job_id: str | None) -> tuple[float, ...]:
        """A copy of a job's samples in the tuner's session (its latest measurement), () when unknown."""
        session = getattr(self.tuner, "session", None)
        result = session.jobs.get(job_id or "") if session is not None else None
        return tuple(result.samples_us) if result is not None else ()
