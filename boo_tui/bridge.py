"""From engine threads to the UI thread without ever blocking the engine, and without flooding the UI.

The session calls `EventBridge.listener(event)` from its worker threads. The listener must be quick and must not
wait on the UI (`call_from_thread` would block the measuring thread until the UI ran), so it appends the event to
a buffer under a lock and, when the buffer was empty, posts one `EventsReady` poke (a non-blocking, thread-safe
queue put). However many events arrive while the UI is busy (a captured model's 2,000 `JobQueued`, then 2,000
`JobStatus` as its compiles start, sample batches while a kernel is measured), the UI takes them in order, a chunk
at a time (`take`), letting the event loop run between chunks: one message instead of thousands, each of which
Textual would have dispatched without letting the screen or a key press in between.
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from boo_engine.api import events as ev

from .messages import EventsReady
from .run_model import shape_label

if TYPE_CHECKING:
    from textual.message_pump import MessagePump


class EventBridge:
    """Turns session events into one poke at a time for `target` (the app), and hands them over in order."""

    def __init__(self, target: MessagePump) -> None:
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

    def take(self, limit: int) -> list[ev.Event]:
        """The oldest `limit` events (UI thread). An empty answer means the buffer is empty and the next event
        posts a new poke; until then the poke's handler is expected to come back for the rest."""
        with self._lock:
            out, self._pending = self._pending[:limit], self._pending[limit:]
            if not out:
                self._poked = False
        return out
