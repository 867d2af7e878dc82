"""Past runs from the results database: open one, or mark two and compare them."""
from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Footer, Header, Static

from .base import WorkerScreen, field_of, fmt_time
from .run import RunScreen
from .run_compare import RunCompareScreen


class HistoryScreen(WorkerScreen):
    """Past runs from the results DB. Enter opens one; `m` marks runs, `c` compares the two marked."""

    BINDINGS = [
        Binding("escape,h", "app.pop_screen", "Back"),
        Binding("enter", "open_run", "Open", show=True),
        Binding("m", "mark", "Mark"),
        Binding("c", "compare_marked", "Compare 2 marked"),
        Binding("f5", "reload", "Reload", show=False),
    ]

    def __init__(self, store: Any) -> None:
        super().__init__(id="history")
        self.store = store
        self.runs: list[Any] = []
        self.marked: list[int] = []

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("Past runs (newest first). Enter: open  m: mark  c: compare two marked", classes="hint")
        yield DataTable(id="runs", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        self.title = "boo-tui: history"
        table = self.query_one(DataTable)
        for key, label in [("mark", " "), ("run", "run"), ("started", "started"), ("status", "status"),
                           ("target", "target"), ("jobs", "jobs"), ("command", "command line")]:
            table.add_column(label, key=key)
        self.action_reload()

    def action_reload(self) -> None:
        self._call_in_thread(lambda: list(self.store.list_runs()), then=self._show_runs)

    def _show_runs(self, runs: list[Any]) -> None:
        self.runs = sorted(runs, key=lambda r: -(field_of(r, "run_id", "id", default=0) or 0))
        table = self.query_one(DataTable)
        table.clear()
        for r in self.runs:
            rid = int(field_of(r, "run_id", "id", default=0))
            table.add_row(
                Text("*" if rid in self.marked else " ", style="bold yellow"),
                str(rid),
                fmt_time(field_of(r, "started_at", "started")),
                str(field_of(r, "status", default="-")),
                str(field_of(r, "target", default="-")),
                str(field_of(r, "n_results", "n_jobs", "total_jobs", default="-")),
                str(field_of(r, "command_line", default="") or ""),
                key=str(rid),
            )
        if not self.runs:
            self.notify("no runs in the results database yet")

    def _cursor_run(self) -> int | None:
        table = self.query_one(DataTable)
        if table.row_count == 0:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return int(key) if key is not None else None

    def action_open_run(self) -> None:
        rid = self._cursor_run()
        if rid is not None:
            self.app.push_screen(RunScreen(self.store, rid))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open_run()

    def action_mark(self) -> None:
        rid = self._cursor_run()
        if rid is None:
            return
        if rid in self.marked:
            self.marked.remove(rid)
        else:
            self.marked = (self.marked + [rid])[-2:]
        table = self.query_one(DataTable)
        for r in self.runs:
            k = str(field_of(r, "run_id", "id"))
            table.update_cell(k, "mark", Text("*" if int(k) in self.marked else " ", style="bold yellow"))

    def action_compare_marked(self) -> None:
        if len(self.marked) != 2:
            self.notify("mark two runs with m first", severity="warning")
            return
        a, b = sorted(self.marked)
        self.app.push_screen(RunCompareScreen(self.store, a, b))
