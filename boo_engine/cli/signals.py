"""How every front end stops on SIGINT, SIGTERM and SIGHUP.

The first signal asks for a clean stop: the front end notices it (`received`), calls `Session.interrupt()` (every
unfinished job and the run end `interrupted`, so `--resume` measures them again) and exits 128 + the signal's
number. A second signal, while that stop runs, exits at once (128 + its number, 130 for Ctrl-C): the workers are
killed (`hard_exit`) and the process leaves with `os._exit`; the store's WAL keeps the file consistent and the run
row still says `running` (with the owner's pid, which `Store.list_runs` and `--resume` see is gone: interrupted).

The children ignore these signals (Ctrl-C reaches the whole foreground process group): the parent stops them.
"""
from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable
from types import FrameType

from ..process_setup import STOP_SIGNALS

#: a signal's handler as `signal.signal` takes and returns it: a function, SIG_DFL / SIG_IGN, or None (not set
#: from Python)
_Handler = Callable[[int, FrameType | None], object] | int | None

__all__ = ["STOP_SIGNALS", "StopSignals"]


class StopSignals:
    """The stop request of a front end: installed in the main thread (`install`, `restore`), or fed by an event
    loop's own signal handlers (`notice`)."""

    def __init__(self, prog: str, hard_exit: Callable[[], None] | None = None) -> None:
        self.prog = prog
        self.hard_exit = hard_exit          # lock-free: it may run while the main thread holds any lock
        self.received: int | None = None    # the first signal's number
        self.event = threading.Event()
        #: raise KeyboardInterrupt on the first signal (before the run starts: nothing to stop cleanly yet)
        self.raising = True
        self._previous: dict[int, _Handler] = {}

    def install(self) -> StopSignals:
        for sig in STOP_SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handler)
        return self

    def restore(self) -> None:
        for sig, previous in self._previous.items():
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(sig, previous)
        self._previous = {}

    @property
    def exit_code(self) -> int:
        return 128 + (self.received or signal.SIGINT)

    @property
    def name(self) -> str:
        return signal.Signals(self.received or signal.SIGINT).name

    def notice(self, signum: int) -> None:
        """A stop signal arrived: remember the first; exit at once on the second."""
        if self.received is not None:
            self._exit_now(signum)
        self.received = signum
        self.event.set()

    def _handler(self, signum: int, _frame: FrameType | None) -> None:
        self.notice(signum)
        if self.raising:
            raise KeyboardInterrupt

    def _exit_now(self, signum: int) -> None:
        # no print(): the main thread may be in the middle of writing stderr (a reentrant call would raise)
        with contextlib.suppress(OSError):
            os.write(2, f"\n{self.prog}: {signal.Signals(signum).name} again: exiting now; the run stays "
                        f"resumable (--resume)\n".encode())
        if self.hard_exit is not None:
            with contextlib.suppress(Exception):
                self.hard_exit()
        os._exit(128 + signum)

