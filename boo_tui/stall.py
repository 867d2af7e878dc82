"""Measure how long the dashboard's event loop stalls: the tests and benchmarks/bench_tui_stall.py use it.

A timer on the app fires every `interval_s`; a timer callback goes through the app's message queue, so the gap
between two callbacks includes any handler that hogs the UI thread. The largest gap minus the interval is the
longest the user could have waited for a key press or a redraw. On a loaded host most of a gap can be the OS
running other processes: the UI thread's own CPU time between two ticks (`max_busy_s`) is the part that is the
dashboard's work, whatever the load.
"""
from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from textual.message_pump import MessagePump
    from textual.timer import Timer


class StallMonitor:
    def __init__(self, app: MessagePump, interval_s: float = 0.01) -> None:
        self.app = app
        self.interval_s = interval_s
        self.max_gap_s = 0.0
        self.ticks = 0
        self.gaps_s: list[float] = []
        self.long_gaps: list[tuple[float, float]] = []   # (seconds since start, gap) of gaps over 50 ms
        self._t0 = time.perf_counter()
        self._last: float | None = None
        self._last_cpu = 0.0
        self.max_busy_s = 0.0      # the most CPU time the UI thread used between two ticks
        self.busy_s: list[float] = []
        self._timer: Timer | None = None

    def start(self) -> StallMonitor:
        self._last = self._t0 = time.perf_counter()
        self._last_cpu = time.thread_time()
        self._timer = self.app.set_interval(self.interval_s, self._tick)
        return self

    def _tick(self) -> None:
        now, cpu = time.perf_counter(), time.thread_time()     # (the tick runs on the UI thread)
        busy, self._last_cpu = cpu - self._last_cpu, cpu
        self.busy_s.append(busy)
        self.max_busy_s = max(self.max_busy_s, busy)
        if self._last is not None:
            gap = now - self._last
            self.gaps_s.append(gap)
            if gap > 0.05:
                self.long_gaps.append((now - self._t0, gap))
            self.max_gap_s = max(self.max_gap_s, gap)
        self._last = now
        self.ticks += 1

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None

    @property
    def max_stall_s(self) -> float:
        """Largest gap beyond the timer's own interval."""
        return max(0.0, self.max_gap_s - self.interval_s)


class ThreadProbe:
    """A plain thread that sleeps 5 ms at a time and records its largest oversleep. It tells the causes of a
    loop stall apart: if this thread stalls as long as the event loop, the whole process was held up (the OS
    gave it no CPU, or C code held the GIL); if only the loop stalls, Python code on the UI thread was busy."""

    def __init__(self) -> None:
        self.max_gap_s = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        last = time.perf_counter()
        while not self._stop.is_set():
            time.sleep(0.005)
            now = time.perf_counter()
            self.max_gap_s = max(self.max_gap_s, now - last - 0.005)
            last = now

    def start(self) -> ThreadProbe:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
