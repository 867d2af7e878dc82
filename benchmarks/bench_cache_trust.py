"""What trusting the kernel cache costs a hit (compile/trust.py): every hit checks the entry's HMAC, the sha256 of
every file it lists and who can write its folders and files, on top of the vmfb's checksum it always had.

1. `lookup_cached` of every command of a commands file (default sample_commands.txt), all cached, each in a
   fresh KernelCache (what a run pays per cached kernel), repeated: the median per hit.
2. A fresh process's first hit (import of the launch path excluded): the key file read and the root's folders
   checked once, then the lookup.

    python3 benchmarks/bench_cache_trust.py [--commands-file F] [--repeats 20]

Runs against whatever boo_engine is first on sys.path (this checkout): run it on a tree without trust.py for the
figures before.
"""
from __future__ import annotations

import argparse
import json
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
from boo_engine.commands import parse_command
from boo_engine.compile.cache import KernelCache
from boo_engine.compile.pool import lookup_cached
sig = parse_command(sys.argv[2])
t0 = time.perf_counter()
art = lookup_cached(sig, "cpu", cache=KernelCache(sys.argv[1]))
t1 = time.perf_counter()
assert art is not None
print(json.dumps({"first_hit": t1 - t0}))
"""


def main() -> int:
    from boo_engine.commands import read_commands_file
    from boo_engine.compile.cache import KernelCache
    from boo_engine.compile.pool import CompilePool, lookup_cached

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--commands-file", default=str(ROOT / "sample_commands.txt"))
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--cache-dir", default=None, help="a cache to fill and reuse (default: a fresh temporary one)")
    a = ap.parse_args()
    root = Path(a.cache_dir or tempfile.mkdtemp(prefix="bench-trust-"))
    sigs = [c.signature for c in read_commands_file(a.commands_file)]
    with CompilePool(cache=KernelCache(root)) as pool:
        for f in [pool.submit(s, "cpu") for s in sigs]:
            f.result()
    sizes = [Path(lookup_cached(s, "cpu", cache=KernelCache(root)).dir) for s in sigs]
    files = sum(1 for d in sizes for p in d.rglob("*") if p.is_file())
    mb = sum(p.stat().st_size for d in sizes for p in d.rglob("*") if p.is_file()) / 2**20
    per_hit = []
    for _ in range(a.repeats):
        t0 = time.perf_counter()
        for s in sigs:
            assert lookup_cached(s, "cpu", cache=KernelCache(root)) is not None
        per_hit.append((time.perf_counter() - t0) / len(sigs))
    firsts = []
    for _ in range(5):
        p = subprocess.run([sys.executable, "-c", FRESH, str(root), a_command(a.commands_file)], capture_output=True,
                           text=True, check=True, cwd=ROOT)
        firsts.append(json.loads(p.stdout.strip().splitlines()[-1])["first_hit"])
    print(f"{len(sigs)} cached kernels ({files} files, {mb:.1f} MiB): a hit in a fresh KernelCache, median of "
          f"{a.repeats}: {statistics.median(per_hit) * 1e3:.2f} ms (min {min(per_hit) * 1e3:.2f}); a fresh "
          f"process's first hit, median of 5: {statistics.median(firsts) * 1e3:.1f} ms")
    return 0


def a_command(path: str) -> str:
    """The first command of the file."""
    return next(ln.strip() for ln in Path(path).read_text().splitlines() if ln.strip() and not ln.startswith("#"))


if __name__ == "__main__":
    sys.exit(main())
