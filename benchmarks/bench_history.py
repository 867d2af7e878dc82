"""History at scale: `boo-tui compare` of two runs of 1,000 results with 100 samples each, and `boo-tui merge` of
ten databases of 100,000 samples each (time and resulting size). The databases are synthesized through the Store
API (real SQLite files, as a session writes them), not measured; the commands run as a user runs them, in a child
process (`python3 -m boo_tui ...`), so start-up and imports are counted.

    python3 benchmarks/bench_history.py [--results 1000] [--samples 100] [--dbs 10]
Goals: compare <= 10 s on 2 cores; merge as fast as the disk allows, nothing lost.
"""
from __future__ import annotations

import argparse
import os
import platform
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from boo_engine.bench.stats import compute_stats  # noqa: E402
from boo_engine.results import JobResult  # noqa: E402
from boo_engine.store import Store  # noqa: E402


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def make_db(path: Path, n_results: int, n_samples: int, *, host: str, slow: float, seed: int) -> float:
    """One run of `n_results` gemm results with `n_samples` samples each; 1 in 10 of them `slow` times slower."""
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    with Store(path) as store:
        run = store.start_run(command_line=f"boo-tui bench {seed}", target="cpu",
                              environment={"host": host, "cpu": cpu_model(), "seed": seed},
                              config={"min_effect": 0.03, "seed": 0, "compile_flags": []})
        for i in range(n_results):
            base = 10.0 + i % 50
            factor = slow if i % 10 == 0 else 1.0
            samples = (base * factor * (1 + 0.02 * rng.standard_normal(n_samples))).tolist()
            store.record_result(run, JobResult(job_id=f"j{i}", command=f"gemm -m {16 + i} -n 64 -k 64",
                                               func_name=f"gemm_{i}", op="gemm", variant="baseline", target="cpu",
                                               backend="iree", status="done", samples_us=samples,
                                               stats=compute_stats(samples)))
        store.finish_run(run, "done")
    return time.perf_counter() - t0


def boo_tui(*args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "boo_tui", *args], capture_output=True, text=True, env=env)
    return time.perf_counter() - t0, p


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=int, default=1000)
    ap.add_argument("--samples", type=int, default=100)
    ap.add_argument("--dbs", type=int, default=10)
    args = ap.parse_args()
    print(f"CPU: {cpu_model()} ({os.cpu_count()} logical cores); Python {platform.python_version()}")
    with tempfile.TemporaryDirectory(prefix="bench-history-") as tmp:
        d = Path(tmp)
        a, b = d / "a.db", d / "b.db"
        made = make_db(a, args.results, args.samples, host="laptop", slow=1.0, seed=1)
        made += make_db(b, args.results, args.samples, host="ci", slow=1.3, seed=2)
        print(f"synthesized 2 runs of {args.results} results x {args.samples} samples in {made:.1f} s")
        seconds, p = boo_tui("compare", str(a), str(b), "--export", str(d / "cmp.json"), "--fail-on-regression", "5")
        if p.returncode not in (0, 3):
            print(p.stderr)
            return 1
        n_reg = p.stderr.count("regression:")
        print(f"| compare | {args.results} results x {args.samples} samples per run | {seconds:.2f} s "
              f"(exit {p.returncode}, {n_reg} regressions found) |")

        inputs = []
        made = 0.0
        for i in range(args.dbs):
            path = d / f"m{i}.db"
            made += make_db(path, args.results, args.samples, host=f"host{i % 3}", slow=1.0, seed=10 + i)
            inputs.append(str(path))
        in_bytes = sum(Path(x).stat().st_size for x in inputs)
        print(f"synthesized {args.dbs} databases of {args.results * args.samples:,} samples in {made:.1f} s "
              f"({in_bytes / 2**20:.1f} MiB together)")
        out = d / "all.db"
        seconds, p = boo_tui("merge", *inputs, "-o", str(out))
        if p.returncode != 0:
            print(p.stderr)
            return 1
        with sqlite3.connect(out) as c:
            samples = c.execute("SELECT COUNT(*) FROM samples").fetchone()[0]
            runs = c.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
        expect = args.dbs * args.results * args.samples
        print(f"| merge | {args.dbs} DBs x {args.results * args.samples:,} samples | {seconds:.2f} s | "
              f"{out.stat().st_size / 2**20:.1f} MiB, {runs} runs, {samples:,} samples "
              f"({'all there' if samples == expect else f'EXPECTED {expect:,}'}) |")
        again, p = boo_tui("merge", *inputs, "-o", str(out), "--force")
        print(f"| merge again (--force, nothing new) | {args.dbs} DBs | {again:.2f} s | {p.stderr.strip()[-60:]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
