"""One stored tune, read-only: its kernels (default, tuned, ratio with CI, what won or why nothing did) and the
candidates of the highlighted kernel (status, ratio, stage, what it changes, the compiler's or the check's error),
as the tune tables hold them (`boo_engine.tune.records.load_kernels`, read in a thread worker). Nothing is
measured again."""
from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Footer, Header, Static

from boo_engine.api import IMPROVED, MEASURED, Tried, TunedKernel, find_tune, format_us, load_kernels

from .base import WorkerScreen, fmt_time

if TYPE_CHECKING:
    from boo_engine.api import Store, TuneRow

KERNEL_COLUMNS = [("kernel", "kernel"), ("status", "outcome"), ("default", "default us"), ("tuned", "tuned us"),
                  ("ratio", "ratio"), ("ci", "95% CI"), ("tried", "tried"), ("measured", "measured"),
                  ("message", "what won / why not")]
CANDIDATE_COLUMNS = [("status", "status"), ("ratio", "ratio"), ("median", "median us"), ("stage", "stage"),
                     ("description", "what it changes"), ("error", "error")]


def ranked(tried: list[Tried]) -> list[Tried]:
    """Measured candidates fastest first, then the ones that failed (compile, spec not applied, numerics)."""
    return sorted(tried, key=lambda t: (not t.ok, float(t.ratio) if t.ok and t.ratio is not None else 0.0))


class TuneReviewScreen(WorkerScreen):
    """A stored tune's kernels and, for the highlighted kernel, every candidate it tried."""

    BINDINGS = [Binding("escape", "app.pop_screen", "Back")]

    def __init__(self, store: Store, tune_id: int) -> None:
        super().__init__(id="tune-review")
        self.store = store
        self.tune_id = tune_id
        self.kernels: dict[str, TunedKernel] = {}
        self.shown: str | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(f"tune {self.tune_id}", id="tune-info", classes="hint")
        yield DataTable(id="tune-review-kernels", cursor_type="row", zebra_stripes=True)
        yield Static("candidates of the highlighted kernel", id="candidates-title", classes="hint")
        yield DataTable(id="tune-candidates", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        self.title = f"boo-tui: tune {self.tune_id}"
        for selector, columns in (("#tune-review-kernels", KERNEL_COLUMNS), ("#tune-candidates", CANDIDATE_COLUMNS)):
            table = self.query_one(selector, DataTable)
            for key, label in columns:
                table.add_column(label, key=key)
        self.query_one("#tune-review-kernels", DataTable).focus()
        self._call_in_thread(self._load, then=self._show)

    def _load(self) -> tuple[TuneRow, dict[str, TunedKernel]]:
        return find_tune(self.store, self.tune_id), load_kernels(self.store, self.tune_id)

    def _show(self, loaded: tuple[TuneRow, dict[str, TunedKernel]]) -> None:
        info, self.kernels = loaded
        settings = info.get("settings") or {}
        self.query_one("#tune-info", Static).update(
            f"tune {self.tune_id}  started {fmt_time(info.get('started_at'))}  status {info.get('status')}  "
            f"target {info.get('target') or '-'}  budget {settings.get('budget', '-')}  seed "
            f"{settings.get('seed', '-')}  out {info.get('out_dir') or '-'}\n{info.get('command_line') or ''}")
        table = self.query_one("#tune-review-kernels", DataTable)
        for k in self.kernels.values():
            improved = k.status == IMPROVED
            ci = f"{k.ci_low:.3f}-{k.ci_high:.3f}" if improved and k.ci_low is not None and k.ci_high is not None \
                else ""
            table.add_row(
                k.func_name, Text(k.status, style="green" if improved else "yellow"), format_us(k.baseline_us),
                format_us(k.best_us) if improved else "-",
                Text(f"{k.ratio:.3f}", style="bold green") if improved and k.ratio else Text("-", style="dim"),
                ci, str(len(k.tried)), str(sum(1 for t in k.tried if t.status == MEASURED)), k.message,
                key=k.func_name)
        if self.kernels:
            self._show_candidates(next(iter(self.kernels)))
        else:
            self.notify(f"tune {self.tune_id} stored no kernel")

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "tune-review-kernels" and event.row_key is not None and event.row_key.value:
            event.stop()
            self._show_candidates(event.row_key.value)

    def _show_candidates(self, func_name: str) -> None:
        k = self.kernels.get(func_name)
        if k is None or func_name == self.shown:
            return
        self.shown = func_name
        self.query_one("#candidates-title", Static).update(
            f"{len(k.tried)} candidates of {func_name} (ratio: its median / the default's measured beside it, "
            f"< 1 faster; fastest first)")
        table = self.query_one("#tune-candidates", DataTable)
        table.clear()
        for t in ranked(k.tried):
            winner = t.key == k.best_key
            ratio = Text("-", style="dim") if t.ratio is None else Text(
                f"{t.ratio:.3f}" + (" won" if winner else ""),
                style="bold green" if winner else ("green" if t.ratio < 1 else ""))
            status = Text(t.status, style="" if t.status == MEASURED else "red")
            with contextlib.suppress(Exception):   # the same key twice: shown once
                table.add_row(status, ratio, format_us(t.median_us), t.stage, t.description, t.error or "",
                              key=t.key)
