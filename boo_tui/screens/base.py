"""What the screens share: a screen whose thread workers report back without blocking, and small formatters."""
from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Callable
from typing import TypeVar

from rich.text import Text
from textual import work
from textual.notifications import SeverityLevel
from textual.screen import Screen

from boo_engine.api import Comparison

from ..cells import REFERENCE_STYLE, VERDICT_STYLE
from ..messages import Deferred

T = TypeVar("T")


def fmt_time(value: str | float | None) -> str:
    """A stored time (ISO 8601, UTC) or Unix seconds, to the second; "-" for none."""
    if isinstance(value, (int, float)) and value > 1e9:
        return _dt.datetime.fromtimestamp(value).strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, str) and len(value) >= 19 and value[10] == "T":   # ISO 8601 from the store, UTC
        return value[:19].replace("T", " ")
    return "-" if value is None else str(value)


def ratio_text(c: Comparison | None, *, reference: bool = False) -> Text:
    """A comparison's ratio (< 1 faster), coloured by the engine's verdict: green faster, red slower, dim the
    same or too few samples, yellow unclear; the torch reference's column (`reference`) in the IREE kernel's
    colours: red where torch is faster."""
    if c is None or not math.isfinite(c.ratio):
        return Text("-", style="dim")
    return Text(f"{c.ratio:.3f}", style=(REFERENCE_STYLE if reference else VERDICT_STYLE).get(c.verdict, ""))


def plain_ratio_text(ratio: float | None) -> Text:
    """A ratio of medians the engine has not judged yet: shown dim, whatever its size."""
    if ratio is None or not math.isfinite(ratio):
        return Text("-", style="dim")
    return Text(f"{ratio:.3f}", style="dim")


class WorkerScreen(Screen):
    """A screen whose thread workers report back through Deferred messages (never blocking the loop)."""

    def on_deferred(self, message: Deferred) -> None:
        try:
            message.callback(*message.args)
        except Exception as e:  # noqa: BLE001
            self.notify(f"{type(e).__name__}: {e}", severity="error")

    def _call_in_thread(self, fn: Callable[..., T], *args: object, then: Callable[[T], None]) -> None:
        self._thread_call(fn, args, then)

    @work(thread=True, group="screen-io")
    def _thread_call(self, fn: Callable[..., T], args: tuple[object, ...], then: Callable[[T], None]) -> None:
        try:
            value = fn(*args)
        except Exception as e:  # noqa: BLE001 - shown in the UI, never as a traceback
            self.post_message(Deferred(self.notify, (f"{e}", "error")))
            return
        self.post_message(Deferred(then, (value,)))

    def notify(self, message: str, severity: SeverityLevel = "information", *, title: str = "",
               timeout: float | None = None, markup: bool = True) -> None:
        self.app.notify(message, title=title, severity=severity, timeout=timeout, markup=markup)
