"""Baseline vs each tuning spec, for every command a spec actually applies to (ground truth: iree-benchmark-module).

For each command (default: sample_commands.txt) and each spec (default: tuning_specs/cpu_*.mlir), compile the
baseline and the spec variant exactly as boo-tui does (compile_signature: target flags + per-op-class defaults +
the spec), decide with spec_applied() whether the spec changed the kernel, and for those that did time both
with `iree-benchmark-module --device=local-sync --device_allocator=caching` (one thread, the most stable driver;
the allocator boo-tui's worker times with), INTERLEAVED: each round
runs the baseline then every spec, so a machine getting busier affects all of them alike. Reported: the median
over every repetition of every round, the spread (IQR as % of the median), and spec/baseline.

    python3 benchmarks/bench_tuning_specs.py [--commands-file F | --command "gemm ..."]... [--spec S.mlir]...
        [--rounds 3] [--repetitions 10] [--min-time 0.05] [--cache-dir DIR] [--json out.json]

Run it on a quiet machine: with other work on the cores the absolute numbers move (the ratios much less).
Expected on a 2-core Zen 5 (IREE 3.13.0, 1 thread): gemm 256x512x512 fp32 0.92 ms; fast spec 0.56 ms (0.61x);
slow spec 5.3 ms (5.7x); conv n2 c64 28x28 3x3 NCHW (im2col) 1.15 ms; its fast spec 0.82 ms (0.71x);
cpu_matches_nothing.mlir: "spec not applied" for every command, nothing timed.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from boo_engine.commands import parse_command, read_commands_file  # noqa: E402
from boo_engine.compile.cache import KernelCache  # noqa: E402
from boo_engine.compile.pool import compile_signature  # noqa: E402
from boo_engine.errors import BooError  # noqa: E402
from boo_engine.variants import BASELINE, Variant, preflight_spec, spec_applied  # noqa: E402

NPY_DTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commands-file", default=str(ROOT / "sample_commands.txt"))
    ap.add_argument("--command", action="append", default=[], help="a command (repeatable; replaces the file)")
    ap.add_argument("--spec", action="append", default=[], help="a spec (repeatable; default tuning_specs/cpu_*)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repetitions", type=int, default=10)
    ap.add_argument("--min-time", type=float, default=0.05, help="seconds per repetition")
    ap.add_argument("--cache-dir", default=None, help="kernel cache (default: a fresh temporary one)")
    ap.add_argument("--json", default=None, help="write every sample and summary here")
    a = ap.parse_args()

    specs = [str(Path(s).resolve()) for s in a.spec] or sorted(str(p) for p in (ROOT / "tuning_specs").glob("cpu_*.mlir"))
    for s in specs:
        preflight_spec(s)
    sigs = [parse_command(c) for c in a.command] or [c.signature for c in read_commands_file(a.commands_file)]
    tmp = tempfile.TemporaryDirectory(prefix="bench-specs-")
    cache = KernelCache(a.cache_dir or Path(tmp.name) / "cache")
    print(f"{len(sigs)} commands x {len(specs)} specs; iree-compile {cache.compiler_version.splitlines()[0]}")

    report = []
    for sig in sigs:
        try:
            base = compile_signature(sig, "cpu", BASELINE, cache=cache)
        except BooError as e:
            print(f"{sig.func_name}: baseline does not compile, skipped: {e}")
            continue
        arms: list[tuple[str, str]] = [("baseline", base.vmfb_path)]
        for s in specs:
            v = Variant(name=Path(s).stem, tuning_specs=(s,))
            try:
                art = compile_signature(sig, "cpu", v, cache=cache)
            except BooError as e:
                print(f"{sig.func_name} + {v.name}: compile failed: {e}")
                continue
            check = spec_applied(art.configs_dir, base.configs_dir, v.tuning_specs)
            if not check.applied:
                continue
            arms.append((v.name, art.vmfb_path))
        if len(arms) == 1:
            continue
        inputs = _inputs(sig, Path(tmp.name))
        samples: dict[str, list[float]] = {name: [] for name, _ in arms}
        for _ in range(a.rounds):
            for name, vmfb in arms:
                samples[name] += _bench(vmfb, inputs, a.repetitions, a.min_time)
        base_med = statistics.median(samples["baseline"])
        print(f"\n{sig.func_name}")
        for name, _ in arms:
            med = statistics.median(samples[name])
            q = statistics.quantiles(samples[name], n=4)
            print(f"  {name:45s} median {med * 1e3:9.3f} ms   IQR {100 * (q[2] - q[0]) / med:5.1f}%   "
                  f"x{med / base_med:5.2f} vs baseline   (n={len(samples[name])})")
            report.append({"func_name": sig.func_name, "arm": name, "median_s": med, "ratio": med / base_med,
                           "samples_s": samples[name]})
    if a.json:
        Path(a.json).write_text(json.dumps(report, indent=1))
    return 0


def _inputs(sig, where: Path) -> list[str]:
    """--input values: .npy files of the session's seed-0 sample args (raw splat for bf16, which npy lacks)."""
    import numpy as np
    import torch

    out = []
    for i, t in enumerate(sig.get_sample_args(0)):
        if t.dtype == torch.bfloat16:
            out.append("x".join(map(str, t.shape)) + "xbf16=0.5")
            continue
        f = where / f"{sig.func_name}_{i}.npy"
        np.save(f, t.numpy())
        out.append(f"@{f}")
    return out


def _bench(vmfb: str, inputs: list[str], reps: int, min_time: float) -> list[float]:
    """Seconds per call of every repetition (not the aggregates) from one iree-benchmark-module run."""
    # the allocator the tool's worker times with (IreeCall): a result buffer reused, not calloc'd, per call
    cmd = ["iree-benchmark-module", f"--module={vmfb}", "--device=local-sync", "--device_allocator=caching",
           "--function=main",
           *[f"--input={x}" for x in inputs], f"--benchmark_repetitions={reps}",
           f"--benchmark_min_time={min_time}s", "--benchmark_format=json"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    unit = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
    return [b["real_time"] * unit[b["time_unit"]] for b in json.loads(out)["benchmarks"]
            if b.get("run_type") == "iteration"]


if __name__ == "__main__":
    sys.exit(main())
