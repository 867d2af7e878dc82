"""Which iree-compile flags make each class of CPU kernel fast? (the evidence behind cpu_defaults.machine.per_op_default_flags)

For every command (default: sample_commands.txt) this compiles the kernel with each candidate flag set, times
each one on ONE thread (local-sync; torch.set_num_threads(1) for eager torch), re-measures close winners
interleaved, and prints:
  1. candidates per command (median us), the measured winner and what per_op_default_flags picks;
  2. IREE with the chosen defaults vs torch eager, per command.

Run on a quiet machine (nothing else on the cores):
    python3 benchmarks/bench_cpu_flags.py [--commands-file F] [--min-time 0.3] [--cache-dir DIR] [--json out.json]
A candidate that fails to compile is shown as FAIL (bf16 + im2col does in IREE 3.13).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from boo_engine.commands import read_commands_file  # noqa: E402
from boo_engine.compile.cache import KernelCache  # noqa: E402
from boo_engine.compile.pool import CompilePool  # noqa: E402
from boo_engine.cpu_defaults.machine import per_op_default_flags  # noqa: E402
from boo_engine.cpu_defaults.rules import DATA_TILING, IM2COL  # noqa: E402
from boo_engine.errors import BooError  # noqa: E402
from boo_engine.runtime.launchable import Launchable, load_artifact  # noqa: E402
from boo_engine.targets import Target  # noqa: E402
from boo_engine.variants import Variant  # noqa: E402

OFF = [f"{IM2COL}=false", f"{DATA_TILING}=false"]
CANDIDATES: dict[str, list[str]] = {
    "default": OFF,
    "im2col": [f"{IM2COL}=true", f"{DATA_TILING}=false"],
    "datatile": [f"{IM2COL}=false", f"{DATA_TILING}=true"],
    "both": [f"{IM2COL}=true", f"{DATA_TILING}=true"],
}


#: more shape classes than the sample file has, so every per-op rule has evidence (dtype x layout x filter x mode)
EXTRA_COMMANDS = [
    "convbfp16 -n 2 -c 32 -H 28 -W 28 -k 32 -y 3 -x 3 -p 1 -q 1 -F 1",
    "convbfp16 -n 2 -c 32 -H 28 -W 28 -k 32 -y 3 -x 3 -p 1 -q 1 -F 1 --in_layout NHWC --out_layout NHWC --fil_layout NHWC",
    "convbfp16 -n 4 -c 35 -H 48 -W 32 -k 35 -y 1 -x 1 -F 1",
    "convfp16 -n 2 -c 32 -H 28 -W 28 -k 32 -y 3 -x 3 -p 1 -q 1 -F 1 --in_layout NHWC --out_layout NHWC --fil_layout NHWC",
    "convfp16 -n 4 -c 35 -H 48 -W 32 -k 35 -y 1 -x 1 -F 1",
    "convfp16 -n 4 -c 35 -H 48 -W 32 -k 35 -y 1 -x 1 -F 1 --in_layout NHWC --out_layout NHWC --fil_layout NHWC",
    "conv -n 2 -c 32 -H 28 -W 28 -k 32 -y 3 -x 3 -p 1 -q 1 -F 2 --in_layout NHWC --out_layout NHWC --fil_layout NHWC",
    "conv -n 2 -c 32 -H 28 -W 28 -k 32 -y 3 -x 3 -p 1 -q 1 -F 4 --in_layout NHWC --out_layout NHWC --fil_layout NHWC",
    "conv -n 4 -c 35 -H 48 -W 32 -k 35 -y 1 -x 1 -F 2",
    "conv -n 4 -c 35 -H 48 -W 32 -k 35 -y 1 -x 1 -F 4",
    "conv -n 2 -c 32 -H 28 -W 28 -k 32 -y 3 -x 3 -p 1 -q 1 -F 6",
    "convbfp16 -n 2 -c 32 -H 28 -W 28 -k 32 -y 3 -x 3 -p 1 -q 1 -F 2",
    "conv -n 2 -c 64 -H 28 -W 28 -k 64 -y 1 -x 1 -F 1",
    "conv -n 2 -c 64 -H 28 -W 28 -k 64 -y 1 -x 1 -F 1 --in_layout NHWC --out_layout NHWC --fil_layout NHWC",
    "gemm --a_w 256 --a_h 512 --b_w 512 --transA 1 -F 1",
    "layernormfp16 --input 16x128x768 --eps 1e-5 --mode 1 --normalized_dim 2 -F 1",
]


def chosen_candidate(flags: list[str]) -> str:
    on = (IM2COL in flags, DATA_TILING in flags)
    return {(False, False): "default", (True, False): "im2col", (False, True): "datatile", (True, True): "both"}[on]


def candidates_for(sig) -> list[str]:
    return list(CANDIDATES) if sig.op == "conv" else (["default", "datatile"] if sig.op == "gemm" else ["default"])


def op_class(sig) -> str:
    d = sig.describe()
    if sig.op != "conv":
        return f"{sig.op} {sig.dtype_name}"
    k = "1x1" if all(int(x) == 1 for x in d["filter_spatial"]) else "kxk"
    return f"conv {sig.mode} {d['in_layout']} {k} {sig.dtype_name}"


def time_us(fn: Callable[[], object], min_time: float) -> list[float]:
    """Per-call times (us) of blocks of k calls: warm-up discarded, k chosen so a block lasts >= 2 ms."""
    for _ in range(3):
        fn()
    k, t = 1, 0.0
    while True:
        t0 = time.perf_counter()
        for _ in range(k):
            fn()
        t = time.perf_counter() - t0
        if t >= 2e-3 or k >= 1 << 16:
            break
        k *= 2
    samples: list[float] = []
    end = time.perf_counter() + min_time
    while len(samples) < 7 or time.perf_counter() < end:
        t0 = time.perf_counter()
        for _ in range(k):
            fn()
        samples.append((time.perf_counter() - t0) / k * 1e6)
    return samples


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commands-file", default=str(ROOT / "sample_commands.txt"))
    ap.add_argument("--min-time", type=float, default=0.1, help="seconds of samples per measurement round")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds per candidate")
    ap.add_argument("--cache-dir", default=None, help="kernel cache (default: a temporary one)")
    ap.add_argument("--close", type=float, default=0.10, help="re-check winners closer than this fraction")
    ap.add_argument("--json", default=None, help="write every measurement here")
    ap.add_argument("--no-extra", action="store_true", help="only the commands file, not EXTRA_COMMANDS")
    ap.add_argument("--only", action="append", default=[], help="measure kernels whose name contains this")
    args = ap.parse_args()

    torch.set_num_threads(1)
    target = Target("cpu")
    cache = KernelCache(args.cache_dir or tempfile.mkdtemp(prefix="bench-flags-"))
    from boo_engine.commands import parse_command

    sigs = []
    found = [c.signature for c in read_commands_file(args.commands_file)]
    if not args.no_extra:
        found += [parse_command(t) for t in EXTRA_COMMANDS]
    for sig in found:
        if args.only and not any(o in sig.func_name for o in args.only):
            continue
        if sig.func_name not in {s.func_name for s in sigs}:
            sigs.append(sig)

    # compile everything first (in parallel), then measure with nothing else running
    jobs = {}
    t0 = time.perf_counter()
    with CompilePool(cache=cache) as pool:
        for sig in sigs:
            for cand in candidates_for(sig):
                jobs[(sig.func_name, cand)] = pool.submit(sig, target, Variant(name=cand, flags=tuple(CANDIDATES[cand])))
        arts = {}
        for k, fut in jobs.items():
            try:
                arts[k] = fut.result()
            except BooError as e:
                arts[k] = None
                print(f"# {k[0]} [{k[1]}] failed to compile: {str(e)[:160]}", file=sys.stderr)
    print(f"# compiled {len(jobs)} kernels in {time.perf_counter() - t0:.1f} s", file=sys.stderr)

    results = []
    for sig in sigs:
        inputs = sig.get_sample_args(0)
        prepared = {}
        for cand in candidates_for(sig):
            art = arts.get((sig.func_name, cand))
            if art is not None:
                prepared[cand] = Launchable(sig, load_artifact(art.vmfb_path, "local-sync"), art).prepare(*inputs)
        # interleaved rounds (A B C A B C ...): a burst of load from other processes hits every candidate alike;
        # the per-candidate figure is the MIN over rounds of each round's median (the least disturbed round)
        rounds: dict[str, list[float]] = {c: [] for c in prepared}
        for _ in range(args.rounds):
            for c, p in prepared.items():
                rounds[c].append(statistics.median(time_us(p.invoke, args.min_time)))
        med = {c: min(v) for c, v in rounds.items()}
        ranked = sorted(med, key=med.get)
        if len(ranked) > 1 and med[ranked[1]] <= med[ranked[0]] * (1 + args.close):
            for _ in range(args.rounds):  # close call: more interleaved rounds of the two leaders
                for c in ranked[:2]:
                    rounds[c].append(statistics.median(time_us(prepared[c].invoke, args.min_time)))
            med.update({c: min(rounds[c]) for c in ranked[:2]})
            ranked = sorted(med, key=med.get)
        with torch.no_grad():
            ref = min(statistics.median(time_us(lambda: sig.reference(*inputs), args.min_time))
                      for _ in range(args.rounds))
        chosen_flags = per_op_default_flags(sig, target)
        # what per_op_default_flags picks IS one of the candidates (flags are on/off switches; the vmfb bytes
        # differ per cache entry because IREE records the dump path, so they cannot be matched by checksum)
        med["chosen"] = med.get(chosen_candidate(chosen_flags), float("nan"))
        results.append({"func_name": sig.func_name, "class": op_class(sig), "us": med, "torch_us": ref,
                        "winner": ranked[0] if ranked else None, "chosen_flags": chosen_flags})
        print(f"# measured {sig.func_name}", file=sys.stderr)

    cols = list(CANDIDATES)
    print("\n## Candidates (us per call: min over interleaved rounds of the round median; 1 thread, local-sync; FAIL = did not compile)\n")
    print("| class | kernel | " + " | ".join(cols) + " | winner | chosen flags |")
    print("|---|---|" + "---|" * len(cols) + "---|---|")
    for r in results:
        cells = [f"{r['us'][c]:.0f}" if c in r["us"] else ("FAIL" if (r["func_name"], c) in arts else "-")
                 for c in cols]
        print(f"| {r['class']} | {r['func_name']} | " + " | ".join(cells)
              + f" | {r['winner']} | {' '.join(f.replace('--iree-', '') for f in r['chosen_flags']) or '-'} |")
    print("\n## IREE (chosen defaults) vs torch eager, 1 thread (median us)\n")
    print("| kernel | IREE | torch | IREE/torch | IREE default flags | speedup from defaults |")
    print("|---|---|---|---|---|---|")
    for r in results:
        ch, de = r["us"].get("chosen"), r["us"].get("default")
        if ch is None or ch != ch:
            print(f"| {r['func_name']} | FAIL | {r['torch_us']:.0f} | - | - | - |")
            continue
        print(f"| {r['func_name']} | {ch:.0f} | {r['torch_us']:.0f} | {ch / r['torch_us']:.2f} | "
              f"{de:.0f} | {de / ch:.2f}x |" if de else f"| {r['func_name']} | {ch:.0f} | {r['torch_us']:.0f} | "
              f"{ch / r['torch_us']:.2f} | - | - |")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
