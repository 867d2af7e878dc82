"""A captured model's commands file of many weighted kernels in the real dashboard (issue 28 item 10): the engine's
floods of events reach the UI as one message, and the table measures and draws only what it must. The real app and
session (nothing runs: autostart off); work is counted, never timed (the time goals are
benchmarks/bench_load_1000.py's)."""
from __future__ import annotations

import asyncio
import random
from pathlib import Path

from tui_pilot import wait_until

import boo_tui.app
from boo_engine import events as ev
from boo_engine.results import Status
from boo_engine.session import SessionConfig
from boo_tui.app import BooApp

KERNELS = 300


def write_model(path, n: int) -> None:
    """n distinct convs, each after its weight line, as `boo-tui capture` writes them."""
    rng = random.Random(0)
    lines = []
    for i in range(n):
        lines.append(f"# boo-tui: calls={1 + rng.randrange(50)} share={rng.random():.3f}%")
        lines.append(f"conv -n 1 -c {4 + i % 25} -H 8 -W 8 -k {4 + i // 25} -y 3 -x 3 -p 1 -q 1 --iter 20")
    path.write_text("\n".join(lines) + "\n")


class CountingApp(BooApp):
    """The dashboard, counting the pokes the bridge sends (Textual calls this and then BooApp's own handler)."""

    CSS_PATH = str(Path(boo_tui.app.__file__).with_name("app.tcss"))    # (a relative one is the test module's)
    pokes = 0

    def on_events_ready(self, message) -> None:
        self.pokes += 1


def test_a_flood_of_status_events_is_one_message_and_redraws_only_the_rows_on_screen(tmp_path):
    async def go() -> None:
        model = tmp_path / "model.txt"
        write_model(model, KERNELS)
        cfg = SessionConfig(target="cpu", db_path=str(tmp_path / "r.db"), cache_dir=str(tmp_path / "cache"))
        app = CountingApp(cfg, [str(model)], autostart=False)
        async with app.run_test(size=(120, 40)) as pilot:
            table = app.query_one("#results")
            await wait_until(pilot, lambda: table.row_count == 2 * KERNELS and app.results.settled() and table.measured,
                             120, "the model's rows")
            assert app.results.sort_by == "share" and app.results.sort_reverse
            visible = table.size.height - table.header_height
            measured, drawn, pokes = table.rows_measured, table.rows_rendered, app.pokes
            # what the runner sends as a batch's compiles start: every job's status, from the engine's threads
            for job_id in list(app.model.jobs):
                app.bridge.listener(ev.JobStatus(job_id=job_id, status=Status.COMPILING))
            assert not app.bridge.idle()
            await wait_until(pilot, lambda: app.results.settled() and table.measured, 60, "the statuses applied")
            assert app.pokes == pokes + 1                    # one message for 2 x KERNELS events
            assert all(v.status == Status.COMPILING for v in app.model.jobs.values())
            assert all("compiling" in table.render_line(y).text for y in range(1, visible + 1))
            assert table.rows_measured - measured == 2 * KERNELS         # each row's cells made once
            assert table.rows_rendered - drawn <= 2 * visible            # only the rows on screen drawn again
    asyncio.run(go())
