#!/usr/bin/env python3
"""The CUDA path on a real GPU: timing fidelity, dispatch time vs wall time, cold vs warm L2, IREE vs torch.

For each GPU-sized kernel: compile for the detected GPU's target (an H100 gets sm_80 PTX, JIT-compiled by the
driver: IREE 3.13 cannot target sm_90), then ROUNDS times, interleaved:
  - our harness (BenchWorker, iree backend, warm caches): median wall time per call, and the dispatches' device
    time from the profiler (what iree-boo-driver reports);
  - the reproducer command (`iree-benchmark-module --device=cuda`, same artifact, same inputs): its real time;
then once each: our harness with --cache-mode cold (L2 overwritten before every call), and eager torch on the GPU
(warm). Prints one table (goal: our median / iree-benchmark-module within +-5%) and writes --json.

    python3 benchmarks/bench_gpu_path.py [--rounds 3] [--min-time 0.5] [--json out.json]
Exit status 1 when a kernel is outside the tolerance; 2 without a CUDA GPU.
"""
from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import time

from boo_engine import parse_command
from boo_engine.bench.reproducer import write_reproducer
from boo_engine.bench.worker import BenchSpec, BenchWorker
from boo_engine.compile.pool import compile_signature
from boo_engine.iree_tools import find_runtime_tool
from boo_engine.targets import default_target

KERNELS = [
    "gemm --a_w 1024 --a_h 1024 --b_w 1024",
    "gemmfp16 --a_w 4096 --a_h 4096 --b_w 4096",
    "gemmbfp16 --a_w 2048 --a_h 2048 --b_w 2048",
    "conv -n 16 -c 64 -H 56 -W 56 -k 64 -y 3 -x 3 -p 1 -q 1",
    "convbfp16 -n 16 -c 256 -H 28 -W 28 -k 256 -y 1 -x 1 --in_layout NHWC --out_layout NHWC --fil_layout NHWC",
    "convfp16 -n 32 -c 128 -H 28 -W 28 -k 128 -y 3 -x 3 -p 1 -q 1 --in_layout NHWC --out_layout NHWC "
    "--fil_layout NHWC",
    "conv -n 16 -c 64 -H 56 -W 56 -k 64 -y 3 -x 3 -p 1 -q 1 -F 4",
    "layernorm --input 16x128x768 --eps 1e-5 --mode 1 --normalized_dim 2 -F 1",
    "layernormbfp16 --input 64x512x1024 --eps 1e-5 --mode 0 --normalized_dim 2 -F 1",
]


def ibm_real_us(cmd: str, min_time_s: float, reps: int) -> float:
    args = shlex.split(cmd.split("  #")[0])
    # the runtime wheel's own binary: installed with `pip --target` (the GPU check) its scripts are not on PATH
    args[0] = find_runtime_tool(args[0]) or args[0]
    args += [f"--benchmark_min_time={min_time_s:g}s",
                                               f"--benchmark_repetitions={reps}", "--benchmark_format=json"]
    out = subprocess.run(args, capture_output=True, text=True, check=True, timeout=600).stdout
    report = json.loads(out[out.index("{"):])
    for b in report["benchmarks"]:
        if b.get("aggregate_name") == "median":
            return b["real_time"] * {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[b["time_unit"]]
    raise RuntimeError("no median in iree-benchmark-module output")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--min-time", type=float, default=0.5)
    ap.add_argument("--tolerance", type=float, default=0.05)
    ap.add_argument("--only", help="substring: run only matching commands")
    ap.add_argument("--json", help="write the figures here")
    opts = ap.parse_args()
    target = default_target()
    if target.kind != "cuda":
        print("no CUDA GPU detected", file=sys.stderr)
        return 2
    if target.notice:
        print(f"note: {target.notice}")
    rows = []
    with BenchWorker() as worker:
        def run(sig, backend, vmfb=None, mode="warm"):
            return worker.run(BenchSpec("gpu", backend, sig, target_name=target.name, vmfb_path=vmfb, driver="cuda",
                                        iters=20, min_time_s=opts.min_time, max_time_s=60, cache_mode=mode,
                                        device_timing=True))

        for text in KERNELS:
            if opts.only and opts.only not in text:
                continue
            sig = parse_command(text)
            t0 = time.monotonic()
            art = compile_signature(sig, target)
            compile_s = time.monotonic() - t0
            vmfb = str(art.vmfb_path)
            cmd = write_reproducer(art.dir, sig, 0, "cuda", 1, vmfb_path=art.vmfb_path)
            ours, dev, theirs = [], [], []
            for _ in range(opts.rounds):
                out = run(sig, "iree", vmfb)
                ours.append(statistics.median(out.samples_us))
                dev.append(out.device_us or float("nan"))
                theirs.append(ibm_real_us(cmd, opts.min_time / 3, 3))
            cold = run(sig, "iree", vmfb, "cold")
            torch_out = run(sig, "torch")
            o, t = statistics.median(ours), statistics.median(theirs)
            state = (out.device_detail or {}).get("gpu_state") or {}
            row = {"command": text, "func_name": sig.func_name, "compile_s": compile_s,
                   "ours_us": o, "iree_benchmark_module_us": t, "ratio": o / t, "dispatch_us": statistics.median(dev),
                   "cold_us": statistics.median(cold.samples_us), "cold_dispatch_us": cold.device_us,
                   "torch_us": statistics.median(torch_out.samples_us), "torch_dispatch_us": torch_out.device_us,
                   "flops": sig.flops, "bytes": sig.bytes, "ours_rounds": ours, "theirs_rounds": theirs,
                   "dispatch": (out.device_detail or {}).get("dispatch"), "gpu_state": state,
                   "dispatch_source": ((out.device_detail or {}).get("dispatch") or {}).get("source", "cupti"),
                   "iree_profile_error": ((out.device_detail or {}).get("dispatch") or {}).get("iree_profile_error"),
                   "throttled": out.throttled or cold.throttled, "reproducer": cmd}
            rows.append(row)
            ok = abs(row["ratio"] - 1) <= opts.tolerance
            tf = (sig.flops / (o * 1e-6) / 1e12) if sig.flops else 0.0
            print(f"{'ok ' if ok else 'OFF'} wall {o:9.1f} / ibm {t:9.1f} = {o / t:5.3f} | dispatch "
                  f"{row['dispatch_us']:9.1f} ({row['dispatch_source']}) | cold {row['cold_us']:9.1f} (disp {cold.device_us or 0:8.1f}) | "
                  f"torch {row['torch_us']:8.1f} (disp {torch_out.device_us or 0:8.1f}) | {tf:6.1f} TFLOP/s | "
                  f"sm {state.get('sm_mhz_min')}-{state.get('sm_mhz_max')} MHz {state.get('temp_c_max')} C "
                  f"thr={row['throttled']} | {text}", flush=True)
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump({"when": time.strftime("%Y-%m-%dT%H:%M:%S"), "target": target.name,
                       "runs_on": target.runs_on, "rows": rows}, f, indent=1, default=str)
    bad = [r for r in rows if abs(r["ratio"] - 1) > opts.tolerance]
    print(f"{len(rows) - len(bad)}/{len(rows)} within +-{opts.tolerance:.0%} of iree-benchmark-module --device=cuda")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
