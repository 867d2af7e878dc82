"""How soon does a headless run show its first result when every kernel is cached? (goal: <= 2 s after start)

Runs `boo-tui sample_commands.txt --export x.csv` twice with the same kernel cache: the first run fills the cache
(its wall time is the cold figure), the second measures the time from process start to the first finished-job
line on stderr, and to the end. Usage: python benchmarks/bench_first_result.py [--iter N]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(env, tmp, iters):
    cmd = [sys.executable, "-m", "boo_tui", str(ROOT / "sample_commands.txt"), "--iter", str(iters),
           "--db", str(Path(tmp) / "r.db"), "--export", str(Path(tmp) / "x.csv")]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    first = None
    for line in proc.stderr:
        if first is None and line.startswith(("done", "failed")):
            first = time.perf_counter() - t0
    proc.wait()
    return first, time.perf_counter() - t0, proc.returncode


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iter", type=int, default=100)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, BOO_CACHE_DIR=str(Path(tmp) / "cache"))
        first, total, rc = run(env, tmp, args.iter)
        print(f"cold cache : first result {first:.2f} s, whole run {total:.1f} s (exit {rc})")
        first, total, rc = run(env, tmp, args.iter)
        print(f"warm cache : first result {first:.2f} s, whole run {total:.1f} s (exit {rc})   goal: first <= 2 s")


if __name__ == "__main__":
    main()
