"""ResultsTable (boo_tui/table.py): rows are keys whose cells come from a source when drawn, so building a table of
thousands of rows draws and measures only what is on screen, an update draws only the changed row, and it looks
and moves as Textual's DataTable did (the same lines, styles, cursor keys, clicks and messages). Work is counted
(rows drawn, rows measured), never timed."""
from __future__ import annotations

import asyncio
from typing import Any

from rich.segment import Segment
from rich.text import Text
from textual.app import App, ComposeResult
from textual.widgets import DataTable

from boo_tui.table import MEASURE_CHUNK, CellDoesNotExist, ResultsTable

COLUMNS = [("n", "#"), ("op", "op"), ("median", "median us"), ("verdict", "vs base")]
WIDTHS = {"verdict": 11}


def cells(i: int) -> dict[str, Any]:
    """Row i's cells: plain strings and styled Text, as the dashboard's rows are."""
    return {"n": str(i), "op": "conv" if i % 3 else "gemm", "median": Text(f"{i * 1.5:.2f}", style="" if i % 2 else "dim"),
            "verdict": Text(f"0.{i:03d}x ✅", style="bold green") if i % 4 else Text("-", style="dim")}


class OneTable(App):
    CSS = "ResultsTable { height: 1fr; }"      # as in the dashboard: the rows do not resize the table

    def __init__(self, data: dict[str, dict[str, Any]]) -> None:
        super().__init__()
        self.data = data
        self.messages: list[tuple[str, str]] = []

    def compose(self) -> ComposeResult:
        yield ResultsTable(id="t", source=lambda key: self.data[key])

    def on_mount(self) -> None:
        t = self.query_one(ResultsTable)
        t.set_columns(COLUMNS, WIDTHS)
        t.set_rows(list(self.data))
        t.focus()

    def on_results_table_row_highlighted(self, event: ResultsTable.RowHighlighted) -> None:
        self.messages.append(("highlighted", event.key))

    def on_results_table_row_selected(self, event: ResultsTable.RowSelected) -> None:
        self.messages.append(("selected", event.key))

    def on_results_table_header_selected(self, event: ResultsTable.HeaderSelected) -> None:
        self.messages.append(("header", event.key))


def rows(n: int) -> dict[str, dict[str, Any]]:
    return {f"r{i}": cells(i) for i in range(n)}


def shown(t: ResultsTable) -> list[str]:
    return [t.render_line(y).text for y in range(t.size.height)]


async def measured(pilot, t: ResultsTable) -> None:
    for _ in range(500):
        if t.measured:
            return
        await pilot.pause(0.01)
    raise AssertionError("the table never measured its rows")


def test_a_build_of_thousands_of_rows_draws_only_the_rows_on_screen_and_measures_the_rest_on_a_timer():
    async def body() -> None:
        data = rows(3000)
        data["r2999"]["op"] = "a-long-op-name-off-screen"     # the widest cell is on the last row
        app = OneTable({})
        async with app.run_test(size=(80, 12)) as pilot:
            await pilot.pause()
            t = app.query_one(ResultsTable)
            visible = t.size.height - t.header_height
            app.data.update(data)
            t.set_rows(list(data))
            assert t.row_count == 3000 and t.rows_measured == 0      # a build measures nothing by itself
            await pilot.pause()
            # the rows on screen were measured to be drawn, the rest a chunk at a time on the timer
            assert t.rows_measured <= visible + MEASURE_CHUNK * t.measure_ticks
            await measured(pilot, t)
            assert t.rows_measured == 3000                  # every row measured once
            assert t.measure_ticks >= 3000 // MEASURE_CHUNK
            assert t.cells_kept <= visible                  # widths kept for all, cells only for the rows drawn
            assert t.columns["op"].content_width == len("a-long-op-name-off-screen")
            assert " conv " in shown(t)[2]                      # drawn at the widths of every row
            # only rows on screen were ever drawn: again each time a column grew (the "#" column to 4 digits...)
            assert t.rows_rendered <= 8 * visible
    asyncio.run(body())


def test_an_update_draws_only_the_changed_row():
    async def body() -> None:
        app = OneTable(rows(200))
        async with app.run_test(size=(80, 12)) as pilot:
            t = app.query_one(ResultsTable)
            await measured(pilot, t)
            await pilot.pause()
            drawn, measured_rows = t.rows_rendered, t.rows_measured
            app.data["r3"]["median"] = Text("9.50")
            app.data["r150"]["median"] = Text("7.25")       # off screen
            t.invalidate(["r3", "r150", "r4"])                # r4 did not change
            assert t.row_updates == 1                       # r3 on screen at once; r150 waits for the timer
            await pilot.pause()
            assert "9.50" in shown(t)[1 + 3]
            assert t.rows_rendered == drawn + 1             # r3 only
            await measured(pilot, t)
            assert t.rows_measured == measured_rows + 3 and t.row_updates == 1     # (r150: measured for its widths)
            assert str(t.get_cell("r150", "median")) == "7.25"
            assert t.rows_rendered == drawn + 1             # r150 is off screen: not drawn
    asyncio.run(body())


