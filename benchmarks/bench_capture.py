"""How much slower than eager one captured forward pass is: a ResNet-like stack of 51 layers (a conv/bn/relu stem,
then 8 basic blocks of conv/bn/relu/conv/bn + residual + relu), eager (no_grad) against the same pass recorded by
`boo-tui capture` (torch.profiler, record_shapes=True, after a profiled warm-up step), and what the whole capture
costs end to end (load, warm-up, eager timing, recording, trace export and conversion). Re-run on a quiet machine:

    python3 benchmarks/bench_capture.py [--repeat 21] [--threads 1]

Eager and recorded passes alternate, so a loaded machine slows both alike; `ratio` is of the medians, `min ratio`
of the fastest of each, and `us/op extra` the fastest recorded pass's extra time per recorded op.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
from torch import nn

CHANNELS = 32


class Block(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.c2, self.b2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.b1(self.c1(x)))
        return torch.relu(self.b2(self.c2(y)) + x)


def resnet_like() -> nn.Module:
    """51 layers: stem conv + bn + relu, 8 blocks of 6 (conv, bn, relu, conv, bn, relu)."""
    return nn.Sequential(nn.Conv2d(3, CHANNELS, 3, padding=1), nn.BatchNorm2d(CHANNELS), nn.ReLU(),
                         *[Block(CHANNELS) for _ in range(8)]).eval()


def _pair(fn) -> tuple[float, float]:
    """One eager pass and one recorded pass, back to back (so both see the same machine load), in seconds; the
    recorded one as capture records it: a profiled warm-up step first, then the timed step."""
    from torch.profiler import ProfilerActivity, profile, schedule

    t0 = time.perf_counter()
    fn()
    eager = time.perf_counter() - t0
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 schedule=schedule(wait=0, warmup=1, active=1), on_trace_ready=lambda p: None) as prof:
        fn()
        prof.step()
        t0 = time.perf_counter()
        fn()
        captured = time.perf_counter() - t0
        prof.step()
    return eager, captured


def main() -> int:
    import warnings

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=21)
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1: the steadiest)")
    args = ap.parse_args()
    warnings.simplefilter("ignore", UserWarning)
    torch.set_num_threads(args.threads)
    from boo_engine.capture import model_commands, parse_input

    print(f"torch {torch.__version__}, {args.threads} thread(s), median of {args.repeat}")
    print(f"{'input':>14} {'eager ms':>9} {'captured ms':>12} {'ratio':>6} {'min ratio':>9} {'ops':>5} "
          f"{'us/op extra':>11} {'end-to-end s':>12}")
    for shape in ((1, 3, 16, 16), (8, 3, 32, 32), (8, 3, 64, 64)):
        model, x = resnet_like(), torch.randn(*shape)

        def one() -> None:
            with torch.no_grad():
                model(x)

        for _ in range(5):
            one()
        pairs = [_pair(one) for _ in range(args.repeat)]
        eager = statistics.median(e for e, _ in pairs) * 1e3
        captured = statistics.median(c for _, c in pairs) * 1e3
        best_eager, best_captured = min(e for e, _ in pairs), min(c for _, c in pairs)
        best_ratio = best_captured / best_eager
        t0 = time.perf_counter()
        text = model_commands(f"{Path(__file__).resolve()}:resnet_like",
                              [parse_input("x".join(map(str, shape)))], threads=args.threads)
        end_to_end = time.perf_counter() - t0
        ops = sum(int(ln.split("calls=")[1].split()[0]) for ln in text.splitlines() if ln.startswith("# boo-tui:"))
        label = "x".join(map(str, shape))
        print(f"{label:>14} {eager:9.2f} {captured:12.2f} {captured / eager:6.2f} {best_ratio:9.2f} {ops:5d} "
              f"{(best_captured - best_eager) * 1e6 / ops:11.1f} {end_to_end:12.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
