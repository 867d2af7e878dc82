"""Models end to end on this CPU: eager vs iree_boo vs iree_boo + what `boo-tui tune` finds for the model's kernels.

For each model of tests/models/small_nets.py (a small CNN, a transformer block):
  1. `boo-tui capture` its kernels (one pass; --backward with --train) into a commands file,
  2. `boo-tui tune` them (a small --budget: this is a benchmark, not a production tune) into tuned/tuned.toml,
  3. `boo-tui model` with `--variants-file tuned/tuned.toml`: eager, iree_boo, iree_boo + tuned, interleaved,
     with numerics and the breakdown; the Markdown is printed and the JSON kept in the work folder.

    python3 benchmarks/bench_models.py [--budget 6] [--train] [--skip-tune] [--work DIR]

Prints the CPU (model and flags) first: figures from another machine are not comparable.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NETS = ROOT / "tests" / "models" / "small_nets.py"
MODELS = {
    "small_cnn": ["8x3x32x32"],
    "transformer_block": ["4x64x64"],
}


def cpu_line() -> str:
    model, flags = "?", []
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and model == "?":
                model = line.split(":", 1)[1].strip()
            if line.startswith("flags") and not flags:
                flags = [f for f in line.split(":", 1)[1].split() if f.startswith(("avx", "fma"))]
    except OSError:
        pass
    return f"{model} ({' '.join(sorted(flags)) or 'no AVX'})"


def boo(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "boo_tui", *args], cwd=cwd, capture_output=True, text=True)
    print(f"  $ boo-tui {' '.join(args[:2])} ... -> exit {p.returncode} in {time.perf_counter() - t0:.0f} s",
          file=sys.stderr)
    if p.returncode not in (0, 1):
        print(p.stderr[-3000:], file=sys.stderr)
    return p


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=int, default=6, help="tune candidates per kernel (default 6)")
    ap.add_argument("--train", action="store_true", help="forward + backward (default: forward only)")
    ap.add_argument("--skip-tune", action="store_true", help="eager vs iree_boo only")
    ap.add_argument("--work", default=None, help="work folder (default: a temporary one)")
    ap.add_argument("--iter", type=int, default=60)
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="bench-models-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"CPU: {cpu_line()}\nwork folder: {work}\n")
    bwd = ["--backward"] if args.train else []
    for name, inputs in MODELS.items():
        spec = f"{NETS}:{name}"
        ins = [a for s in inputs for a in ("--input", s)]
        print(f"## {name} ({', '.join(inputs)}{', forward + backward' if args.train else ', forward'})\n")
        variants: list[str] = []
        if not args.skip_tune:
            cmds = work / f"{name}.txt"
            boo(["capture", spec, *ins, *bwd, "--threads", "1", "-o", str(cmds)], work)
            out = work / f"tuned-{name}"
            boo(["tune", str(cmds), "--out", str(out), "--budget", str(args.budget), "--db", str(work / "t.db")],
                work)
            if (out / "tuned.toml").exists():
                variants = ["--variants-file", str(out / "tuned.toml")]
                print(f"tuned: {out / 'tuned.toml'}\n")
            else:
                print("tune wrote no tuned.toml (nothing proven faster)\n")
        js = work / f"{name}.json"
        p = boo(["model", spec, *ins, *bwd, *variants, "--iter", str(args.iter), "--min-time", "2", "--db",
                 str(work / "m.db"), "--export", str(js)], work)
        print(p.stdout)
        if js.exists():
            doc = json.loads(js.read_text())
            for r in doc["results"]:
                st = r.get("stats") or {}
                print(f"  {r['variant']:>10} {r['backend']:>5}: median {st.get('median_us', float('nan')):9.1f} us"
                      f"  compile {((r.get('compile') or {}).get('seconds') or 0):5.1f} s"
                      f"  numerics {(r.get('numerics') or {}).get('verdict', '-')}")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
