"""Does a number boo-tui reports survive being re-checked outside the tool?

Runs `boo-tui COMMANDS --backend iree --export r.json` (the full session path: interleaved rounds, the worker
process, streaming), then runs each result's stored reproducer (`iree-benchmark-module` on the cached artifact
with the saved inputs) and compares the two medians. Goal: within +-5%.

    python benchmarks/bench_reproducer_agreement.py [--iter 200] [COMMAND ...]
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

DEFAULT = [
    "gemm --a_w 128 --a_h 128 --b_w 128",
    "conv -n 4 -c 35 -H 48 -W 32 -k 35 -y 1 -x 1 --in_layout NHWC --out_layout NHWC --fil_layout NHWC",
    "conv -n 2 -c 64 -H 28 -W 28 -k 64 -y 3 -x 3 -p 1 -q 1",
    "conv -n 8 -c 128 -H 24 -W 48 -k 384 -y 1 -x 1 --in_layout NHWC --out_layout NHWC --fil_layout NHWC",
]


def reproducer_median_us(command: str) -> float:
    """Median over repetitions of iree-benchmark-module's real time per call, in us."""
    argv = shlex.split(command) + ["--benchmark_format=json"]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    data = json.loads(out[out.index("{"):])
    runs = [b for b in data["benchmarks"] if b.get("run_type") == "iteration"]
    scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}
    return statistics.median(b["real_time"] * scale[b.get("time_unit", "ns")] for b in runs)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("commands", nargs="*", default=DEFAULT)
    ap.add_argument("--iter", type=int, default=200)
    ap.add_argument("--tolerance", type=float, default=0.05)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "r.json"
        subprocess.run([sys.executable, "-m", "boo_tui", *args.commands, "--backend", "iree", "--iter", str(args.iter),
                        "--db", str(Path(tmp) / "r.db"), "--export", str(out)], check=True,
                       stderr=subprocess.DEVNULL, env=dict(os.environ))
        results = json.loads(out.read_text())["results"]
        ok = 0
        for r in results:
            ours = r["stats"]["median_us"]
            theirs = reproducer_median_us(r["reproducer"])
            ratio = ours / theirs
            good = abs(ratio - 1) <= args.tolerance
            ok += good
            print(f"{'ok ' if good else 'BAD'} boo-tui {ours:10.2f} us / reproducer {theirs:10.2f} us = {ratio:.3f}"
                  f"  (k={r['block_k']})  {r['command']}")
        print(f"{ok}/{len(results)} within +-{args.tolerance:.0%}")
        return 0 if ok == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
