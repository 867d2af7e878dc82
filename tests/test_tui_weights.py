"""The dashboard with a commands file that carries weights (`# boo-tui: calls=N share=P%`): share and calls
columns, sorted by share (largest first) by default, and the engine's model line shown above the table. Real
compiles, the real worker and a real SQLite file; tiny kernels keep it to seconds."""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from tui_pilot import wait_until

from boo_engine.results import FINAL_STATUSES
from boo_engine.session import SessionConfig
from boo_tui.app import BooApp
from boo_tui.table_controller import model_line_text

GEMM_A = "gemm -k 16 -m 16 -n 16 --iter 20"
GEMM_B = "gemm -k 32 -m 16 -n 16 --iter 20"
GEMM_C = "gemm -k 16 -m 32 -n 16 --iter 20"


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("tui-weights-cache"))


def shown_commands(app: BooApp) -> list[str]:
    """The command of each table row, top to bottom."""
    table = app.query_one("#results")
    return [app.model.jobs[key].result.command for key in table.keys]


def test_weights_columns_sort_by_share_and_the_engines_model_line(tmp_path, cache_dir):
    asyncio.run(_weights_in_the_dashboard(tmp_path, cache_dir))


async def _weights_in_the_dashboard(tmp_path: Path, cache_dir: str) -> None:
    f = tmp_path / "model.txt"
    f.write_text(f"# boo-tui: calls=2 share=10.5%\n{GEMM_A}\n"
                 f"# boo-tui: calls=7 share=60.25% self=50%\n{GEMM_B}\n"
                 f"{GEMM_C}\n")                                       # no weight: last, whatever the direction
    cfg = SessionConfig(target="cpu", db_path=str(tmp_path / "r.db"), cache_dir=cache_dir, backends=("iree", "torch"))
    app = BooApp(cfg, [str(f)])
    async with app.run_test(size=(160, 40)) as pilot:
        await wait_until(pilot, lambda: app.model.jobs and app.query_one("#results").row_count == 6, 60, "the rows")
        table = app.query_one("#results")
        keys = list(table.columns)
        assert keys[keys.index("shape") + 1: keys.index("shape") + 3] == ["share", "calls"]
        assert app.results.sort_by == "share" and app.results.sort_reverse
        commands = [GEMM_B, GEMM_A, GEMM_C]          # as the file writes them
        assert shown_commands(app) == [c for c in commands for _ in (1, 2)]     # each command's two rows together
        row = next(v.job_id for v in app.model.jobs.values() if v.result.command == commands[0])
        assert (str(table.get_cell(row, "share")), str(table.get_cell(row, "calls"))) == ("60.25", "7")
        assert app.query_one("#model-line").display

        await wait_until(pilot, lambda: all(v.status in FINAL_STATUSES for v in app.model.jobs.values()), 300,
                         "the run to finish")
        # what the bar shows is the engine's model line for the finished run, as the exports compute it
        expected = await asyncio.to_thread(app.engine.session.model_lines)
        assert [m.label for m in expected] == ["baseline", "torch"] and expected[0].commands == 2
        want = model_line_text(expected).plain
        bar = app.query_one("#model-line")
        await wait_until(pilot, lambda: str(bar.render()) == want, 30, f"the model line {want!r}")
        assert "2 kernels, 9 calls, share 70.8% (the file gives no captured times)" in want
        assert "1 without weight" in want
        # the user's own order wins: `s` moves on to the next column, calls (ascending, unweighted still last)
        await pilot.press("s")
        await pilot.pause(0.2)
        assert app.results.sort_by == "calls" and shown_commands(app)[::2] == [commands[1], commands[0], commands[2]]
        await pilot.press("q")
        await wait_until(pilot, lambda: not app.is_running, 30, "the app to exit")


def test_a_file_without_weights_shows_no_weight_columns_and_keeps_its_order(tmp_path, cache_dir):
    async def body() -> None:
        cfg = SessionConfig(target="cpu", db_path=str(tmp_path / "r.db"), cache_dir=cache_dir, backends=("iree",))
        app = BooApp(cfg, [GEMM_B, GEMM_A], autostart=False)
        async with app.run_test(size=(160, 40)) as pilot:
            await wait_until(pilot, lambda: app.query_one("#results").row_count == 2, 60, "the rows")
            assert "share" not in app.query_one("#results").columns
            assert app.results.sort_by is None and not app.query_one("#model-line").display
            await pilot.press("q")
            await wait_until(pilot, lambda: not app.is_running, 30, "the app to exit")

    asyncio.run(body())
