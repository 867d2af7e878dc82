"""ResultsTable: update_row shows the new values and keeps the other rows' renders (Textual's update_cell re-renders
every visible cell for any change: the dashboard's largest stall), and rows drawn before the columns were measured
are drawn again at the measured widths."""
from __future__ import annotations

import asyncio

from rich.text import Text
from textual.app import App, ComposeResult
from textual.widgets._data_table import ColumnKey

from boo_tui.table import ResultsTable


class OneTable(App):
    def compose(self) -> ComposeResult:
        yield ResultsTable(id="t")


class TableApp(OneTable):
    def on_mount(self) -> None:
        t = self.query_one(ResultsTable)
        t.add_column("name", key="name")
        t.add_column("median", key="median")
        for i in range(5):
            t.add_row(f"row{i}", Text(f"{i}.00 us"), key=f"r{i}")


def _shown(t: ResultsTable) -> str:
    """What the table draws, line by line (through its render caches, as the compositor does)."""
    return "\n".join(t.render_line(y).text for y in range(t.size.height))


def test_update_row_shows_the_new_values_and_keeps_other_rows_renders():
    async def body() -> None:
        app = TableApp()
        async with app.run_test(size=(60, 10)) as pilot:
            await pilot.pause()
            t = app.query_one(ResultsTable)
            assert "2.00 us" in _shown(t)
            before = {k for k in t._cell_render_cache.keys() if str(k[0].value) != "r2"}
            assert before, "nothing rendered yet"
            count = t._update_count
            t.update_row("r2", {"median": Text("9.50 us"), "name": "rowX"})
            await pilot.pause()
            shot = _shown(t)
            assert "9.50 us" in shot and "rowX" in shot and "2.00 us" not in shot
            assert t.get_cell("r2", "median").plain == "9.50 us"
            assert t._update_count == count and t.row_updates == 1       # the row-only path was taken
            after = set(t._cell_render_cache.keys())
            assert before <= after                                         # nobody else was re-rendered
            # an unchanged value is not even a refresh
            t.update_row("r2", {"median": Text("9.50 us")})
            assert t.row_updates == 1
            # sorting (a table-wide change) still works on the updated data
            t.sort("name", reverse=True)
            await pilot.pause()
            assert [str(t.get_row_at(i)[0]) for i in range(2)] == ["rowX", "row4"]

    asyncio.run(body())


def test_update_row_of_a_missing_row_or_column_is_an_error():
    import pytest
    from textual.widgets.data_table import CellDoesNotExist

    async def body() -> None:
        app = TableApp()
        async with app.run_test(size=(60, 10)) as pilot:
            await pilot.pause()
            t = app.query_one(ResultsTable)
            with pytest.raises(CellDoesNotExist):
                t.update_row("nope", {"median": "1"})
            with pytest.raises(CellDoesNotExist):
                t.update_row("r1", {"no-such-column": "1"})

    asyncio.run(body())


def test_rows_drawn_before_the_columns_are_measured_are_drawn_again_at_the_measured_widths():
    """On a busy host the screen can draw new rows before the table's idle handler measures the columns: those
    renders are at the headers' widths ("co" for "conv"). DataTable's render caches are keyed by a counter that
    measuring does not bump, so the narrow renders stayed on screen (CI caught a snapshot drawn so for 60 s)."""
    class Narrow(OneTable):
        CSS = "ResultsTable { height: 1fr; }"     # as in the dashboard: new rows do not resize the table

        def on_mount(self) -> None:
            t = self.query_one(ResultsTable)
            t.add_column("#", key="n")
            t.add_column("op", key="op")

    async def body() -> None:
        app = Narrow()
        async with app.run_test(size=(60, 10)) as pilot:
            await pilot.pause()
            t = app.query_one(ResultsTable)
            t.add_row("1", Text("conv"), key="r1")
            early = t.render_line(1).text          # drawn before the idle handler measured "op"
            assert " co " in early and "conv" not in early
            await pilot.pause()
            await pilot.pause()
            assert t.columns[ColumnKey("op")].content_width == len("conv")
            assert " conv " in t.render_line(1).text
            # a column added to rows already there is measured by another idle-time path: the same holds
            t.add_column("shape", key="shape", default=Text("n2 c64"))
            assert "n2 c64" not in t.render_line(1).text
            await pilot.pause()
            await pilot.pause()
            assert " n2 c64 " in t.render_line(1).text

    asyncio.run(body())


def test_the_torch_rows_vs_base_names_the_faster_side_in_the_kernels_colour():
    """torch 0.78x of the IREE baseline had shown a green check: it is torch beating IREE."""
    from boo_engine.compare import Comparison, Verdict
    from boo_tui.cells import verdict_text

    def comparison(ratio: float, verdict: Verdict) -> Comparison:
        return Comparison(ratio=ratio, ci_low=ratio * 0.98, ci_high=ratio * 1.02, p_value=0.001, verdict=verdict,
                          n_baseline=20, n_variant=20, baseline_median_us=100.0, variant_median_us=100.0 * ratio)

    torch_faster = verdict_text(comparison(0.78, Verdict.FASTER), reference=True)
    iree_faster = verdict_text(comparison(1.29, Verdict.SLOWER), reference=True)
    assert torch_faster.plain == "0.780x torch" and "red" in str(torch_faster.style)
    assert iree_faster.plain == "1.29x iree" and "green" in str(iree_faster.style)
    variant = verdict_text(comparison(0.78, Verdict.FASTER))
    assert variant.plain == "0.780x ✅" and "green" in str(variant.style)
    assert len(verdict_text(comparison(0.0912, Verdict.FASTER), reference=True).plain) <= 13   # COLUMN_WIDTHS