def test_a_wider_value_widens_its_column_and_a_fixed_width_column_elides():
    async def body() -> None:
        app = OneTable(rows(5))
        async with app.run_test(size=(80, 12)) as pilot:
            t = app.query_one(ResultsTable)
            await measured(pilot, t)
            app.data["r1"]["op"] = "convbfp16"
            app.data["r2"]["verdict"] = Text("0.0912x torch faster", style="red")
            t.invalidate(["r1", "r2"])
            await pilot.pause()
            assert t.columns["op"].content_width == len("convbfp16")
            assert " convbfp16 " in shown(t)[2]
            assert t.columns["verdict"].render_width == WIDTHS["verdict"] + 2
            assert "0.0912x to…" in shown(t)[3]
    asyncio.run(body())


def test_it_draws_what_textuals_datatable_draws():
    """Same cells, same size, same cursor row: every character and its style on every line (header, zebra rows,
    the cursor row with its colour over the cells', dim and verdict colours) as DataTable draws them."""
    data = rows(12)

    class Both(App):
        CSS = "ResultsTable, DataTable { height: 8; }"

        def compose(self) -> ComposeResult:
            yield ResultsTable(id="ours", source=lambda key: data[key])
            yield DataTable(id="theirs", cursor_type="row", zebra_stripes=True)

        def on_mount(self) -> None:
            ours, theirs = self.query_one(ResultsTable), self.query_one(DataTable)
            ours.set_columns(COLUMNS, WIDTHS)
            ours.set_rows(list(data))
            for key, label in COLUMNS:
                theirs.add_column(label, key=key, width=WIDTHS.get(key))
            for key, row in data.items():
                theirs.add_row(*[row[k] for k, _ in COLUMNS], key=key)

    def styled(line) -> list[tuple[str, str]]:
        return [(ch, str(s.style)) for s in Segment.simplify(list(line)) for ch in s.text]

    async def body() -> None:
        app = Both()
        async with app.run_test(size=(70, 20)) as pilot:
            ours, theirs = app.query_one(ResultsTable), app.query_one(DataTable)
            await measured(pilot, ours)
            drawn = {}
            for table in (theirs, ours):        # each focused while drawn (the cursor and header colours follow)
                table.focus()
                await pilot.press("down", "down")
                await pilot.pause()
                drawn[table.id] = [styled(table.render_line(y)) for y in range(table.size.height)]
            assert ours.cursor_row == theirs.cursor_row == 2
            for y, (a, b) in enumerate(zip(drawn["ours"], drawn["theirs"])):
                assert a == b, y
    asyncio.run(body())


def test_keys_clicks_and_messages():
    async def body() -> None:
        app = OneTable(rows(100))
        async with app.run_test(size=(80, 12)) as pilot:
            t = app.query_one(ResultsTable)
            await measured(pilot, t)
            page = t.size.height - t.header_height
            await pilot.press("down", "down", "up")
            assert t.cursor_row == 1 and app.messages == [("highlighted", "r1"), ("highlighted", "r2"),
                                                           ("highlighted", "r1")]
            await pilot.press("pagedown")
            assert t.cursor_row == 1 + page and t.scroll_y == page     # the cursor stays where it was on screen
            await pilot.press("ctrl+end")
            assert t.cursor_key == "r99" and t.scroll_y == t.max_scroll_y
            assert t.render_line(t.size.height - 1).text.startswith(" 99 ")
            await pilot.press("pageup", "ctrl+home")
            assert t.cursor_row == 0 and t.scroll_y == 0
            await pilot.press("enter")
            assert app.messages[-1] == ("selected", "r0")
            app.messages.clear()
            await pilot.click(ResultsTable, offset=(2, 3))            # row 2 (the header is line 0)
            assert t.cursor_key == "r2" and app.messages == [("highlighted", "r2")]
            await pilot.click(ResultsTable, offset=(2, 3))            # again on the cursor's row: selected
            await pilot.click(ResultsTable, offset=(7, 0))            # the "op" header
            assert app.messages[1:] == [("selected", "r2"), ("header", "op")]
    asyncio.run(body())


def test_the_cursor_stays_on_its_key_when_the_rows_change_and_is_scrolled_into_view():
    async def body() -> None:
        app = OneTable(rows(100))
        async with app.run_test(size=(80, 12)) as pilot:
            t = app.query_one(ResultsTable)
            await pilot.press("down", "down", "down")
            await pilot.pause()
            drawn = t.rows_rendered
            t.set_rows(list(app.data), cursor_key="r3")              # the same order again: nothing to draw again
            await pilot.pause()
            assert t.rows_rendered == drawn and t.cursor_key == "r3"
            t.set_rows(reversed(list(app.data)), cursor_key="r3")    # a sort
            await pilot.pause()
            assert t.cursor_key == "r3" and t.cursor_row == 96
            assert t.scroll_y <= 96 < t.scroll_y + t.size.height - t.header_height
            assert any(line.startswith(" 3 ") for line in shown(t))
            t.set_rows(["r5", "r6"], cursor_key="r3")                # filtered out: the top row
            assert t.cursor_key == "r5" and t.row_count == 2
            assert [str(c) for c in t.get_row_at(1)][:2] == ["6", "gemm"]
            for missing in (lambda: t.get_row("r3"), lambda: t.get_cell("r5", "nope"), lambda: t.get_row_at(2)):
                try:
                    missing()
                except CellDoesNotExist:
                    continue
                raise AssertionError("no error for a missing row or column")
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
