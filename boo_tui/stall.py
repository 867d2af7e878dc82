"""Measure how long the dashboard's event loop stalls: the tests and benchmarks/bench_tui_stall.py use it.

A timer on the app fires every `interval_s`; a timer callback goes through the app's message queue, so the gap
between two callbacks includes any handler that hogs the UI thread. The largest gap minus the interval is the
longest the user could have waited for a key press or a redraw.
"""
from __future__ import annotations

import time
from typing import Any


class StallMonitor:
    def __init__(self, app: Any, interval_s: float = 0.01) -> None:
        self.app = app
        self.interval_s = interval_s
        self.max_gap_s = 0.0
        self.ticks = 0
        self.gaps_s: list[float] = []
        self.long_gaps: list[tuple[float, float]] = []   # (seconds since start, gap) of gaps over 50 ms
        self._t0 = time.perf_counter()
        self._last: float | None = None
        self._timer: Any = None

    def start(self) -> "StallMonitor":
        self._last = self._t0 = time.perf_counter()
        self._timer = self.app.set_interval(self.interval_s, self._tick)
        return self

    def _tick(self) -> None:
        now = time.perf_counter()
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
