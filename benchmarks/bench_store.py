"""How fast the results store writes and reads, and how big the file gets (re-run on a quiet machine).

    python3 benchmarks/bench_store.py [--results 100] [--samples 1000]

Measures: caller-side cost of record_result (the snapshot taken on the session's thread), time until the writer
has committed everything (flush), load_results time, and the file size; and, for reference, the same samples
stored as one float64 BLOB per result (the compact alternative to one row per sample).
"""
from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from boo_engine.bench.stats import compute_stats
from boo_engine.results import CompileInfo, JobResult
from boo_engine.store import Store


def make_results(n_results: int, n_samples: int) -> list[JobResult]:
    rng = np.random.default_rng(0)
    out = []
    for i in range(n_results):
        samples = (100.0 + rng.standard_normal(n_samples)).tolist()
        out.append(JobResult(job_id=f"j{i}", command=f"conv -n {i % 20} -c 8", func_name=f"f{i % 20}", op="conv",
                             variant=("baseline", "tuned")[i % 2], target="cpu", backend="iree", status="done",
                             stats=compute_stats(samples), samples_us=samples,
                             compile=CompileInfo(seconds=1.0, key=f"k{i}", command=["iree-compile", "x"])))
    return out


def size_of(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def bench_store(results: list[JobResult], tmp: Path) -> None:
    path = tmp / "rows.db"
    with Store(path) as store:
        run = store.start_run(command_line="bench", target="cpu", config={}, environment={"host": "bench"})
        t0 = time.perf_counter()
        for r in results:
            store.record_result(run, r)
        t_enqueue = time.perf_counter() - t0
        store.flush()
        t_commit = time.perf_counter() - t0
        t0 = time.perf_counter()
        loaded = store.load_results(run)
        t_load = time.perf_counter() - t0
        assert len(loaded) == len(results)
    n = len(results)
    total = sum(len(r.samples_us) for r in results)
    print(f"row per sample: {n} results x {total // n} samples")
    print(f"  record_result on the caller's thread: {t_enqueue * 1e3:.1f} ms total, {t_enqueue / n * 1e6:.0f} us each")
    print(f"  all committed (flush):                {t_commit * 1e3:.1f} ms ({total / t_commit / 1e3:.0f} k samples/s)")
    print(f"  load_results (samples included):      {t_load * 1e3:.1f} ms")
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    print(f"  file size: {size_of(path) / 1e6:.2f} MB ({size_of(path) / total:.1f} bytes/sample)")


def bench_blob(results: list[JobResult], tmp: Path) -> None:
    path = tmp / "blob.db"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=wal")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("CREATE TABLE samples (result_id INTEGER PRIMARY KEY, data BLOB)")
    t0 = time.perf_counter()
    for i, r in enumerate(results):
        with conn:
            conn.execute("INSERT INTO samples VALUES (?, ?)", (i, np.asarray(r.samples_us, dtype=np.float64).tobytes()))
    t = time.perf_counter() - t0
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    print(f"reference, one float64 BLOB per result: {t * 1e3:.1f} ms, {size_of(path) / 1e6:.2f} MB")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=int, default=100)
    ap.add_argument("--samples", type=int, default=1000)
    args = ap.parse_args()
    results = make_results(args.results, args.samples)
    with tempfile.TemporaryDirectory() as d:
        bench_store(results, Path(d))
        bench_blob(results, Path(d))


if __name__ == "__main__":
    main()
