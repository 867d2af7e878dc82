"""What the lowering rule (compile/lowering.py) costs and whether IREE_NATIVE_OPS still earns its place:

1. the rule's cost per export: IREE's torch-to-iree conversion run in process on the imported MLIR;
2. for the ops exported as they are (IREE_NATIVE_OPS), the kernel's median time (host wall time per call, on a GPU
   including the copies of inputs and outputs) exported
   as-is vs through torch's default decompositions (what dropping the list would give), on --target.

Re-run on a quiet machine:

    python3 benchmarks/bench_aten_lowering.py [--calls 300] [--target cuda]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

LINES = [
    """aten::scaled_dot_product_attention "[[2, 4, 128, 64], [2, 4, 128, 64], [2, 4, 128, 64], [], [], [], [], []]" "['c10::BFloat16', 'c10::BFloat16', 'c10::BFloat16', '', 'Scalar', 'Scalar', 'Scalar', 'Scalar']" "[[32768, 8192, 64, 1], [32768, 8192, 64, 1], [32768, 8192, 64, 1], [], [], [], [], []]" "['', '', '', 'None', '0.0', 'True', 'None', 'False']\"""",
    """aten::layer_norm "[[64, 16, 256], [], [256], [256], [], []]" "['float', 'ScalarList', 'float', 'float', 'Scalar', 'Scalar']" "[[256, 16384, 1], [], [1], [1], [], []]" "['', '[256]', '', '', '1e-05', 'True']\"""",
    """aten::addmm "[[256], [256, 256], [256, 256], [], []]" "['c10::Half', 'c10::Half', 'c10::Half', 'Scalar', 'Scalar']" "[[1], [256, 1], [256, 1], [], []]" "['', '', '', '1', '1']\"""",
    """aten::argmax "[[64, 128, 256], [], []]" "['float', 'Scalar', 'Scalar']" "[[32768, 256, 1], [], []]" "['', '1', 'False']\"""",
    """aten::batch_norm "[[8, 64, 32, 32], [64], [64], [64], [64], [], [], [], []]" "['float', 'float', 'float', 'float', 'float', 'Scalar', 'Scalar', 'Scalar', 'Scalar']" "[[65536, 1024, 32, 1], [1], [1], [1], [1], [], [], [], []]" "['', '', '', '', '', 'False', '0.1', '1e-05', 'True']\"""",
]


def median_us(kernel, args, calls: int) -> float:
    for _ in range(10):
        kernel(*args)
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        kernel(*args)
        times.append((time.perf_counter() - t) * 1e6)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--target", default="cpu", help="cpu, or a GPU target this machine has (cuda, hip)")
    opts = ap.parse_args()

    import boo_engine.ops.aten as aten_mod
    from boo_engine.commands import parse_command
    from boo_engine.compile.cache import KernelCache
    from boo_engine.compile.export import export_mlir
    from boo_engine.compile.lowering import unlowered
    from boo_engine.runtime.launchable import get_launchable

    sigs = [parse_command(line) for line in LINES]
    for sig in sigs:
        text = export_mlir(sig)
        t = time.perf_counter()
        for _ in range(20):
            unlowered(text)
        print(f"rule check {sig.op_name:32s} {(time.perf_counter() - t) / 20 * 1e3:6.1f} ms per export")

    native, native16 = aten_mod.IREE_NATIVE_OPS, aten_mod.IREE_NATIVE_OPS_16BIT
    with tempfile.TemporaryDirectory() as d:
        results = {}
        for label, ops, ops16 in (("as-is", native, native16), ("decomposed", frozenset(), frozenset())):
            aten_mod.IREE_NATIVE_OPS, aten_mod.IREE_NATIVE_OPS_16BIT = ops, ops16   # the property reads these
            cache = KernelCache(Path(d) / label)
            for sig in sigs:
                if sig.op_name not in native:
                    continue
                kernel = get_launchable(sig, opts.target, None, cache=cache)
                results[(sig.op_name, label)] = median_us(kernel, sig.get_sample_args(0), opts.calls)
        aten_mod.IREE_NATIVE_OPS, aten_mod.IREE_NATIVE_OPS_16BIT = native, native16
    for sig in sigs:
        if sig.op_name in native:
            a, b = results[(sig.op_name, "as-is")], results[(sig.op_name, "decomposed")]
            print(f"{sig.op_name:32s} as-is {a:9.1f} us   decomposed {b:9.1f} us   decomposed/as-is {b / a:5.2f}x")


if __name__ == "__main__":
    main()
