"""Tuning from the dashboard, against the real engine: a real tune of a tiny GEMM (24^3, 2 candidates) started
with `t`, followed live in the tune screen to its files, then reviewed in the history from the rows it stored.

One tune serves both tests (a module fixture drives the dashboard through it and keeps what it saw): the history
test reads the rows that tune wrote, it fakes none. About 15-30 s on 2 shared cores, most of it compiling.
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from tui_pilot import wait_until

from boo_engine.session import SessionConfig
from boo_engine.store import Store
from boo_engine.tune.records import find_tune
from boo_tui.app import PALETTE, BooApp
from boo_tui.screens.tune import TuneScreen
from boo_tui.screens.tune_review import TuneReviewScreen

GEMM = "gemm --a_w 24 --a_h 24 --b_w 24"
FUNC = "gemm_float32_forward_24x24x24"


@dataclass
class Seen:
    """What the dashboard showed while it tuned."""

    db_path: str = ""
    out_dir: Path = Path()
    budget_error: str = ""
    folder_error: str = ""
    stages: list[str] = field(default_factory=list)          # the kernel row's stage cell, each change once
    refused: list[str] = field(default_factory=list)         # notifications after `r` during the tune
    dashboard_statuses: set[str] = field(default_factory=set)
    row: list[str] = field(default_factory=list)             # the kernel's row when the tune ended
    status_line: str = ""
    paths: list[str] = field(default_factory=list)
    tune_id: int | None = None
    series: list[tuple[str, int]] = field(default_factory=list)
    renders: int = 0
    plot_updates: int = 0
    seconds: float = 0.0
    screen_after_close: str = ""
    tuning_after_close: bool = True
    busy_refusal: list[str] = field(default_factory=list)    # notifications after `t` while the dashboard measures
    tune_started_while_busy: bool = True


def text_of(app: BooApp, selector: str) -> str:
    return str(app.screen.query_one(selector).render())


async def _tune_from_the_dashboard(tmp: Path) -> Seen:
    seen = Seen(db_path=str(tmp / "results.db"), out_dir=tmp / "tuned")
    # one compile worker: on 2 shared cores a second one (another torch import) costs more than it saves here
    # min_time_s: the dashboard's own run (started after the tune) is still measuring when a second tune is asked
    cfg = SessionConfig(target="cpu", db_path=seen.db_path, cache_dir=str(tmp / "kernels"), backends=("iree",),
                        compile_workers=1, min_time_s=60.0)
    app = BooApp(cfg, [GEMM], autostart=False)
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        await wait_until(pilot, lambda: app.engine.session is not None and app.query_one("#results").row_count == 1, 60,
                         "the session and its queued job")
        await pilot.press("t")
        await wait_until(pilot, lambda: app.screen.id == "tune-dialog", 10, "the tune dialog")
        # inline validation: a budget below 1, then a folder that is a file; the dialog stays open
        app.screen.query_one("#tune-budget").value = "0"
        await pilot.press("enter")
        seen.budget_error = text_of(app, "#prompt-error")
        (tmp / "a-file").write_text("x")
        app.screen.query_one("#tune-budget").value = "2"
        app.screen.query_one("#tune-out").value = str(tmp / "a-file")
        await pilot.press("enter")
        await wait_until(pilot, lambda: text_of(app, "#prompt-error") != "", 10, "the folder's error")
        seen.folder_error = text_of(app, "#prompt-error")
        app.screen.query_one("#tune-out").value = str(seen.out_dir)
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, TuneScreen), 30, "the tune screen")
        screen = app.screen
        t0 = time.monotonic()
        await wait_until(pilot, lambda: FUNC in screen.rows, 60, "the kernel's row")
        await pilot.press("r")                       # the dashboard must not measure beside the tune
        await pilot.pause(0.1)
        seen.refused = [n.message for n in app._notifications]
        seen.dashboard_statuses = {str(v.status) for v in app.model.jobs.values()}
        table = screen.query_one("#tune-kernels")

        def follow() -> bool:
            stage = str(table.get_row(FUNC)[2]) if table.row_count else ""
            if stage and (not seen.stages or seen.stages[-1] != stage):
                seen.stages.append(stage)
            return not screen.tune_run.active

        await wait_until(pilot, follow, 240, "the tune to end")
        seen.seconds = time.monotonic() - t0
        await pilot.pause(0.5)                       # the last messages, one plot refresh
        follow()
        seen.row = [str(c) for c in table.get_row(FUNC)]
        seen.status_line = text_of(app, "#tune-status")
        finished = screen.tune_run.finished
        seen.paths, seen.tune_id = list(finished.paths), finished.tune_id
        hist = screen.query_one("#tune-hist")
        seen.series = [(s.label, len(s.samples_us)) for s in hist.series]
        seen.renders, seen.plot_updates = hist.renders, screen.plot_updates
        await pilot.press("escape")
        await pilot.pause(0.1)
        seen.screen_after_close = type(app.screen).__name__
        seen.tuning_after_close = app.tune.tuning

        # the dashboard measures again; a tune asked for meanwhile is refused (one measurement at a time)
        first = screen.tune_run
        await pilot.press("r")
        await wait_until(pilot, lambda: {str(v.status) for v in app.model.jobs.values()} & {"measuring"}, 120,
                         "the dashboard's own run")
        await pilot.press("t")
        await wait_until(pilot, lambda: app.screen.id == "tune-dialog", 10, "the tune dialog")
        app.screen.query_one("#tune-out").value = str(tmp / "second")
        await pilot.press("enter")
        await wait_until(pilot, lambda: any("dashboard is measuring" in n.message for n in app._notifications), 30,
                         "the refusal")
        seen.busy_refusal = [n.message for n in app._notifications]
        seen.tune_started_while_busy = app.tune.run is not first or isinstance(app.screen, TuneScreen)
        await pilot.press("q")
        await wait_until(pilot, lambda: not app.is_running, 30, "the app to exit")
    return seen


@pytest.fixture(scope="module")
def dashboard_tune(tmp_path_factory) -> Seen:
    return asyncio.run(_tune_from_the_dashboard(tmp_path_factory.mktemp("tui-tune")))


def test_tune_screen_follows_a_kernel_to_done_and_writes_the_files(dashboard_tune):
    seen = dashboard_tune
    assert "budget 0" in seen.budget_error
    assert "a-file" in seen.folder_error and "not a folder" in seen.folder_error
    assert "tune" in [a for a, _, _ in PALETTE]                   # the binding is a palette command too

    # the row went through the search's stages to its outcome
    assert seen.stages[0] == "baseline" and seen.stages[-1].startswith("done"), seen.stages
    assert len(seen.stages) >= 3, seen.stages
    n, kernel, stage, compiled, failed, measured, best, changes = seen.row
    assert (n, kernel) == ("1/1", "gemm 24x24x24")
    assert int(compiled) == 2 and int(failed) + int(measured) == 2
    assert best.endswith("x") or best.startswith(("0.", "1.")), best
    assert changes                                                # what the leader changes, or why nothing won

    # the dashboard refused to measure beside the tune
    assert any("a tune is measuring" in m for m in seen.refused), seen.refused
    assert seen.dashboard_statuses == {"queued"}

    # the files, and the screen saying where they are
    names = sorted(Path(p).name for p in seen.paths)
    assert {"report.md", "tuned.toml"} <= set(names) and set(names) <= {"report.md", "tuned.mlir", "tuned.toml"}
    for p in seen.paths:
        assert Path(p).parent == seen.out_dir and Path(p).stat().st_size > 0
        assert p in seen.status_line.replace("\n", "")
    assert FUNC in (seen.out_dir / "report.md").read_text()

    # the selected kernel's leader against its baseline, redrawn at most 5 times a second
    assert [label.split()[0] for label, _ in seen.series] == ["baseline", "leader"], seen.series
    assert all(count > 0 for _, count in seen.series)
    assert 1 <= seen.renders <= 5 * seen.seconds + 2
    assert seen.plot_updates <= 5 * seen.seconds + 2

    # stored as a tune, whose recorded command line repeats it headless
    store = Store(seen.db_path)
    try:
        info = find_tune(store, seen.tune_id)
    finally:
        store.close()
    assert info["status"] == "done" and info["target"] == "cpu"
    assert info["command_line"].startswith(f"boo-tui tune '{GEMM}' --target cpu --budget 2 --out ")

    # closing the finished tune's screen returns to the dashboard, free to measure again
    assert seen.screen_after_close == "Screen" and seen.tuning_after_close is False
    # and a tune asked for while the dashboard measures does not start beside it
    assert any("the dashboard is measuring" in m for m in seen.busy_refusal), seen.busy_refusal
    assert seen.tune_started_while_busy is False and not (seen.out_dir.parent / "second").exists()


def test_history_lists_the_stored_tune_and_opens_its_candidates(dashboard_tune):
    asyncio.run(_history(dashboard_tune))


async def _history(seen: Seen) -> None:
    cfg = SessionConfig(target="cpu", db_path=seen.db_path, cache_dir=str(seen.out_dir.parent / "kernels"))
    app = BooApp(cfg, [], autostart=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, lambda: app.engine.session is not None, 60, "the session")
        await pilot.press("h", "t")                       # history, then its Tunes tab
        await wait_until(pilot, lambda: app.screen.query("#tunes") and app.screen.query_one("#tunes").row_count,
                         30, "the stored tunes")
        row: list[Any] = app.screen.query_one("#tunes").get_row_at(0)
        tune, _started, status, target, kernels, improved, geomean, command = (str(c) for c in row)
        assert (tune, status, target, kernels) == (str(seen.tune_id), "done", "cpu", "1")
        assert int(improved) in (0, 1) and float(geomean) > 0
        assert command.startswith("boo-tui tune")
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, TuneReviewScreen)
                         and app.screen.query_one("#tune-candidates").row_count == 2, 30, "the tune's candidates")
        kernel_row = [str(c) for c in app.screen.query_one("#tune-review-kernels").get_row(FUNC)]
        assert kernel_row[1] in ("improved", "no_better") and kernel_row[6] == "2"
        candidates = app.screen.query_one("#tune-candidates")
        rows = [[str(c) for c in candidates.get_row_at(i)] for i in range(candidates.row_count)]
        # status, ratio, median, stage, what it changes, error: as the tune stored them (fastest first)
        assert {r[4] for r in rows} == {"dt", "dt+uk"}, rows
        for status, ratio, _median, stage, _what, error in rows:
            assert status in ("measured", "compile_failed", "not_applied", "numerics_failed", "failed")
            assert stage in ("global", "halving-1", "halving-2", "final")
            assert (ratio != "-") == (status == "measured") and (error == "") == (status == "measured")
        await pilot.press("escape", "escape", "q")
        await wait_until(pilot, lambda: not app.is_running, 30, "the app to exit")
