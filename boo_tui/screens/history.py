"""Past runs and tunes from the results database (runs of any number of machines, e.g. a `boo-tui merge`d one:
each shows its host and CPU/GPU): open a run, mark two runs and compare them, see a kernel's trend over the runs,
or open a tune to review its kernels and candidates."""
from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Footer, Header, Static, TabbedContent, TabPane

from boo_engine.api import list_tunes

from .base import WorkerScreen, fmt_time
from .run import RunScreen
from .run_compare import RunCompareScreen
from .trend import TrendScreen
from .tune_review import TuneReviewScreen

if TYPE_CHECKING:
    from boo_engine.api import RunRow, Store, TuneSummary

TUNE_COLUMNS = [("tune", "tune"), ("started", "started"), ("status", "status"), ("target", "target"),
                ("kernels", "kernels"), ("improved", "improved"), ("geomean", "geomean"), ("command", "command line")]


class HistoryScreen(WorkerScreen):
    """Past runs and tunes from the results DB. Enter opens the run (or tune) under the cursor; `m` marks runs,
    `c` compares the two marked; `t` switches between the runs and the tunes."""

    BINDINGS = [
        Binding("escape,h", "app.pop_screen", "Back"),
        Binding("enter", "open_run", "Open", show=True),
        Binding("m", "mark", "Mark"),
        Binding("c", "compare_marked", "Compare 2 marked"),
        Binding("k", "trend", "Kernel trend"),
        Binding("t", "toggle_tunes", "Runs/Tunes"),
        Binding("f5", "reload", "Reload", show=False),
    ]

    def __init__(self, store: Store) -> None:
        super().__init__(id="history")
        self.store = store
        self.runs: list[RunRow] = []
        self.tunes: list[TuneSummary] = []
        self.marked: list[int] = []

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("Newest first. Enter: open  m: mark  c: compare two marked runs  k: a kernel's trend over "
                     "the runs  t: runs / tunes",
                     classes="hint")
        with TabbedContent(id="history-tabs"):
            with TabPane("Runs", id="tab-runs"):
                yield DataTable(id="runs", cursor_type="row", zebra_stripes=True)
            with TabPane("Tunes", id="tab-tunes"):
                yield DataTable(id="tunes", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        self.title = "boo-tui: history"
        table = self.query_one("#runs", DataTable)
        for key, label in [("mark", " "), ("run", "run"), ("started", "started"), ("status", "status"),
                           ("target", "target"), ("host", "host"), ("machine", "CPU/GPU"), ("jobs", "jobs"),
                           ("command", "command line")]:
            table.add_column(label, key=key)
        tunes = self.query_one("#tunes", DataTable)
        for key, label in TUNE_COLUMNS:
            tunes.add_column(label, key=key)
        table.focus()
        self.action_reload()

    def action_reload(self) -> None:
        self._call_in_thread(lambda: list(self.store.list_runs()), then=self._show_runs)
        self._call_in_thread(lambda: list_tunes(self.store), then=self._show_tunes)

    def _show_runs(self, runs: list[RunRow]) -> None:
        self.runs = sorted(runs, key=lambda r: -r["id"])
        table = self.query_one("#runs", DataTable)
        table.clear()
        for r in self.runs:
            rid = r["id"]
            table.add_row(
                Text("*" if rid in self.marked else " ", style="bold yellow"),
                str(rid),
                fmt_time(r["started_at"]),
                r["status"],
                str(r["target"]),
                r["host"] or "-",
                r["gpu"] or r["cpu"] or "-",
                str(r["n_results"]),
                r["command_line"] or "",
                key=str(rid),
            )
        if not self.runs:
            self.notify("no runs in the results database yet")

    def _show_tunes(self, tunes: list[TuneSummary]) -> None:
        self.tunes = tunes
        table = self.query_one("#tunes", DataTable)
        table.clear()
        for t in tunes:
            g = t.get("geomean")
            table.add_row(
                str(t["id"]), fmt_time(t.get("started_at")), str(t.get("status") or "-"), str(t.get("target") or "-"),
                str(t["kernels"]), str(t["improved"]),
                Text(f"{g:.3f}", style="green" if g < 1 else "") if g is not None else Text("-", style="dim"),
                str(t.get("command_line") or ""), key=str(t["id"]))

    def _showing_tunes(self) -> bool:
        return self.query_one("#history-tabs", TabbedContent).active == "tab-tunes"

    def action_toggle_tunes(self) -> None:
        tabs = self.query_one("#history-tabs", TabbedContent)
        tabs.active = "tab-runs" if self._showing_tunes() else "tab-tunes"
        self.query_one("#tunes" if self._showing_tunes() else "#runs", DataTable).focus()

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        event.stop()
        self.query_one("#tunes" if self._showing_tunes() else "#runs", DataTable).focus()

    @staticmethod
    def _cursor_key(table: DataTable) -> int | None:
        if table.row_count == 0:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return int(key) if key is not None else None

    def _cursor_run(self) -> int | None:
        return self._cursor_key(self.query_one("#runs", DataTable))

    def action_open_run(self) -> None:
        if self._showing_tunes():
            tid = self._cursor_key(self.query_one("#tunes", DataTable))
            if tid is not None:
                self.app.push_screen(TuneReviewScreen(self.store, tid))
            return
        rid = self._cursor_run()
        if rid is not None:
            self.app.push_screen(RunScreen(self.store, rid))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open_run()

    def action_mark(self) -> None:
        rid = self._cursor_run()
        if rid is None or self._showing_tunes():
            return
        if rid in self.marked:
            self.marked.remove(rid)
        else:
            self.marked = (self.marked + [rid])[-2:]
        table = self.query_one("#runs", DataTable)
        for r in self.runs:
            k = str(r["id"])
            table.update_cell(k, "mark", Text("*" if int(k) in self.marked else " ", style="bold yellow"))

    def action_trend(self) -> None:
        """The trend over every stored run of a kernel of the run under the cursor (screens/trend.py)."""
        rid = self._cursor_run()
        if rid is not None and not self._showing_tunes():
            self.app.push_screen(TrendScreen(self.store, rid))

    def action_compare_marked(self) -> None:
        if len(self.marked) != 2:
            self.notify("mark two runs with m first", severity="warning")
            return
        a, b = sorted(self.marked)
        self.app.push_screen(RunCompareScreen(self.store, a, b))
