"""Do a captured file's weights add up? `boo-tui capture` of a model, then every command of the file measured with
eager torch on its own, in this process, as boo-tui's torch column measures it (`OpSignature.eager` on the
command's sample inputs, `bench.harness.measure`, one thread), the commands interleaved in rounds:

    python3 benchmarks/bench_capture_shares.py                                   # tests/models/weighted_net.py
    python3 benchmarks/bench_capture_shares.py tests/models/zero_grad_nets.py:make --input 8x3x32x32 --backward

Prints the file's header, then per command its share and the share of its measured time (calls x the least of its
rounds' medians, over the sum of every command's), its captured and measured microseconds, and the totals: the
capture's compute total (or, for a file written before it, the eager time its shares were of) against the
measured sum. `--threads` is passed to the capture (left out: capture's default); the measurement uses one
thread, as boo-tui does by default. Run it with an older boo-tui on PYTHONPATH to see what its files said.
"""
from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from boo_engine.bench.harness import measure
from boo_engine.commands import parse_command
from boo_tui.cli import main as boo_tui

WEIGHT = re.compile(r"# boo-tui: calls=(\d+) share=([0-9.]+)%(?:.* us=([0-9.]+))?")


def _capture(args: argparse.Namespace, out: Path) -> str:
    argv = ["capture", args.model, "-o", str(out)] + [a for i in args.input for a in ("--input", i)]
    argv += ["--backward"] if args.backward else []
    argv += ["--threads", str(args.threads)] if args.threads else []
    if boo_tui(argv) != 0:
        raise SystemExit("capture failed")
    return out.read_text()


def main() -> int:
    here = Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?", default=f"{here / 'tests' / 'models' / 'weighted_net.py'}:make")
    ap.add_argument("--input", action="append", default=None)
    ap.add_argument("--backward", action="store_true")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    args.input = args.input or ["4x16x32x32"]
    with tempfile.TemporaryDirectory() as tmp:
        text = _capture(args, Path(tmp) / "model.txt")
    lines = text.splitlines()
    print("\n".join(ln for ln in lines if ln.startswith("#") and not ln.startswith("# boo-tui:")))
    rows = []   # (calls, share, us or None, command)
    for meta, cmd in zip(lines, lines[1:]):
        m = WEIGHT.match(meta)
        if m:
            rows.append((int(m[1]), float(m[2]), float(m[3]) if m[3] else None, cmd))
    torch.set_num_threads(1)
    calls = [parse_command(cmd) for *_, cmd in rows]
    runs = [sig.eager(*sig.get_sample_args(seed=0)) for sig in calls]
    medians: list[list[float]] = [[] for _ in rows]
    for _ in range(args.rounds):
        for i, run in enumerate(runs):
            medians[i].append(statistics.median(measure(run, iters=20, min_time_s=0.02, warmup_s=0.01).samples_us))
    measured = [n * min(m) for (n, *_), m in zip(rows, medians)]
    total = sum(measured)
    print(f"\n{'share %':>8} {'measured %':>10} {'captured us':>11} {'measured us':>11}  command")
    for (_, share, us, cmd), m in zip(rows, measured):
        print(f"{share:8.2f} {100 * m / total:10.2f} {us if us is not None else float('nan'):11.1f} {m:11.1f}  "
              f"{cmd[:90]}")
    shares = sum(share for _, share, _, _ in rows)
    compute = re.search(r"compute total: ([0-9.]+) ms", text)
    eager = re.search(r"eager time: ([0-9.]+) ms", text)
    print(f"\n{len(rows)} commands; shares sum to {shares:.1f}%; measured sum of calls x time: {total / 1e3:.3f} ms")
    if compute:
        print(f"compute total {compute[1]} ms: measured / captured = {total / 1e3 / float(compute[1]):.2f}")
    elif eager:
        print(f"eager time {eager[1]} ms (what the shares are of): the measured sum is "
              f"{100 * total / 1e3 / float(eager[1]):.1f}% of it, the shares say {shares:.1f}%")
    held = [abs(share - 100 * m / total) for (_, share, _, _), m in zip(rows, measured) if 100 * m / total >= 5]
    if held:
        print(f"commands of >= 5% measured: {len(held)}, largest |share - measured share| {max(held):.2f} points")
    return 0


if __name__ == "__main__":
    sys.exit(main())
