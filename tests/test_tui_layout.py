"""The dashboard as a kernel engineer sees it: at 120 columns the answer columns (#, op, shape, variant, backend,
status, median, vs base, numerics, noisy) are on screen, wider terminals add the rest (at 160 the side panes had
hidden numerics and noisy); Enter on a row opens its detail, and 1-4 switch the panes. The real app and session,
driven by Textual's pilot; nothing is measured (autostart off)."""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from textual.widgets import TabbedContent
from tui_pilot import wait_until

from boo_engine.errors import BooError
from boo_engine.session import SessionConfig
from boo_tui.app import BooApp

ROOT = Path(__file__).resolve().parent.parent
ANSWER = ["cmd", "op", "shape", "variant", "backend", "status", "median", "vs_base", "numerics", "noisy"]


def _app(tmp_path) -> BooApp:
    cfg = SessionConfig(target="cpu", db_path=str(tmp_path / "r.db"), cache_dir=str(tmp_path / "cache"))
    return BooApp(cfg, [str(ROOT / "sample_commands.txt")], autostart=False)


def _ends(table) -> dict[str, int]:
    """Where each column ends, in cells from the table's left edge."""
    x, out = 0, {}
    for key, col in table.columns.items():
        x += col.render_width
        out[key] = x
    return out


async def _laid_out(pilot, app):
    await wait_until(pilot, lambda: app.engine.session is not None and app.query_one("#results").row_count >= 30, 120,
                     "the sample file's rows")
    table = app.query_one("#results")
    await wait_until(pilot, lambda: table.columns["op"].content_width > len("op"), 60, "the columns measured")
    await pilot.pause(0.3)
    return table


@pytest.mark.parametrize("size, visible", [((120, 40), ANSWER), ((160, 45), ANSWER + ["gflops", "roof"]),
                                           ((200, 50), ANSWER)])
def test_the_answer_columns_fit_and_wider_terminals_add_the_rest(tmp_path, size, visible):
    async def go():
        app = _app(tmp_path)
        async with app.run_test(size=size) as pilot:
            table = await _laid_out(pilot, app)
            ends = _ends(table)
            room = table.scrollable_content_region.width
            hidden = [k for k in visible if ends[k] > room]
            assert not hidden, (size, room, ends)
            assert app.screen.has_class("-wide") == (size[0] >= 180)
    asyncio.run(go())


def test_enter_opens_the_detail_and_number_keys_switch_the_panes(tmp_path):
    async def go():
        app = _app(tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            table = await _laid_out(pilot, app)
            panes = app.query_one("#panes", TabbedContent)
            table.focus()
            for key, pane in (("4", "tab-log"), ("2", "tab-timeline"), ("1", "tab-hist")):
                await pilot.press(key)
                await pilot.pause(0.1)
                assert panes.active == pane, key
            await pilot.press("down", "enter")
            await wait_until(pilot, lambda: panes.active == "tab-detail", 10, "Enter to open the detail")
    asyncio.run(go())


def test_compare_and_trend_screens_name_a_command_by_its_op_and_shape_first():
    """The whole 156-character command came first and pushed ratio, CI and verdict off screen; it comes last."""
    from boo_tui.cells import COMMAND_WIDTH, command_cell

    long = ("convbfp16 -n 128 -c 384 -H 24 -W 48 -k 384 -y 1 -x 1 -p 0 -q 0 -u 1 -v 1 -l 1 -j 1 -m conv -g 1 -F 1 "
            "-t 1 --in_layout NHWC --out_layout NHWC --fil_layout NHWC")
    cell = command_cell(long)
    assert len(cell) <= COMMAND_WIDTH and cell.startswith("convbfp16 n128") and "NHWC" in cell, cell
    assert command_cell("not a command at all") == "not a command at all"


def test_a_header_click_sorts_and_a_row_click_selects_then_opens_the_detail(tmp_path):
    async def go():
        app = _app(tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            table = await _laid_out(pilot, app)
            panes = app.query_one("#panes", TabbedContent)
            median_x = _ends(table)["status"] + 1                 # the "median us" header's first cell
            await pilot.click("#results", offset=(median_x, 0))
            assert app.results.sort_by == "median" and not app.results.sort_reverse
            assert str(table.columns["median"].label) == "median us ^"
            await pilot.click("#results", offset=(median_x, 0))     # again: the other way round
            assert app.results.sort_by == "median" and app.results.sort_reverse
            await pilot.click("#results", offset=(2, 4))            # the fourth row
            fourth = table.keys[3]
            assert table.cursor_key == fourth and app.results.selected == fourth and panes.active != "tab-detail"
            await pilot.click("#results", offset=(2, 4))            # again: its detail
            await wait_until(pilot, lambda: panes.active == "tab-detail", 10, "a second click to open the detail")
            assert app.results.selected == fourth
    asyncio.run(go())


def test_the_variants_compare_screens_torch_column_is_red_where_torch_is_faster():
    from boo_engine.compare import Comparison, Verdict
    from boo_tui.screens.base import ratio_text

    c = Comparison(ratio=0.6, ci_low=0.58, ci_high=0.62, p_value=0.001, verdict=Verdict.FASTER, n_baseline=20,
                   n_variant=20, baseline_median_us=100.0, variant_median_us=60.0)
    assert "green" in str(ratio_text(c).style)                       # a variant faster than the baseline
    assert "red" in str(ratio_text(c, reference=True).style)         # torch faster than the IREE kernel


def test_a_session_does_not_outlive_its_dashboard(tmp_path):
    """An app that ends without the quit key (a test's pilot, a crash) closes its session on unmount: no
    session keeps its threads and worker processes for the rest of the process (one left behind hung an
    interpreter's exit, joining a worker)."""
    async def go():
        app = _app(tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            await _laid_out(pilot, app)
            session = app.engine.session
        return session

    session = asyncio.run(go())
    with pytest.raises(BooError, match="session is closed"):
        session.start()
