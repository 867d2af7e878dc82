"""The dashboard's history across runs and machines: runs of two hosts listed with their host and CPU, a kernel's
trend over three runs (the run whose --flags changed marked), and two runs compared by the engine's comparison of
stored runs with what differs between them. The database is a real SQLite file written through the Store API
(three runs, two machines), so no kernel needs measuring here; the engine's functions are tested on real runs in
test_history.py."""
from __future__ import annotations

import asyncio

from rich.text import Text
from textual.app import App
from tui_pilot import wait_until

from boo_engine.bench.stats import compute_stats
from boo_engine.history import kernel_trend
from boo_engine.results import JobResult
from boo_engine.store import Store
from boo_tui.screens import HistoryScreen, RunCompareScreen
from boo_tui.screens.trend import TrendScreen, render_trend

CMD = "gemm -m 64 -n 64 -k 64"
MACHINES = [{"host": "laptop", "cpu": "AMD EPYC", "iree_compile_version": "IREE compiler version 3.13.0"},
            {"host": "ci-box", "cpu": "Intel Xeon", "iree_compile_version": "IREE compiler version 3.13.0"}]


def make_db(path) -> None:
    """Run 1 on the laptop, runs 2 and 3 on the CI box, run 3 with --flags: 10, 10.5 and 20 us medians."""
    with Store(path) as store:
        for env, flags, level in ((MACHINES[0], [], 10.0), (MACHINES[1], [], 10.5),
                                  (MACHINES[1], ["--iree-llvmcpu-disable-vector-peeling"], 20.0)):
            run = store.start_run(command_line="boo-tui x", target="cpu", environment=env,
                                  config={"compile_flags": flags, "min_effect": 0.03, "seed": 0})
            samples = [level * (1 + 0.001 * (i % 7)) for i in range(40)]
            store.record_result(run, JobResult(job_id="j1", command=CMD, func_name="gemm_64", op="gemm",
                                               variant="baseline", target="cpu", backend="iree", status="done",
                                               samples_us=samples, stats=compute_stats(samples)))
            store.finish_run(run, "done")


class HistoryApp(App):
    def __init__(self, store: Store) -> None:
        super().__init__()
        self.store = store

    def on_mount(self) -> None:
        self.push_screen(HistoryScreen(self.store))


def rows(app, selector: str) -> int:
    found = app.screen.query(selector)
    return found.first().row_count if found else 0


def test_history_trend_and_compare_across_machines(tmp_path):
    db = tmp_path / "all.db"
    make_db(db)
    store = Store(db)

    async def body() -> None:
        app = HistoryApp(store)
        async with app.run_test(size=(160, 50)) as pilot:
            await wait_until(pilot, lambda: rows(app, "#runs") == 3, 30, "the runs")
            table = app.screen.query_one("#runs")
            assert [str(table.get_cell(k, "host")) for k in ("3", "2", "1")] == ["ci-box", "ci-box", "laptop"]
            assert str(table.get_cell("1", "machine")) == "AMD EPYC"

            await pilot.press("k")   # the cursor is on the newest run: its kernel's trend over every run
            await wait_until(pilot, lambda: isinstance(app.screen, TrendScreen) and rows(app, "#trend-points") == 3,
                             30, "the trend")
            points = app.screen.query_one("#trend-points")
            assert [str(points.get_row_at(i)[0]) for i in range(3)] == ["1", "2", "3"]
            assert [str(points.get_row_at(i)[2]) for i in range(3)] == ["laptop", "ci-box", "ci-box"]
            change = points.get_row_at(2)[-1]
            assert isinstance(change, Text) and "flags changed" in change.plain
            assert str(points.get_row_at(1)[-1]) == ""
            plot = app.screen.query_one("#trend-plot")
            assert "median us per run" in str(plot.render())
            await pilot.press("escape")

            await pilot.press("m", "down", "m", "c")   # runs 3 and 2 marked: 3 against 2
            await wait_until(pilot, lambda: isinstance(app.screen, RunCompareScreen)
                             and rows(app, "#run-compare-table") == 1, 30, "the comparison")
            row = app.screen.query_one("#run-compare-table").get_row_at(0)
            assert str(row[-3]) == "slower" and "rounds" in str(row[-2])   # the verdict, and each side's evidence
            summary = str(app.screen.query_one("#compare-summary").render())
            await wait_until(pilot, lambda: "Differs" in str(app.screen.query_one("#compare-summary").render()),
                             10, "the differences")
            summary = str(app.screen.query_one("#compare-summary").render())
            assert "flags: - -> --iree-llvmcpu-disable-vector-peeling" in summary
            await pilot.press("escape")

    try:
        asyncio.run(body())
    finally:
        store.close()


def test_trend_plot_marks_the_change():
    """What the trend view draws comes from kernel_trend's points; a change is a vertical line before its run."""
    from boo_engine.history import TrendPoint

    def point(run: int, median: float, flags: tuple[str, ...], changed: bool) -> TrendPoint:
        return TrendPoint(run_id=run, started_at=f"2026-01-0{run}T00:00:00", host="h", device="cpu",
                          compiler="c", flags=flags, median_us=median, ci_low_us=median * 0.99,
                          ci_high_us=median * 1.01, n=40, noisy=False, compiler_changed=False, flags_changed=changed)

    same = render_trend([point(1, 10, (), False), point(2, 10.5, (), False)], 60, 12)
    marked = render_trend([point(1, 10, (), False), point(2, 20, ("-x",), True)], 60, 12)
    assert same and marked and same != marked
    assert render_trend([], 60, 12) == ""


def test_kernel_trend_reads_a_merged_store(tmp_path):
    db = tmp_path / "t.db"
    make_db(db)
    points = kernel_trend(db, CMD, "baseline", "iree", "cpu")
    assert [p.host for p in points] == ["laptop", "ci-box", "ci-box"]
    assert [round(p.median_us, 1) for p in points] == [10.0, 10.5, 20.1]
    assert [p.flags_changed for p in points] == [False, False, True]
