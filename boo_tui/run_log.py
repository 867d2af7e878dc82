"""What the dashboard tells the user: lines in the Log tab and toasts, for the engine's events and for errors.

Warnings can come per job (a noisy host): one toast per WARNING_TOAST_S, every one of them in the Log tab."""
from __future__ import annotations

import time

from rich.text import Text
from textual.app import App
from textual.widgets import RichLog

from boo_engine.api import events as ev

WARNING_TOAST_S = 10


class RunLog:
    """The Log tab (`#log`) and the toasts of the dashboard `app`."""

    def __init__(self, app: App[int]) -> None:
        self.app = app
        self._last_warning = 0.0

    def line(self, level: str, message: str) -> None:
        """A line in the Log tab."""
        style = {"error": "bold red", "warning": "yellow"}.get(level, "")
        stamp = time.strftime("%H:%M:%S")
        try:
            self.app.query_one("#log", RichLog).write(Text(f"{stamp} {level}: {message}", style=style))
        except Exception:  # noqa: BLE001 - the log panel is not mounted on every screen state
            pass

    def error(self, message: str, *, title: str = "", timeout: float = 10) -> None:
        """An error: in the Log tab, and a toast."""
        self.line("error", message)
        self.app.notify(message, title=title, severity="error", timeout=timeout)

    def event(self, event: ev.Event) -> None:
        """What an engine event says: a failed job's error, the engine's own log lines, a run started or ended."""
        if isinstance(event, ev.JobFinished) and event.result is not None and event.result.error:
            r = event.result
            self.line("error", f"{r.func_name} [{r.variant}/{r.backend}]: {r.error}")
        elif isinstance(event, ev.Log):
            self.line(event.level, event.message)
            if event.level == "error":
                self.app.notify(event.message, severity="error")
            elif event.level == "warning" and time.monotonic() - self._last_warning > WARNING_TOAST_S:
                self._last_warning = time.monotonic()
                self.app.notify(event.message + "  (more in the Log tab)", severity="warning")
        elif isinstance(event, ev.RunStarted):
            self.line("info", f"run {event.run_id} started: {event.total_jobs} jobs")
        elif isinstance(event, ev.RunFinished):
            summary = f"run {event.run_id} {event.status}: {event.ok} ok, {event.failed} failed"
            self.line("info", summary)
            self.app.notify(summary, severity="information" if not event.failed else "warning")


__all__ = ["WARNING_TOAST_S", "RunLog"]
