"""SVG snapshots of the dashboard's main states (pytest-textual-snapshot). Only states without timings are
snapshotted, so they are deterministic: the empty app, a table of queued jobs (nothing runs: autostart off),
the add-command dialog showing the parser's error, and the wide layout. The session is the real one.

Update after an intended change: python3 -m pytest tests/test_tui_snapshots.py --snapshot-update
"""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from boo_engine.session import SessionConfig
from boo_tui.app import BooApp

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = "sample_commands.txt"     # relative (the tests run from the repository root): no checkout path in SVGs


@pytest.fixture
def make_app(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)

    def make(inputs: list[str]) -> BooApp:
        cfg = SessionConfig(target="cpu", db_path=str(tmp_path / "r.db"), cache_dir=str(tmp_path / "cache"))
        return BooApp(cfg, inputs, autostart=False)

    return make


def drawn_whole(table) -> bool:
    """The first row as the screen draws it shows its whole op ("conv", not "co"): the measured column widths can
    run ahead of the layout the screen uses, which is re-done when the app is idle (late on a busy CI host, where a
    snapshot once caught every column at its header's width)."""
    op = str(table.get_row_at(0)[list(table.columns).index("op")])
    return f" {op} " in table.render_line(table.header_height).text


def wait_for_rows(n: int):
    """run_before hook: wait (bounded) until the session opened and the table holds n rows, laid out (the
    table measures its columns when idle: a dialog opened before that would cover a table drawn with the
    headers' widths)."""

    def waiting_for(app) -> str:
        """What is not ready yet ("" when everything is): the failure message names it."""
        if app.engine.session is None:
            return f"the session to open (error: {app.engine.error})"
        table = app.query_one("#results")
        if table.row_count < n or table.virtual_size.height < table.header_height + n:
            return f"{n} rows laid out (rows {table.row_count}, height {table.virtual_size.height})"
        # every queued event applied and no table rebuild pending (a rebuild re-measures the columns when idle)
        if not app.results.settled():
            return "the engine's events applied"
        # the columns measured: the "op" column wider than its header (its cells: "gemm", "conv", ...)
        if n and table.columns["op"].content_width <= len("op"):
            return "the columns measured"
        if n and not drawn_whole(table):
            return f"the first row drawn whole ({table.render_line(table.header_height).text.rstrip()!r})"
        return ""

    def ready(app) -> bool:
        return not waiting_for(app)

    async def run_before(pilot) -> None:
        app = pilot.app
        deadline = time.monotonic() + 60
        while True:
            if time.monotonic() >= deadline:
                try:
                    log = [line.text for line in app.screen_stack[0].query_one("#log").lines][-5:]
                except Exception as e:  # noqa: BLE001 - the message still names what was waited for
                    log = [f"(no log: {e})"]
                raise AssertionError(f"waited 60 s for {waiting_for(app)}; the log: {log}")
            if ready(app):
                await pilot.pause(0.3)      # the table flush and the plots' first redraw
                # still ready after the pause: on a busy CI host a table rebuild landed inside it once, and the
                # snapshot caught the columns at their headers' widths ("co" for "conv")
                if ready(app):
                    return
            else:
                await pilot.pause(0.05)

    return run_before


def test_snapshot_empty(snap_compare, make_app):
    assert snap_compare(make_app([]), terminal_size=(80, 24), run_before=wait_for_rows(0))


def test_snapshot_queued_table(snap_compare, make_app):
    # 15 commands x (iree, torch); "#", op and the shape (elided) tell the commands apart at 80 columns, the status
    # and the median stay in view; the kernel name is last
    assert snap_compare(make_app([SAMPLES]), terminal_size=(80, 24), run_before=wait_for_rows(30))


def test_snapshot_add_command_error(snap_compare, make_app):
    async def run_before(pilot) -> None:
        await wait_for_rows(2)(pilot)
        await pilot.press("a")
        pilot.app.screen.query_one("#prompt-input").value = "conv -n 1 -c 3x -H 8"
        await pilot.press("enter")
        await pilot.pause(0.2)

    assert snap_compare(make_app(["gemm -k 16 -m 16 -n 16"]), terminal_size=(80, 24), run_before=run_before)


def test_snapshot_wide_layout(snap_compare, make_app):
    async def run_before(pilot) -> None:
        await wait_for_rows(30)(pilot)
        await pilot.press("down", "down")      # the third row: command 2, its iree job
        await pilot.pause(0.3)
        await pilot.pause(0.5)
        await wait_for_rows(30)(pilot)         # and the table drawn whole again after the detail pane's update

    assert snap_compare(make_app([SAMPLES]), terminal_size=(200, 50), run_before=run_before)   # side by side: >= 180
