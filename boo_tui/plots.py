"""Latency plots drawn with plotext 6 and shown in a Textual widget.

plotext 6 has no Textual binding (textual-plotext needs plotext < 6), so `PlotView` builds the figure itself:
plotext renders to a string with ANSI colours, `rich.text.Text.from_ansi` turns it into a renderable, and the
widget shows it at its own size. plotext's figure is module-global state: the widgets build plots on the UI thread,
only when their data or size changed, at most `MAX_HZ` times a second, and every render holds `_FIGURE` (the
session's opening thread draws one plot to warm plotext up, and a dashboard that quit while opening leaves that
thread running beside the next one's).
"""
from __future__ import annotations

import functools
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import plotext
from rich.console import Group
from rich.text import Text
from textual.widgets import Static

MAX_HZ = 5.0
MAX_POINTS = 4000        # timeline points kept per series (plotext's braille canvas cannot show more anyway)


@dataclass(frozen=True)
class Series:
    label: str
    samples_us: tuple[float, ...]


def _median(xs: tuple[float, ...]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def _quantile(sorted_xs: list[float], q: float) -> float:
    return sorted_xs[min(len(sorted_xs) - 1, max(0, int(q * (len(sorted_xs) - 1))))]


#: xterm-256 colours given to the series in turn; the legend line (drawn with Rich, outside plotext, because
#: plotext drops its in-canvas legend when it does not fit the small plots of an 80x24 screen) uses the same.
PALETTE = [12, 10, 9, 14, 13, 11, 208, 15]
_THEME = "boo"
plotext.add_theme(_THEME, text=244, sequence=PALETTE)


def series_color(index: int) -> int:
    return PALETTE[index % len(PALETTE)]


def legend_text(series: list[Series]) -> Text:
    """One line naming each series in its colour, with its median and sample count."""
    out = Text(no_wrap=True, overflow="ellipsis")
    for i, s in enumerate(x for x in series if x.samples_us):
        if i:
            out.append("  ")
        out.append("█ ", style=f"color({series_color(i)})")
        out.append(f"{s.label} median {_median(s.samples_us):.4g}us n={len(s.samples_us)}")
    return out


def upper_fence(sorted_xs: list[float]) -> float:
    """Where the slow-outlier tail starts: Q3 + 3 IQR (never below the 99th percentile). Latency outliers are
    upward (an interrupt, a page fault); one of them must not squash the distribution into one bar."""
    q1, q3 = _quantile(sorted_xs, 0.25), _quantile(sorted_xs, 0.75)
    fence = q3 + 3 * max(q3 - q1, 1e-9 * abs(q3))
    if len(sorted_xs) >= 100:
        fence = max(fence, _quantile(sorted_xs, 0.99))
    return min(fence, sorted_xs[-1])


_FIGURE = threading.Lock()    # plotext's one figure: one plot is built at a time
_R = TypeVar("_R")


def _one_figure(render: Callable[..., _R]) -> Callable[..., _R]:
    """Build the plot holding `_FIGURE`: two threads drawing at once would mix their plots (or raise)."""

    @functools.wraps(render)
    def locked(*args, **kwargs) -> _R:
        with _FIGURE:
            return render(*args, **kwargs)

    return locked


def _fresh_figure(width: int, height: int, title: str):
    fig = plotext.figure
    fig.clear()
    fig.theme(_THEME)
    fig.legend(active=False)
    fig.plot_size(max(width, 20), max(height, 6))
    if title:
        fig.title(title)
    return fig


def _clip(series: list[Series]) -> tuple[list[Series], float, int]:
    """The series that have samples, the upper fence over all their samples, and how many lie above it."""
    data = [s for s in series if s.samples_us]
    every = sorted(x for s in data for x in s.samples_us)
    hi = upper_fence(every) if every else 0.0
    return data, hi, sum(1 for x in every if x > hi)


@_one_figure
def render_histogram(series: list[Series], width: int, height: int, title: str = "") -> str:
    """Overlaid histograms of each series' samples (us), each with its median as a vertical line.

    The x range is clipped to the 99th percentile of all samples so one slow outlier does not squash the
    distribution; the title says when something was clipped."""
    data, hi, clipped = _clip(series)
    if not data:
        return ""
    note = f" ({clipped} above {hi:.4g} us not shown)" if clipped else ""
    fig = _fresh_figure(width, height, (title + note).strip())
    for s in data:
        xs = [x for x in s.samples_us if x <= hi] or list(s.samples_us)
        # about 2 sqrt(n) bins: enough shape for a few hundred samples, no comb of empty bins for twenty
        bins = max(5, min(width // 3, int(2 * math.sqrt(len(xs)))))
        fig.draw(fig.hist(xs, bins=bins))
    for i, s in enumerate(data):
        fig.line(_median(s.samples_us), orientation="vertical", pixel=series_color(i), style="heavy")
    fig.label("us per call", axis="x")
    return fig.build().string()


@_one_figure
def render_timeline(series: list[Series], width: int, height: int, title: str = "") -> str:
    """Each sample against its index: drift, throttling or a noisy neighbour show as trends and steps."""
    data, hi, clipped = _clip(series)
    if not data:
        return ""
    note = f" ({clipped} above {hi:.4g} us drawn at the top)" if clipped else ""
    fig = _fresh_figure(width, height, (title + note).strip())
    for s in data:
        ys = [min(y, hi) for y in s.samples_us]
        step = max(1, len(ys) // MAX_POINTS)
        xs = list(range(1, len(ys) + 1, step))
        fig.draw(fig.signal(xs, ys[::step]))
    fig.label("sample", axis="x")
    fig.label("us", axis="y")
    return fig.build().string()


RENDERERS = {"histogram": render_histogram, "timeline": render_timeline}


class PlotView(Static):
    """A plot of latency samples that redraws itself at most MAX_HZ times a second and only when stale.

    `set_series` is cheap (it only stores the data); the build happens in a throttled interval callback."""

    DEFAULT_CSS = "PlotView { height: 1fr; width: 1fr; }"

    def __init__(self, kind: str, *, empty: str = "no samples yet", **kwargs) -> None:
        super().__init__(empty, **kwargs)
        self.kind = kind
        self.empty = empty
        self.plot_title = ""
        self.series: list[Series] = []
        self._stale = True
        self._built_for: tuple | None = None
        self.renders = 0          # how many times the figure was built (tests check throttling)
        self.last_render_s = 0.0  # wall time of the last build

    def on_mount(self) -> None:
        self.set_interval(1.0 / MAX_HZ, self.redraw_if_stale)

    def on_resize(self) -> None:
        self._stale = True

    def set_series(self, series: list[Series], title: str = "") -> None:
        key = (title, tuple((s.label, len(s.samples_us)) for s in series))
        if key == self._built_for and series == self.series:
            return
        self.series = series
        self.plot_title = title
        self._stale = True

    def redraw_if_stale(self) -> None:
        if not self._stale:
            return
        w, h = self.content_size.width, self.content_size.height
        if w < 10 or h < 4:      # hidden (inactive tab) or too small: keep stale, draw when shown
            return
        self._stale = False
        self._built_for = (self.plot_title, tuple((s.label, len(s.samples_us)) for s in self.series))
        if not any(s.samples_us for s in self.series):
            message = self.empty if not self.series else (
                f"{self.plot_title}: no samples yet (r runs the queued jobs)" if self.plot_title else "no samples yet")
            self.update(Text(message, style="dim"), layout=False)
            return
        t0 = time.perf_counter()
        try:
            out = RENDERERS[self.kind](self.series, w, h - 1, self.plot_title)
        except Exception as e:  # noqa: BLE001 - a plotting bug must not take the dashboard down
            self.update(Text(f"plot failed: {e}", style="red"), layout=False)
            return
        self.last_render_s = time.perf_counter() - t0
        self.renders += 1
        # layout=False: the widget's size is set by CSS, so only this widget is repainted, nothing re-laid out
        self.update(Group(legend_text(self.series), Text.from_ansi(out, no_wrap=True, end="")), layout=False)


# ---- the roofline -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RoofPoint:
    """One measured kernel: arithmetic intensity (flop/byte) and achieved GFLOP/s, in the series `label`."""

    label: str
    intensity: float
    gflops: float


@_one_figure
def render_roofline(points: list[RoofPoint], ceilings: dict[str, float], bandwidth_gbs: float | None,
                    width: int, height: int, title: str = "") -> str:
    """Achieved GFLOP/s against arithmetic intensity, both log scale: one marker per kernel (a colour per
    series), and the ceilings: per dtype min(bandwidth x intensity, compute peak), the classic roofline."""
    fig = _fresh_figure(width, height, title)
    fig.ruler("x").scale("log")
    fig.ruler("y").scale("log")
    xs = [p.intensity for p in points] or [1.0]
    lo, hi = min(xs) / 2, max(xs) * 2
    if bandwidth_gbs and ceilings:
        ridge = max(ceilings.values()) / bandwidth_gbs
        lo, hi = min(lo, ridge / 4), max(hi, ridge * 4)
    grid = [lo * (hi / lo) ** (i / 199) for i in range(200)]
    labels = list(dict.fromkeys(p.label for p in points))
    for peak in ceilings.values():
        ys = [min(peak, bandwidth_gbs * x) if bandwidth_gbs else peak for x in grid]
        fig.draw(fig.signal(grid, ys, marker="·"))
    for label in labels:
        mine = [p for p in points if p.label == label]
        fig.draw(fig.signal([p.intensity for p in mine], [p.gflops for p in mine], marker="●"))
    fig.label("flop/byte (log)", axis="x")
    fig.label("GFLOP/s (log)", axis="y")
    return fig.build().string()


def roofline_legend(labels: list[str], ceilings: dict[str, float], bandwidth_gbs: float | None) -> Text:
    """The roofline's legend: the ceilings first (in the colours plotext gives them, in order), then the series."""
    out = Text(no_wrap=True, overflow="ellipsis")
    names = [f"{dt} roof {v:,.1f} GFLOP/s" for dt, v in ceilings.items()] + [f"● {lb}" for lb in labels]
    for i, name in enumerate(names):
        if i:
            out.append("  ")
        out.append("█ ", style=f"color({series_color(i)})")
        out.append(name)
    if bandwidth_gbs:
        out.append(f"  (slope: {bandwidth_gbs:,.1f} GB/s)")
    return out
