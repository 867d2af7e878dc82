"""The roofline of this session's results: achieved GFLOP/s against arithmetic intensity (both log scale), one
point per kernel and variant/backend, under the machine's measured ceilings (the bandwidth slope and a flat
compute roof per dtype).

The peaks are the engine's (`Session.peaks`: looked up or measured on the engine's thread with the run's first
result): this screen only draws what it is handed, and never measures or writes anything.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from rich.console import Group
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static

from boo_engine.api import DONE, JobResult

from ..cells import fmt_gflops
from ..plots import RoofPoint, render_roofline, roofline_legend

if TYPE_CHECKING:
    from boo_engine.api import Peaks


def roof_points(results: Iterable[JobResult]) -> list[tuple[RoofPoint, JobResult]]:
    """The points a plot can place: done results with both a FLOP count and a byte count (an op without a FLOP
    formula has no GFLOP/s to place)."""
    out = []
    for r in results:
        s = r.stats
        if r.status != DONE or s is None or not s.gflops or not s.gbps:
            continue
        out.append((RoofPoint(f"{r.variant}/{r.backend}", s.gflops / s.gbps, s.gflops), r))
    return out


class RooflinePlot(Static):
    """The plot; drawn on the UI thread (plotext's figure is global) whenever its size changes."""

    DEFAULT_CSS = "RooflinePlot { height: 2fr; width: 1fr; }"

    def __init__(self, points: list[RoofPoint], ceilings: dict[str, float], bandwidth: float | None, *,
                 id: str | None = None) -> None:
        super().__init__("", id=id)
        self.points = points
        self.ceilings = ceilings
        self.bandwidth = bandwidth
        self.renders = 0
        self.plot_text = ""      # the last figure drawn, as plain text (tests read it)

    def on_resize(self) -> None:
        self.redraw()

    def redraw(self) -> None:
        w, h = self.content_size.width, self.content_size.height
        if w < 20 or h < 6:
            return
        if not self.points:
            self.update(Text("no kernel with a FLOP count measured yet", style="dim"))
            return
        try:
            out = render_roofline(self.points, self.ceilings, self.bandwidth, w, h - 1)
        except Exception as e:  # noqa: BLE001 - a plotting bug must not take the dashboard down
            self.update(Text(f"plot failed: {e}", style="red"))
            return
        self.renders += 1
        self.plot_text = Text.from_ansi(out).plain
        labels = list(dict.fromkeys(p.label for p in self.points))
        self.update(Group(roofline_legend(labels, self.ceilings, self.bandwidth),
                          Text.from_ansi(out, no_wrap=True, end="")))


class RooflineScreen(Screen):
    """The roofline plot over a table of its points (kernel, column, intensity, GFLOP/s, % of roofline)."""

    BINDINGS = [Binding("escape,p", "app.pop_screen", "Back")]

    def __init__(self, results: Iterable[JobResult], peaks: Peaks | None) -> None:
        super().__init__(id="roofline")
        self.pairs = roof_points(results)
        self.peaks = peaks
        ceilings: dict[str, float] = {}
        bandwidth = None
        if peaks is not None:
            ceilings = {p.dtype: p.value for p in peaks.entries if p.kind == "compute" and p.dtype}
            bandwidth = peaks.bandwidth.value if peaks.bandwidth is not None else None
        self.ceilings = ceilings
        self.bandwidth = bandwidth

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(self._info(), id="roofline-info", classes="hint")
        yield RooflinePlot([p for p, _ in self.pairs], self.ceilings, self.bandwidth, id="roofline-plot")
        yield DataTable(id="roofline-points", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def _info(self) -> str:
        if self.peaks is None:
            return ("no peaks yet: the engine looks them up (or measures them, `boo-tui peak`) with the run's first "
                    "result; the points are drawn without ceilings")
        p = self.peaks
        return (f"ceilings: {p.machine_key} ({p.how}, {p.measured_at}); "
                f"{len(self.pairs)} kernels with a FLOP count")

    def on_mount(self) -> None:
        self.title = "boo-tui: roofline"
        table = self.query_one("#roofline-points", DataTable)
        for key in ("kernel", "column", "flop/byte", "GFLOP/s", "% roof", "median us"):
            table.add_column(key, key=key)
        for point, r in self.pairs:
            s = r.stats
            table.add_row(r.func_name, point.label, f"{point.intensity:.3g}", fmt_gflops(point.gflops),
                          f"{r.pct_roofline:.1f}" if r.pct_roofline is not None else "-",
                          f"{s.median_us:.4g}" if s is not None else "-")
