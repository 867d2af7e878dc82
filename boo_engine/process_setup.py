"""What every child process of the engine (compile workers, the benchmark worker) does first."""
from __future__ import annotations

import contextlib
import os
import signal

from .locations import CHILD_LOG_ENV, child_log

#: CHILD_LOG_ENV: when set, children write their stdout and stderr to this file instead of the parent's terminal.
#: The dashboard sets it: a stray line from a child (a library warning, a runtime message) would otherwise draw
#: over the screen.
__all__ = ["CHILD_LOG_ENV", "STOP_SIGNALS", "ignore_stop_signals", "redirect_output_if_asked"]

#: what ends a run: Ctrl-C (sent to the whole foreground process group), kill's default, a closed terminal
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def redirect_output_if_asked() -> None:
    """Point file descriptors 1 and 2 at $BOO_CHILD_LOG (appending), so output written below Python (C++ runtime
    messages) is caught too. Without the variable, or if the file cannot be opened, nothing changes."""
    path = child_log()
    if not path:
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    except OSError:
        return
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def ignore_stop_signals() -> None:
    """Leave stopping to the parent (Ctrl-C reaches every process of the foreground group): the parent stops its
    children by message, or with SIGKILL, once it has recorded what they were doing."""
    for sig in STOP_SIGNALS:
        with contextlib.suppress(ValueError, OSError):
            signal.signal(sig, signal.SIG_IGN)
