"""Compile throughput and cache-hit latency.

1. Cold compile of every command in a commands file (default sample_commands.txt), each mode with a fresh empty
   cache: one at a time in this process (compile_signature in a loop), CompilePool(workers=1), and
   CompilePool(workers=N) (default: one per core). Goal: the pool >= 1.8x faster than one at a time on 2 cores.
2. get_launchable() of a cached kernel in a FRESH process (what every benchmark worker and CLI run pays):
   time to import torch, import boo_engine's launch path, get_launchable (index lookup + vmfb load), first call.
   Goal: get_launchable <= 50 ms, not counting `import torch`.

    python3 benchmarks/bench_compile.py [--commands-file F] [--workers N] [--repeats 5]
Run on a quiet machine: compile wall times scale directly with whatever else is using the cores.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FRESH = r"""
import json, sys, time
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
from boo_engine.commands import parse_command
from boo_engine.compile.cache import KernelCache
from boo_engine.runtime.launchable import get_launchable
t2 = time.perf_counter()
sig = parse_command(sys.argv[2])
t3 = time.perf_counter()
k = get_launchable(sig, "cpu", cache=KernelCache(sys.argv[1]))
t4 = time.perf_counter()
args = sig.get_sample_args(0)
t5 = time.perf_counter()
k(*args)
t6 = time.perf_counter()
assert k.artifact.cache_hit
print(json.dumps({"import_torch": t1 - t0, "import_boo": t2 - t1, "parse": t3 - t2, "get_launchable": t4 - t3,
                  "first_call": t6 - t5}))
"""


def _bump(text: str, i: int) -> str:
    """The same command with its batch size (first dimension) increased by i: a distinct kernel."""
    import re

    for pat in (r"(-n |--batchsize )(\d+)", r"(--a_w |-k )(\d+)", r"(--input |-X )(\d+)"):
        m = re.search(pat, text)
        if m:
            return text[:m.start(2)] + str(int(m.group(2)) + i) + text[m.end(2):]
    return text


def cold_compile(sigs, mode: str, workers: int, prestart: bool = False, warm: bool = False) -> float:
    """Wall seconds to compile `sigs` into an empty cache. `warm`: the compiler side is started and has done one
    export + compile already (per worker) before the clock starts: the steady state of a long session."""
    from boo_engine.commands import parse_command
    from boo_engine.compile.cache import KernelCache
    from boo_engine.compile.pool import CompilePool, compile_signature

    warmups = [parse_command(f"gemm -k {8 + i} -m 8 -n 8") for i in range(max(1, workers))]
    root = tempfile.mkdtemp(prefix=f"bench-compile-{mode}-")
    try:
        cache = KernelCache(root)
        if mode == "sequential":
            if warm:
                compile_signature(warmups[0], "cpu", cache=cache)
            t0 = time.perf_counter()
            for s in sigs:
                compile_signature(s, "cpu", cache=cache)
            return time.perf_counter() - t0
        with CompilePool(workers=workers, cache=cache, prestart=prestart or warm) as pool:
            if warm:
                for f in [pool.submit(w, "cpu") for w in warmups]:
                    f.result()
            t0 = time.perf_counter()
            for f in [pool.submit(s, "cpu") for s in sigs]:
                f.result()
            return time.perf_counter() - t0
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commands-file", default=str(ROOT / "sample_commands.txt"))
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--repeats", type=int, default=5, help="fresh processes for the cache-hit measurement")
    ap.add_argument("--skip-cold", action="store_true")
    ap.add_argument("--copies", type=int, default=1,
                    help="compile K distinct kernels per command (batch size +0..K-1): worker start-up (~2-3 s of "
                         "imports and first export) is paid once per pool, so larger sets show the steady state")
    args = ap.parse_args()

    from boo_engine.commands import read_commands_file

    cmds = read_commands_file(args.commands_file)
    sigs = list({c.signature.func_name: c.signature for c in cmds}.values())
    if args.copies > 1:
        from boo_engine.commands import parse_command

        more = [parse_command(_bump(c.text, i)) for c in cmds for i in range(1, args.copies)]
        sigs = list({s.func_name: s for s in sigs + more}.values())
    print(f"# {len(sigs)} distinct kernels from {args.commands_file}; {os.cpu_count()} cores")

    if not args.skip_cold:
        print("\n## Cold compile (empty cache; export + iree-compile; wall seconds)\n")
        print("| mode | seconds | speedup vs one at a time |")
        print("|---|---|---|")
        seq = cold_compile(sigs, "sequential", 1)
        print(f"| one at a time (in-process) | {seq:.1f} | 1.00x |")
        one = cold_compile(sigs, "pool", 1)
        print(f"| CompilePool(workers=1) | {one:.1f} | {seq / one:.2f}x |")
        many = cold_compile(sigs, "pool", args.workers)
        print(f"| CompilePool(workers={args.workers}) | {many:.1f} | {seq / many:.2f}x |")
        pre = cold_compile(sigs, "pool", args.workers, prestart=True)
        print(f"| CompilePool(workers={args.workers}, prestart=True) | {pre:.1f} | {seq / pre:.2f}x |")
        wseq = cold_compile(sigs, "sequential", 1, warm=True)
        wmany = cold_compile(sigs, "pool", args.workers, warm=True)
        print(f"| one at a time, warm | {wseq:.1f} | - |")
        print(f"| CompilePool(workers={args.workers}), warm | {wmany:.1f} | {wseq / wmany:.2f}x vs warm one at a time |")
        print("\n(the first rows include their own start-up: pool creation, worker spawn, imports, first export;"
              " 'warm' rows start the clock after one export + compile per worker: a long session's steady state)")

    print("\n## Cache hit in a fresh process (ms; median of "
          f"{args.repeats} processes)\n")
    root = tempfile.mkdtemp(prefix="bench-hit-")
    try:
        from boo_engine.compile.cache import KernelCache
        from boo_engine.compile.pool import compile_signature

        text = next(c.text for c in cmds) if hasattr(cmds[0], "text") else None
        text = text or "conv -n 2 -c 64 -H 28 -W 28 -k 64 -y 3 -x 3 -p 1 -q 1"
        from boo_engine.commands import parse_command

        compile_signature(parse_command(text), "cpu", cache=KernelCache(root))
        runs = []
        for _ in range(args.repeats):
            out = subprocess.run([sys.executable, "-c", FRESH, root, text], capture_output=True, text=True,
                                 cwd=ROOT, check=True)
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print("| step | ms |")
        print("|---|---|")
        for key in runs[0]:
            print(f"| {key} | {statistics.median(r[key] for r in runs) * 1e3:.1f} |")
        print(f"\nkernel: {text}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
