"""Two saved runs of the same commands side by side: the engine's comparison of stored runs
(`boo_engine.history.compare_stored`, what `boo-tui compare` prints: ratio B / A over the rounds, its CI, the verdict,
with the --min-effect and seed the newer run was measured with, and each side's evidence: rounds, samples that lost
their core, load, flags), and what differs between the two runs' environments."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Footer, Header, Static

from boo_engine.api import (
    VERDICT_MARK,
    Comparison,
    RunRef,
    compare_stored,
    format_us,
    geomean,
    load_run,
    run_settings,
    verdict_legend,
)

from ..cells import VERDICT_STYLE, command_cell
from .base import WorkerScreen, ratio_text

if TYPE_CHECKING:
    from boo_engine.api import Store


@dataclass(frozen=True)
class RunsCompared:
    """What the worker hands the screen: the comparisons and the settings they were decided with."""

    comparisons: dict[tuple[str, str, str], Comparison]
    min_effect: float
    seed: int
    settings_differ: bool       # the two runs were measured with different --min-effect or seed
    differences: tuple[str, ...] = ()   # what differs between the runs' environments and settings
    #: per comparison, what each side carries beside its numbers (rounds, lost samples, load, flags): `A · B`
    evidence: dict[tuple[str, str, str], str] = field(default_factory=dict)


class RunCompareScreen(WorkerScreen):
    """Two saved runs of the same commands side by side: median per run and their ratio (B / A) with the
    bootstrap CI and the engine's verdict."""

    BINDINGS = [Binding("escape", "app.pop_screen", "Back")]

    def __init__(self, store: Store, run_a: int, run_b: int) -> None:
        super().__init__(id="run-compare")
        self.store = store
        self.run_a, self.run_b = run_a, run_b

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(f"run {self.run_b} against run {self.run_a} (ratio < 1: run {self.run_b} faster)",
                     id="compare-summary", classes="hint")
        yield DataTable(id="run-compare-table", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        self.title = f"boo-tui: run {self.run_a} vs run {self.run_b}"
        table = self.query_one(DataTable)
        for key, label in [("kernel", "kernel"), ("column", "variant"), ("a", f"run {self.run_a} us"),
                           ("b", f"run {self.run_b} us"), ("ratio", "ratio"), ("ci", "95% CI"),
                           ("verdict", "verdict"), ("evidence", f"evidence: run {self.run_a} · run {self.run_b}"),
                           ("command", "command")]:
            table.add_column(label, key=key)
        self._call_in_thread(self._compute, then=self._show)

    def _compute(self) -> RunsCompared:
        """Worker thread: read both runs and compare them as `boo-tui compare` does, with the newer run's settings."""
        path = self.store.path
        a, b = load_run(RunRef(path, self.run_a)), load_run(RunRef(path, self.run_b))
        cmp = compare_stored(a, b, require_common=False)
        evidence = {}
        for key, c in cmp.comparisons.items():
            ev = cmp.evidence.get(key)
            evidence[key] = (f"{ev[0].short()} · {ev[1].short()}" if ev else "") + (f" ({c.reason})" if c.reason
                                                                                   else "")
        return RunsCompared(cmp.comparisons, cmp.min_effect, cmp.seed, run_settings(a.info) != run_settings(b.info),
                            tuple(f"{d.what}: {d.a} -> {d.b}" for d in cmp.differences), evidence)

    def _show(self, compared: RunsCompared) -> None:
        table = self.query_one(DataTable)
        comparisons = compared.comparisons
        for key, c in comparisons.items():
            _target, command, label = key
            ci = f"{c.ci_low:.3f}-{c.ci_high:.3f}" if math.isfinite(c.ci_low) and math.isfinite(c.ci_high) else "-"
            table.add_row(command_cell(command), label, format_us(c.baseline_median_us), format_us(c.variant_median_us),
                          ratio_text(c), ci, Text(c.verdict, style=VERDICT_STYLE.get(c.verdict, "")),
                          Text(compared.evidence.get(key, ""), style="dim"), Text(command, style="dim"))
        settings = (f"verdicts with run {self.run_b}'s min effect {compared.min_effect * 100:g}% and seed "
                    f"{compared.seed}" + (f" (run {self.run_a} used others)" if compared.settings_differ else ""))
        if comparisons:
            g = geomean(c.ratio for c in comparisons.values())
            marks = " ".join(f"{VERDICT_MARK[v]} {sum(1 for c in comparisons.values() if c.verdict == v)} {v}"
                             for v in VERDICT_MARK if any(c.verdict == v for c in comparisons.values()))
            self.query_one("#compare-summary", Static).update(
                f"run {self.run_b} against run {self.run_a}: {len(comparisons)} common results, geomean ratio "
                f"{g:.3f} (< 1: run {self.run_b} faster), {marks}; {settings}.\n"
                + verdict_legend(compared.min_effect) + self._differences(compared))
        else:
            self.query_one("#compare-summary", Static).update(
                f"runs {self.run_a} and {self.run_b} have no finished results in common" + self._differences(compared))

    def _differences(self, compared: RunsCompared) -> str:
        if not compared.differences:
            return ""
        return f"\nDiffers (run {self.run_a} -> run {self.run_b}): " + "; ".join(compared.differences)
