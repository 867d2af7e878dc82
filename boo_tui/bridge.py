"""From engine threads to the UI thread without ever blocking the engine.

The session calls `EventBridge.listener(event)` from its worker threads while it measures. The listener must be
quick and must not wait on the UI (`call_from_thread` would block the measuring thread until the UI ran), so it
only appends to a buffer under a lock and, when none is pending, posts one `EventsReady` poke (a non-blocking,
thread-safe queue put) that `can_replace` its predecessor. However many events arrive while the UI is busy, the
UI drains them, in the engine's order, in one handler. Every event comes this way, not only sample batches:
loading a captured model's 1,000 kernels queues 2,000 jobs at once, and 2,000 separate messages kept the event
loop from drawing for most of a second (`benchmarks/bench_load_1000.py`).
"""
from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from boo_engine import events as ev

from .messages import EventsReady
from .model import shape_label


class EventBridge:
    """Turns session events into buffered events plus `EventsReady` pokes for `target` (the app)."""

    def __init__(self, target: Any) -> None:
        self._target = target
        self._lock = threading.Lock()
        self._pending: list[ev.Event] = []
        self._poked = False

    def listener(self, event: ev.Event) -> None:
        """The session's listener. Called from engine threads; never blocks, never raises."""
        try:
            if isinstance(event, ev.JobQueued) and event.result is not None:
                # the table's shape column parses the command: done here, on the engine's thread, it costs the
                # UI nothing (1,000 labels were 0.43 s of one table build); shape_label caches it
                shape_label(event.result.command)
            with self._lock:
                self._pending.append(event)
                if self._poked:
                    return
                self._poked = True
            self._target.post_message(EventsReady())
        except Exception:  # noqa: BLE001 - the engine must never die of a UI problem (e.g. app closing)
            pass

    def idle(self) -> bool:
        """No event is waiting for the UI."""
        with self._lock:
            return not self._pending

    def drain(self) -> list[ev.Event]:
        """Take every buffered event, oldest first (UI thread)."""
        with self._lock:
            out, self._pending = self._pending, []
            self._poked = False
        return out

    def put_back(self, events: Sequence[ev.Event]) -> None:
        """Return events the UI had no time for this frame: they go before any that came since, and a new poke
        makes the UI take them next (UI thread)."""
        if not events:
            return
        with self._lock:
            self._pending[:0] = list(events)
            poke, self._poked = not self._poked, True
        if poke:
            self._target.post_message(EventsReady())
