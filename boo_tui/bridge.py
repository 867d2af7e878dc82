"""From engine threads to the UI thread without ever blocking the engine.

The session calls `EventBridge.listener(event)` from its worker threads while it measures. The listener must be
quick and must not wait on the UI (`call_from_thread` would block the measuring thread until the UI ran), so it
only `post_message`s (a non-blocking, thread-safe queue put). Sample batches, the one flood, are buffered under a
lock and announced by a single `SamplesReady` poke that `can_replace` its predecessor: however many batches arrive
while the UI is busy, the UI drains them all in one go.
"""
from __future__ import annotations

import threading
from typing import Any

from boo_engine import events as ev

from .messages import EngineEvent, SamplesReady
from .model import shape_label


class EventBridge:
    """Turns session events into messages for `target` (the app)."""

    def __init__(self, target: Any) -> None:
        self._target = target
        self._lock = threading.Lock()
        self._pending: list[ev.SamplesAdded] = []
        self._poked = False

    def listener(self, event: ev.Event) -> None:
        """The session's listener. Called from engine threads; never blocks, never raises."""
        try:
            if isinstance(event, ev.JobQueued) and event.result is not None:
                # the table's shape column parses the command: done here, on the engine's thread, it costs the
                # UI nothing (1,000 labels were 0.43 s of one table build); shape_label caches it
                shape_label(event.result.command)
            if isinstance(event, ev.SamplesAdded):
                with self._lock:
                    self._pending.append(event)
                    if self._poked:
                        return
                    self._poked = True
                self._target.post_message(SamplesReady())
            else:
                self._target.post_message(EngineEvent(event))
        except Exception:  # noqa: BLE001 - the engine must never die of a UI problem (e.g. app closing)
            pass

    def idle(self) -> bool:
        """No sample batch is waiting for the UI."""
        with self._lock:
            return not self._pending

    def drain(self) -> list[ev.SamplesAdded]:
        """Take every buffered batch (UI thread)."""
        with self._lock:
            out, self._pending = self._pending, []
            self._poked = False
        return out
