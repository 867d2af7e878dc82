"""How long the grammar takes: parsing commands (what a dashboard does on every keystroke of the command box and
for every line of a commands file) and exporting each op family to a torch program (what the compile pool does
before iree-compile). Re-run on a quiet machine:

    python3 benchmarks/bench_parse.py [--repeat 2000]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

COMMANDS = [
    "convbfp16 -n 16 -c 96 -H 48 -W 32 -k 96 -y 3 -x 1 -p 2 -q 0 -u 1 -v 1 -l 2 -j 2 -m conv -g 1 -F 2 "
    "--in_layout NHWC --out_layout NHWC --fil_layout NHWC -t 1 --iter 100",
    "conv -n 2 -c 64 -H 28 -W 28 -k 64 -y 3 -x 3 -p 1 -q 1 -F 1 -b 1",
    "layernorm --input 16x128x768 --eps 1e-5 --mode 1 --normalized_dim 2 -F 14",
    "gemmfp16 --a_w 128 --a_h 256 --b_w 256 -F 1",
    "bnormbfp16 -n 8 -c 64 -H 28 -W 28 -m 1 -F 1 -r 1 -s 1 -L NHWC",
]


def _time_us(fn, repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e6)
    return samples


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=2000)
    args = ap.parse_args()
    t0 = time.perf_counter()
    from boo_engine.commands import parse_command, parse_invocation, read_commands_file

    print(f"import boo_engine.commands: {(time.perf_counter() - t0) * 1e3:.0f} ms (includes torch)")
    print(f"{'command':60s} {'parse median us':>16s} {'p95 us':>8s}")
    for cmd in COMMANDS:
        s = _time_us(lambda: parse_invocation(cmd), args.repeat)
        q = statistics.quantiles(s, n=20)
        print(f"{cmd[:60]:60s} {statistics.median(s):16.1f} {q[18]:8.1f}")
    sample = Path(__file__).resolve().parent.parent / "sample_commands.txt"
    s = _time_us(lambda: read_commands_file(sample), max(10, args.repeat // 50))
    print(f"read_commands_file(sample_commands.txt): median {statistics.median(s) / 1e3:.2f} ms")

    import torch

    print(f"{'export (torch.export of reference)':60s} {'first ms':>16s} {'next ms':>8s}")
    for cmd in COMMANDS:
        sig = parse_command(cmd)
        args_ = tuple(torch.zeros(sh, dtype=dt) for sh, dt in zip(sig.input_shapes(), sig.input_dtypes()))
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            torch.export.export(sig.as_module(), args_)
            times.append((time.perf_counter() - t0) * 1e3)
        print(f"{sig.func_name[:60]:60s} {times[0]:16.1f} {min(times[1:]):8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
