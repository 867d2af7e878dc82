"""A captured model's commands file of 1,000 distinct kernels in the dashboard: how long until the table shows
every row, and how long does the event loop stall while it loads and runs? Goals: <= 1 s, <= 50 ms.

Writes 1,000 distinct conv lines, each after a `# boo-tui: calls=N share=P%` weight line (what `boo-tui capture`
writes), opens the real app headless (Textual's run_test) with the real session on it, and reports the time from
creating the app to the table holding every job's row (1,000 commands x iree + torch = 2,000 rows, sorted by share),
the largest event-loop stall (a 10 ms timer on the app) during the load and over the first --run-seconds of the run
(compiles and measurements going on beside the UI), and the slowest table refresh. Run it on a quiet machine; on a
loaded one, the UI thread's own CPU time between two ticks of that timer (`max_ui_busy_*`) tells the dashboard's
work apart from the time the OS gave other processes, and a plain sleeping thread's longest oversleep
(`thread_probe_max_stall_ms`) the time the whole process was held up (the OS, or another thread holding the GIL).

    python3 benchmarks/bench_load_1000.py [--kernels 1000] [--run-seconds 30] [--size 160x50]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from boo_engine.session import SessionConfig
from boo_tui.app import BooApp
from boo_tui.stall import StallMonitor, ThreadProbe


def write_commands(path: Path, n: int, seed: int = 0) -> None:
    """n distinct small convs (channels x spatial x filters vary), each with a weight line; shares sum to ~100%."""
    rng = random.Random(seed)
    weights = [rng.random() ** 3 for _ in range(n)]
    total = sum(weights)
    lines = []
    for i in range(n):
        c, k = 4 + i % 25, 4 + (i // 25) % 40
        hw = 8 + (i // 1000) * 2
        lines.append(f"# boo-tui: calls={1 + rng.randrange(50)} share={100 * weights[i] / total:.3f}% self=0.1%")
        lines.append(f"conv -n 1 -c {c} -H {hw} -W {hw} -k {k} -y 3 -x 3 -p 1 -q 1 --iter 20")
    path.write_text("\n".join(lines) + "\n")


async def bench(args: argparse.Namespace) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="boo-tui-load-"))
    commands = tmp / "model.txt"
    write_commands(commands, args.kernels)
    cfg = SessionConfig(target="cpu", db_path=str(tmp / "results.db"), cache_dir=args.cache_dir or str(tmp / "cache"))
    width, height = (int(x) for x in args.size.split("x"))
    t0 = time.monotonic()
    app = BooApp(cfg, [str(commands)], autostart=not args.no_run)
    async with app.run_test(size=(width, height)) as pilot:
        monitor = StallMonitor(app, interval_s=0.01).start()
        probe = ThreadProbe().start()
        table = app.query_one("#results")
        want = args.kernels * len(cfg.backends)
        opened_s = None
        cpu0 = time.thread_time()
        while table.row_count < want:
            await pilot.pause(0.005)
            if opened_s is None and app.engine.session is not None:
                opened_s = time.monotonic() - t0
            if time.monotonic() - t0 > 60:
                break
        loaded_s = time.monotonic() - t0
        load_cpu_s = time.thread_time() - cpu0
        while not getattr(table, "measured", True) and time.monotonic() - t0 < 60:
            await pilot.pause(0.005)
        measured_s = time.monotonic() - t0
        load_stall, load_busy, load_probe = monitor.max_stall_s, monitor.max_busy_s, probe.max_gap_s
        first_row = table.get_row_at(0) if table.row_count else []
        sorted_ok = app.results.sort_by == "share" and app.results.sort_reverse
        t_run = time.monotonic()
        while time.monotonic() - t_run < args.run_seconds:
            await pilot.pause(0.1)
        monitor.stop()
        probe.stop()
        done = sum(1 for v in app.model.jobs.values() if v.status == "done")
        model_line = str(app.query_one("#model-line").render())
        await pilot.press("q")
        while app.is_running:
            await pilot.pause(0.1)
    gaps = sorted(monitor.gaps_s)
    busy = sorted(monitor.busy_s)
    return {
        "kernels": args.kernels,
        "rows": want,
        "session_opened_s": round(opened_s, 3) if opened_s is not None else None,
        "table_shows_every_row_s": round(loaded_s, 3),
        "table_columns_measured_s": round(measured_s, 3),
        "ui_cpu_during_load_s": round(load_cpu_s, 3),
        "sorted_by_share_desc": sorted_ok,
        "first_row": [str(c) for c in first_row][:6],
        "max_stall_during_load_ms": round(load_stall * 1000, 1),
        "max_ui_busy_during_load_ms": round(load_busy * 1000, 1),
        "thread_probe_max_stall_during_load_ms": round(load_probe * 1000, 1),
        "run_seconds_watched": args.run_seconds,
        "jobs_done_meanwhile": done,
        "max_stall_ms": round(monitor.max_stall_s * 1000, 1),
        "max_ui_busy_ms": round(monitor.max_busy_s * 1000, 1),
        "ui_busy_p99_ms": round(busy[int(0.99 * (len(busy) - 1))] * 1000, 1) if busy else None,
        "thread_probe_max_stall_ms": round(probe.max_gap_s * 1000, 1),
        "gap_p99_ms": round(gaps[int(0.99 * (len(gaps) - 1))] * 1000, 1) if gaps else None,
        "gap_p50_ms": round(statistics.median(gaps) * 1000, 1) if gaps else None,
        "long_gaps": [[round(t, 2), round(g * 1000)] for t, g in monitor.long_gaps[:20]],
        "max_table_refresh_ms": round(app.results.max_flush_s * 1000, 1),
        "model_line": model_line[:200],
        "host_load_1min": round(os.getloadavg()[0], 2),
        "goals": {"load_s": 1.0, "stall_ms": 50},
        "ok": loaded_s <= 1.0 and monitor.max_stall_s <= 0.050,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kernels", type=int, default=1000)
    p.add_argument("--run-seconds", type=float, default=30.0, help="how long to watch the run after the load")
    p.add_argument("--no-run", action="store_true", help="load only (no compiles, no measurements)")
    p.add_argument("--size", default="160x50", help="terminal size WxH")
    p.add_argument("--cache-dir", default=None, help="kernel cache (default: a fresh one)")
    args = p.parse_args()
    out = asyncio.run(bench(args))
    print(json.dumps(out, indent=2))
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
