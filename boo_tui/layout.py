"""The dashboard's widgets and where they sit (app.tcss styles them): the filter line, the model line, the results
table and the panes beside or below it. Behaviour is in the app and its parts; the one exception is the filter
line's own focus keys (`FilterLine`)."""
from __future__ import annotations

from textual import events
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Footer, Header, Input, RichLog, Static, TabbedContent, TabPane

from .plots import PlotView
from .table import ResultsTable
from .table_lines import RowSource

RESULTS = "results"      # the results table's id


class FilterLine(Input):
    """The filter line (`/` focuses it): Enter or Escape hands the focus back to the results table."""

    def _back_to_table(self) -> None:
        self.screen.query_one(f"#{RESULTS}", ResultsTable).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self._back_to_table()

    def on_key(self, event: events.Key) -> None:
        if event.key == "escape":
            self._back_to_table()
            event.stop()


def dashboard_widgets(row_cells: RowSource) -> ComposeResult:
    """The dashboard's widgets; the table draws each row's cells from `row_cells(job_id)`."""
    yield Header()
    yield FilterLine(placeholder="filter: op:conv status:failed words...  (/ to focus, esc to leave)", id="filter")
    yield Static("", id="model-line")        # a file with weights: the engine's model line (table_controller)
    with Vertical(id="body"):
        yield ResultsTable(id=RESULTS, source=row_cells, zebra_stripes=True)
        with TabbedContent(id="panes"):
            with TabPane("Histogram", id="tab-hist"):
                yield PlotView("histogram", id="hist", empty="select a job: its samples appear here")
            with TabPane("Samples", id="tab-timeline"):
                yield PlotView("timeline", id="timeline", empty="samples over time appear here")
            with TabPane("Detail", id="tab-detail"):
                with VerticalScroll(id="detail-scroll"):
                    yield Static("select a job", id="detail")
                    yield Static("", id="repro")
            with TabPane("Log", id="tab-log"):
                yield RichLog(id="log", wrap=True, markup=False, max_lines=2000)
    yield Footer()


__all__ = ["RESULTS", "FilterLine", "dashboard_widgets"]
