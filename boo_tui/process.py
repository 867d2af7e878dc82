"""Process-wide chores of the dashboard: keeping garbage collection out of the UI's way, warming slow imports,
and keeping worker processes' output off the screen."""
from __future__ import annotations

import gc
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from textual.app import App

    from boo_engine.api import StopSignals

#: How often objects that survived so far are moved out of the cyclic collector's way (see freeze_long_lived).
GC_FREEZE_S = 2.0


def freeze_long_lived() -> None:
    """Keep full garbage collections short, so they never freeze the UI.

    Measured on a full run of sample_commands.txt: torch, Textual and the engine leave ~360k long-lived objects
    in this process, and Textual's render caches (Segments, Strips, row renderables) add ~50k more per minute.
    Every full collection walked them all, holding the GIL for 120-200 ms: the event loop and the engine threads
    stood still. gc.freeze() moves everything alive now into a generation the collector never scans. Frozen
    objects are still freed by reference counting (the render caches are acyclic), so only cyclic garbage
    older than GC_FREEZE_S waits for the process to exit; young cycles are still collected as usual."""
    gc.freeze()


def warm_plotext() -> None:
    """plotext imports most of itself on the first plot: draw one now, while the session opens. Only a warm-up:
    if it fails, the session still opens (a plot that fails later says so in the log)."""
    from .plots import Series, render_histogram

    try:
        render_histogram([Series("warm-up", (1.0, 2.0, 3.0))], 40, 10)
    except Exception:  # noqa: BLE001
        pass


def warm_up() -> None:
    """Engine thread, once the session opened: what a run imports (scipy, the compile pool, plotext)."""
    from boo_engine.api import warm_imports

    warm_imports()
    warm_plotext()


def start_resource_tracker() -> None:
    """Start multiprocessing's resource tracker now, while sys.stderr is still the real one.

    The session starts its worker processes lazily, from its own threads, while the app runs. By then Textual
    has replaced sys.stdout/stderr with capture objects whose fileno() is -1, and the tracker's first start
    (which passes stderr's fd to the child) fails with "bad value(s) in fds_to_keep". Once running, the
    tracker is reused and nothing else needs a real stderr fd."""
    try:
        from multiprocessing import resource_tracker

        resource_tracker.ensure_running()
    except Exception:  # noqa: BLE001 - without it a spawn may fail later, and that failure is reported then
        pass


def route_child_output() -> str:
    """Worker processes inherit this terminal: send their output to a log file instead of over the screen. The
    file is `workers.log` in a private (0700, unpredictable) folder of its own: the predictable
    /tmp/boo-tui-<pid>-workers.log it was could be a link another user planted, followed when opened. $BOO_CHILD_LOG
    (the user's own choice) is used as given. Returns the path; `close_child_output` tidies it."""
    import os
    import tempfile

    from boo_engine.api import CHILD_LOG_ENV

    path = os.environ.get(CHILD_LOG_ENV)
    if not path:
        path = os.path.join(tempfile.mkdtemp(prefix="boo-tui-"), "workers.log")
        os.environ[CHILD_LOG_ENV] = path
        _made_logs.append(path)
    return path


_made_logs: list[str] = []


def close_child_output() -> str | None:
    """At exit: the log `route_child_output` made is removed with its folder when the workers wrote nothing; a
    log with something in it is kept, and its path returned for the user to be told."""
    import os

    kept = None
    while _made_logs:
        path = _made_logs.pop()
        try:
            if os.path.getsize(path) > 0:
                kept = path
                continue
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError:
            continue
        try:
            os.rmdir(os.path.dirname(path))
        except OSError:
            pass
    return kept


def handle_stop_signals(app: App[int], stops: StopSignals) -> None:
    """SIGINT, SIGTERM, SIGHUP (a `kill`, a closed terminal; Ctrl-C itself is a key in the dashboard) quit the
    dashboard as its quit key does, the run ending `interrupted` (run_app interrupts the session); a second one
    exits at once (boo_engine.cli.signals). Installed on the running event loop, from on_mount."""
    import asyncio

    from boo_engine.api import STOP_SIGNALS

    def on_signal(signum: int) -> None:
        stops.notice(signum)        # the second one exits here
        app.exit(return_code=stops.exit_code)

    loop = asyncio.get_running_loop()
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, on_signal, sig)
