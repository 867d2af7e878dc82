"""16-bit aten calls: computed in float32 (the default for ops IREE does not lower itself) or in their own dtype,
and 16-bit normalizations lowered by IREE itself or through torch's decomposition. Per line: BOO's numerics
verdict (against float64, error std within 1.2x torch's) and the kernel's median time, both ways.

1. ops outside IREE_NATIVE_OPS (bfloat16 lines the model zoo captured): formulation `default` (16-bit tensors
   widened to float32, the op run in float32, each result rounded once, as torch's kernels compute) against
   `in_dtype` (the op in bfloat16 throughout, as IREE lowers it: every intermediate rounded, reductions
   accumulated in 16 bits);
2. layer_norm and softmax in bfloat16 / float16: exported as they are (IREE's own lowering) against through
   torch's decompositions, computed in float32 (what IREE_NATIVE_OPS_16BIT decides for them).

    python3 benchmarks/bench_aten_16bit.py [--calls 300]

Prints the CPU first; the times are in-process medians of --calls calls, one thread: re-run on a quiet machine.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

BF16 = "'c10::BFloat16'"
#: bfloat16 lines of ops IREE does not lower itself, as the model zoo captured them (benchmarks/bench_zoo.py)
ZOO_LINES = [
    # a Linear's bias gradient: a sum over the batch
    f"""aten::sum "[[32, 32], [], [], []]" "[{BF16}, 'ScalarList', 'Scalar', '']" "[[32, 1], [], [], []]" "['', '[0]', 'True', '']\"""",
    # the UNet's group norm
    f"""aten::group_norm "[[2, 16, 16, 16], [], [16], [16], [], []]" "[{BF16}, 'Scalar', {BF16}, {BF16}, 'Scalar', 'Scalar']" "[[4096, 256, 16, 1], [], [1], [1], [], []]" "['', '4', '', '', '1e-05', 'True']\"""",
    f"""aten::avg_pool2d "[[2, 16, 16, 16], [], [], [], [], [], []]" "[{BF16}, 'ScalarList', 'ScalarList', 'ScalarList', 'Scalar', 'Scalar', '']" "[[4096, 256, 16, 1], [], [], [], [], [], []]" "['', '[2, 2]', '[]', '[0, 0]', 'False', 'True', '']\"""",
    f"""aten::adaptive_avg_pool2d "[[2, 72, 8, 8], []]" "[{BF16}, 'ScalarList']" "[[4608, 64, 8, 1], []]" "['', '[1, 1]']\"""",
    # BERT's additive mask: a bfloat16 tensor times a 0-d double (a Python float)
    f"""aten::mul "[[2, 1, 1, 16], []]" "[{BF16}, 'double']" "[[16, 16, 16, 1], []]" "['', '']\"""",
    f"""aten::gelu "[[2, 16, 64], []]" "[{BF16}, '']" "[[1024, 64, 1], []]" "['', '']\"""",
    f"""aten::add "[[2, 16, 32], [2, 16, 32], []]" "[{BF16}, {BF16}, 'Scalar']" "[[512, 32, 1], [512, 32, 1], []]" "['', '', '1']\"""",
    f"""aten::silu_backward "[[2, 16, 64], [2, 16, 64]]" "[{BF16}, {BF16}]" "[[1024, 64, 1], [1024, 64, 1]]" "['', '']\"""",
    f"""aten::max_pool2d "[[2, 16, 16, 16], [], [], [], [], []]" "[{BF16}, 'ScalarList', 'ScalarList', 'ScalarList', 'ScalarList', 'Scalar']" "[[4096, 256, 16, 1], [], [], [], [], []]" "['', '[3, 3]', '[2, 2]', '[1, 1]', '[1, 1]', 'False']\"""",
]
#: 16-bit normalizations: IREE_NATIVE_OPS has them, IREE_NATIVE_OPS_16BIT not layer_norm (this measurement)
NATIVE_LINES = [
    f"""aten::layer_norm "[[64, 16, 256], [], [256], [256], [], []]" "[{BF16}, 'ScalarList', {BF16}, {BF16}, 'Scalar', 'Scalar']" "[[4096, 256, 1], [], [1], [1], [], []]" "['', '[256]', '', '', '1e-05', 'True']\"""",
    """aten::layer_norm "[[64, 16, 256], [], [256], [256], [], []]" "['c10::Half', 'ScalarList', 'c10::Half', 'c10::Half', 'Scalar', 'Scalar']" "[[4096, 256, 1], [], [1], [1], [], []]" "['', '[256]', '', '', '1e-05', 'True']\"""",
    f"""aten::softmax "[[2, 4, 16, 16], [], []]" "[{BF16}, 'Scalar', '']" "[[1024, 256, 16, 1], [], []]" "['', '-1', 'None']\"""",
]


def cpu_line() -> str:
    model = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return model


def median_us(kernel, args, calls: int) -> float:
    for _ in range(20):
        kernel(*args)
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        kernel(*args)
        times.append((time.perf_counter() - t) * 1e6)
    return statistics.median(times)


def measure(sig, variant, cache, calls: int) -> str:
    from boo_engine.errors import BooError
    from boo_engine.numerics import check_numerics
    from boo_engine.runtime.launchable import get_launchable

    try:
        info = check_numerics(sig, "cpu", variant, cache=cache)
        us = median_us(get_launchable(sig, "cpu", variant, cache=cache), sig.get_sample_args(0), calls)
    except BooError as e:
        return f"{'failed: ' + str(e)[:60]:>34}"
    out = info.stats["outputs"][0]
    err = f"err {out['std_err'] / out['torch_std_err']:5.2f}x" if out.get("torch_std_err") else "exact     "
    return f"{us:8.2f} us {info.verdict:4} {err}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=300)
    opts = ap.parse_args()

    import boo_engine.ops.aten as aten_mod
    from boo_engine.commands import parse_command
    from boo_engine.compile.cache import KernelCache
    from boo_engine.ops.aten import IN_DTYPE
    from boo_engine.variants import BASELINE, Variant

    print(f"CPU: {cpu_line()}; one thread; median of {opts.calls} calls; err = error std / torch's (BOO: <= 1.2x)")
    in_dtype = Variant(name="in_dtype", formulation=IN_DTYPE)
    with tempfile.TemporaryDirectory() as d:
        cache = KernelCache(Path(d) / "k")
        print(f"\n{'op (bfloat16)':32} {'float32 compute (default)':>34} {'in its dtype':>34}")
        for line in ZOO_LINES:
            sig = parse_command(line)
            print(f"{sig.op_name:32} {measure(sig, BASELINE, cache, opts.calls)} "
                  f"{measure(sig, in_dtype, cache, opts.calls)}", flush=True)
        print(f"\n{'op':32} {'IREE lowers it (as-is)':>34} {'torch decomposes, float32':>34}")
        native = aten_mod.IREE_NATIVE_OPS_16BIT
        for line in NATIVE_LINES:
            sig = parse_command(line)
            label = f"{sig.op_name} {sig.dtype_name}"
            aten_mod.IREE_NATIVE_OPS_16BIT = native | {sig.op_name}   # the property reads the module's global
            as_is = measure(sig, BASELINE, KernelCache(Path(d) / "as-is"), opts.calls)
            aten_mod.IREE_NATIVE_OPS_16BIT = native - {sig.op_name}
            decomposed = measure(sig, BASELINE, KernelCache(Path(d) / "decomposed"), opts.calls)
            aten_mod.IREE_NATIVE_OPS_16BIT = native
            print(f"{label:32} {as_is} {decomposed}", flush=True)


if __name__ == "__main__":
    main()
