"""Speed of one variant comparison (median ratio with a bootstrap CI + Mann-Whitney U): the dashboard's compare
screen and every export compute one per (command, variant), so it must stay well under a frame.

    python3 benchmarks/bench_compare.py [--repeats 20]
Goal: <= 50 ms per comparison of 100 + 100 samples with 2000 bootstrap resamples.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from boo_engine.compare import compare_samples


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print("| samples per side | bootstrap resamples | median ms | max ms |")
    print("|---|---|---|---|")
    for n in (100, 1000, 10000):
        b = 100.0 * (1 + 0.05 * rng.standard_normal(n))
        v = 104.0 * (1 + 0.05 * rng.standard_normal(n))
        compare_samples(b, v)  # warm-up (imports, first allocation)
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            compare_samples(b, v, n_boot=2000)
            times.append((time.perf_counter() - t0) * 1e3)
        print(f"| {n} | 2000 | {statistics.median(times):.1f} | {max(times):.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
