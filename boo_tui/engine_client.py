"""The dashboard's one way into the engine: the session, and the engine thread every call into it runs on.

The UI thread never compiles, exports, measures, runs iree-opt, reads files or writes the DB. So every session
call goes through `EngineClient.call`, which runs it on one thread of our own (calls keep their order, and none
blocks the event loop) and posts what it returns as the typed message the caller asked for, or `EngineFailed`
with a one-line reason. Opening the session (creating it, reading the inputs) happens on a thread worker of the
app (`open`), closing it in `close` / `close_now`.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from textual.message import Message

from boo_engine.api import BooError, JobResult, Session, SessionConfig, check_named_kernels, one_line
from boo_engine.api import events as ev

from .messages import EngineFailed, SessionFailed, SessionOpened

T = TypeVar("T")

#: how long quitting waits for the session to close (its worker processes stop, the run is saved)
CLOSE_TIMEOUT_S = 30


class EngineClient:
    """The session (None until it opened, or when it could not) and the engine thread; `config`: the settings
    the session is opened with.

    `post` hands a message to the UI thread (the app's `post_message`: safe from any thread), `notify` shows a
    toast (UI thread only)."""

    def __init__(self, config: SessionConfig, post: Callable[[Message], object], notify: Callable[..., object]) -> None:
        self._config = config
        self._post = post
        self._notify = notify
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="boo-tui-engine")
        self.session: Session | None = None
        self._created: Session | None = None     # created but not yet handed over: a quit meanwhile closes it
        self.error: str | None = None            # why there is no session
        self.closing = False

    @property
    def config(self) -> SessionConfig:
        """The run's settings: the session's own once it opened (its --min-effect and seed decide the verdicts)."""
        return self.session.config if self.session is not None else self._config

    @property
    def any_session(self) -> Session | None:
        """The session, or the one still being opened (what quitting and a stop signal must close)."""
        return self.session or self._created

    # ---- opening ------------------------------------------------------------------------------------------
    def open(self, inputs: list[str], listener: Callable[[ev.Event], None]) -> None:
        """Thread worker: create the session and add the inputs (opening the DB, reading files). Posts
        `SessionOpened` (with the inputs it refused, one line each) or `SessionFailed`."""
        try:
            session = Session(self._config, listener=listener)
        except Exception as e:  # noqa: BLE001 - a bad target or DB path is a message, not a traceback
            self._post(SessionFailed(one_line(e)))
            return
        self._created = session
        added: list[JobResult] = []
        errors: list[str] = []
        for item in inputs:
            try:
                added += session.add_inputs([item])
            except Exception as e:  # noqa: BLE001
                errors.append(one_line(e))
        hold = False
        try:   # a per-kernel table naming no kernel of the run: said, and the run waits for the user
            names = [r.func_name for r in added if r.func_name]
            errors += [f"note: {n}" for n in check_named_kernels(session.variants, names)]
        except BooError as e:
            errors.append(str(e))
            hold = True
        self._post(SessionOpened(session, added, errors, hold=hold))

    def opened(self, session: Session) -> None:
        self.session = session

    def failed(self, reason: str) -> None:
        self.error = reason

    def require(self) -> Session | None:
        """The session, or None after telling the user why there is none (yet)."""
        if self.session is None:
            self._notify(self.error or "the session is still opening", severity="warning")
        return self.session

    # ---- calls ----------------------------------------------------------------------------------------------
    def call(self, fn: Callable[..., T], *args: object, reply: Callable[[T], Message] | None = None,
             what: str = "") -> None:
        """Run `fn(*args)` on the engine thread. What it returns is posted as `reply(value)`; an error as
        `EngineFailed` (prefixed with `what`). Nothing runs once the dashboard is closing."""

        def task() -> None:
            try:
                value = fn(*args)
            except BooError as e:
                self._post(EngineFailed(f"{what}{e}"))
                return
            except Exception as e:  # noqa: BLE001
                self._post(EngineFailed(f"{what}{type(e).__name__}: {e}"))
                return
            if reply is not None:
                self._post(reply(value))

        if not self.closing:
            self._thread.submit(task)

    # ---- closing --------------------------------------------------------------------------------------------
    async def close(self) -> str | None:
        """Quitting (from the event loop): close the session off the UI thread; the error, if closing failed."""
        session = self.any_session
        error = None
        if session is not None:
            try:
                await asyncio.wait_for(asyncio.to_thread(session.close), timeout=CLOSE_TIMEOUT_S)
            except Exception as e:  # noqa: BLE001
                error = f"closing the session: {e}"
        self.shutdown()
        return error

    def close_now(self, *, interrupted: bool) -> None:
        """After the app ended (a normal quit closed it already: idempotent; covers ctrl+c and crashes). A stop
        signal marks every unfinished job and the run interrupted, never failed."""
        session = self.any_session
        if session is not None:
            try:
                if interrupted:
                    session.interrupt()
                session.close()
            except Exception:  # noqa: BLE001
                pass
        self.shutdown()

    def shutdown(self) -> None:
        self._thread.shutdown(wait=False, cancel_futures=True)

    def kill_children(self) -> None:
        """A second stop signal: the session's worker processes die now."""
        session = self.any_session
        if session is not None:
            session.kill_children()


__all__ = ["CLOSE_TIMEOUT_S", "EngineClient"]
