"""One saved run's results, read-only: a table, and the detail pane of the row under the cursor (for a model
measured by `boo-tui model`, where its time goes)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Footer, Header, Static

from boo_engine.api import JobResult, defaults_label, format_us, machine_label

from ..cells import fmt_gflops
from ..detail import render_detail
from ..run_model import JobView
from .base import WorkerScreen, fmt_time

if TYPE_CHECKING:
    from boo_engine.api import RunInfo, Store


class RunScreen(WorkerScreen):
    """One saved run's results, read-only: a table, and the detail pane of the row under the cursor (for a model
measured by `boo-tui model`, where its time goes)."""

    BINDINGS = [Binding("escape", "app.pop_screen", "Back"),
                Binding("k", "trend", "Kernel trend")]

    def __init__(self, store: Store, run_id: int) -> None:
        super().__init__()
        self.store = store
        self.run_id = run_id
        self.results: list[JobResult] = []

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(f"run {self.run_id}", id="run-info", classes="hint")
        yield DataTable(id="run-results", cursor_type="row", zebra_stripes=True)
        with VerticalScroll(id="run-detail-scroll"):
            yield Static("", id="run-detail")
        yield Footer()

    def on_mount(self) -> None:
        self.title = f"boo-tui: run {self.run_id}"
        table = self.query_one(DataTable)
        for key in ("op", "variant", "backend", "status", "median us", "GFLOP/s", "numerics", "noisy", "command"):
            table.add_column(key, key=key)
        self._call_in_thread(self._load, then=self._show)

    def _load(self) -> tuple[RunInfo | None, list[JobResult]]:
        info: RunInfo | None = None
        try:
            info = self.store.run_info(self.run_id)
        except Exception:  # noqa: BLE001 - the results matter more than the header line
            pass
        return info, list(self.store.load_results(self.run_id))

    def _show(self, loaded: tuple[RunInfo | None, list[JobResult]]) -> None:
        info, results = loaded
        if info:
            env = info["environment"] or {}
            where = [x for x in (machine_label(env), defaults_label(env)) if x]
            self.query_one("#run-info", Static).update(
                f"run {self.run_id}  started {fmt_time(info['started_at'])}  "
                f"status {info['status']}  target {info['target']}  "
                f"{len(results)} results" + "".join(f"\n{x}" for x in where))
        table = self.query_one(DataTable)
        self.results = list(results)
        for r in results:
            st = r.stats
            table.add_row(r.op, r.variant, r.backend, r.status, format_us(st.median_us if st else None),
                          fmt_gflops(st.gflops if st else None),
                          r.numerics.verdict if r.numerics else "-", "noisy" if r.noisy else "", r.command)

    def action_trend(self) -> None:
        """The result under the cursor over every stored run that measured it (screens/trend.py)."""
        from .trend import TrendScreen

        table = self.query_one(DataTable)
        r = self.results[table.cursor_row] if 0 <= table.cursor_row < len(self.results) else None
        key = (r.command, r.variant, r.backend, r.target) if r is not None else None
        self.app.push_screen(TrendScreen(self.store, self.run_id, key))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        i = event.cursor_row
        if 0 <= i < len(self.results):
            r = self.results[i]
            self.query_one("#run-detail", Static).update(render_detail(JobView(r, status=r.status)))
