"""Fast by default: BOO's kernel (`boo`) vs the best known one for this machine (`best`) vs eager torch, out of the
box, on a commands file (default: sample_commands.txt) and, with --models, end to end on the small nets.

    python3 benchmarks/bench_defaults.py [FILE ...] [--iter 60] [--rounds 5] [--models] [--db PATH]

Kernels: one boo-tui run (BOO's build as the baseline, `best` beside it, eager torch; interleaved rounds, numerics
checked), then per kernel best/boo (the engine's ratio and verdict), best/torch and boo/torch (medians), what chose
best's configuration, and the geomeans: best/torch over the float32 kernels and over the whole file, boo/torch,
best/boo; the worst kernels. The goals (issue 27): best/torch <= 1.0 over the f32 kernels and <= 0.8 over the
file, no kernel where best is significantly slower than boo.

--models: `boo-tui model` of each small net (tests/models/small_nets.py), forward + backward: eager vs iree_boo
with the best known kernels vs iree_boo with BOO's (two runs of the model CLI, --kernels best / boo, each with its
own eager column). Goal: iree_boo (best) at or below eager on the conv net.

Prints the CPU (as the compiler resolves it) and the load average before and after: figures from another CPU, or
from a loaded machine's absolute times, are not comparable. Use BOO_DEFAULTS_TABLE=off to measure the rules
alone (what a machine with no `tune --defaults` table gets).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
NETS = ROOT / "tests" / "models" / "small_nets.py"
MODELS = {"small_cnn": ["8x3x32x32"], "transformer_block": ["4x64x64"]}


def geomean(xs: list[float]) -> float:
    xs = [x for x in xs if x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else math.nan


def kernels(files: list[str], iters: int, rounds: int, db: str) -> int:
    from boo_engine.commands import parse_command
    from boo_engine.comparisons import compare_results
    from boo_engine.config import SessionConfig
    from boo_engine.results import DONE, IREE, TORCH
    from boo_engine.session import Session
    from boo_engine.targets import BOO_BUILD
    from boo_engine.variants import BASELINE, BEST

    cfg = SessionConfig(target="cpu", build=BOO_BUILD, variants=[BASELINE, BEST], iters=iters, rounds=rounds,
                        db_path=db)
    t0 = time.perf_counter()
    with Session(cfg) as s:
        s.add_inputs(files)
        s.start()
        s.wait()
        results = list(s.jobs.values())
    wall = time.perf_counter() - t0
    cmps = compare_results(results)
    by: dict[str, dict[str, object]] = {}
    for r in results:
        by.setdefault(r.command, {})[r.variant if r.backend == IREE else TORCH] = r
    rows = []
    for cmd, cols in by.items():
        boo, best, torch = cols.get("baseline"), cols.get("best"), cols.get(TORCH)
        if not all(x is not None and x.status == DONE and x.stats for x in (boo, best, torch)):   # type: ignore[union-attr]
            print(f"  not measured: {cmd} ({[getattr(x, 'error', None) for x in (boo, best, torch)]})")
            continue
        c = cmps.get((best.target, cmd, "best"))   # type: ignore[union-attr]
        m = {k: v.stats.median_us for k, v in (("boo", boo), ("best", best), ("torch", torch))}   # type: ignore
        rows.append({"command": cmd, "dtype": parse_command(cmd).dtype_name, **m, "best/boo": c.ratio if c else m["best"] / m["boo"], "verdict": str(c.verdict) if c else "-",
                     "best/torch": m["best"] / m["torch"], "boo/torch": m["boo"] / m["torch"],
                     "chosen_by": best.compile.chosen_by if best.compile else None,   # type: ignore[union-attr]
                     "best_build": best.compile.build if best.compile else None,   # type: ignore[union-attr]
                     "boo_build": boo.compile.build if boo.compile else None,   # type: ignore[union-attr]
                     "numerics": [x.numerics.verdict if x.numerics else None for x in (boo, best)]})  # type: ignore
    print(f"\n{len(results)} jobs in {wall:.0f} s\n")
    print("| kernel | boo (us) | best (us) | torch (us) | best/boo | best/torch | boo/torch | best: chosen by, build |")
    print("|---|---:|---:|---:|---|---:|---:|---|")
    for r in rows:
        print(f"| `{r['command'][:60]}` | {r['boo']:,.1f} | {r['best']:,.1f} | {r['torch']:,.1f} | "
              f"{r['best/boo']:.3f}x {r['verdict']} | {r['best/torch']:.3f} | {r['boo/torch']:.3f} | "
              f"{r['chosen_by']}, {r['best_build']} |")
    f32 = [r for r in rows if r["dtype"] == "float32"]
    g = {k: (geomean([r[k] for r in rows]), geomean([r[k] for r in f32])) for k in ("best/torch", "boo/torch",
                                                                                   "best/boo")}
    print(f"\ngeomean over {len(rows)} kernels (f32: {len(f32)}): " + "; ".join(
        f"{k} {a:.3f} (f32 {b:.3f})" for k, (a, b) in g.items()))
    worst = sorted(rows, key=lambda r: -r["best/torch"])[:4]
    print("worst best/torch: " + "; ".join(f"{r['command'][:48]} {r['best/torch']:.2f}" for r in worst))
    slower = [r for r in rows if r["verdict"] == "slower"]
    bad = [r for r in rows if "fail" in r["numerics"]]
    goals = [("best/torch geomean <= 1.0 over the f32 kernels", g["best/torch"][1] <= 1.0),
             ("best/torch geomean <= 0.8 over the file", g["best/torch"][0] <= 0.8),
             ("no kernel where best is slower than boo", not slower)]
    for what, ok in goals:
        print(f"goal: {what}: {'met' if ok else 'MISSED'}")
    if slower:
        print("  best slower than boo: " + "; ".join(f"{r['command'][:48]} {r['best/boo']:.3f}x" for r in slower))
    if bad:
        print("  numerics failed: " + "; ".join(f"{r['command'][:48]} {r['numerics']}" for r in bad))
    return 0 if all(ok for _, ok in goals) else 1


def models(iters: int, rounds: int, work: Path) -> None:
    for name, inputs in MODELS.items():
        for which in ("best", "boo"):
            out = work / f"{name}-{which}.json"
            args = [sys.executable, "-m", "boo_tui", "model", f"{NETS}:{name}", *(a for i in inputs
                    for a in ("--input", i)), "--backward", "--kernels", which, "--iter", str(iters),
                    "--rounds", str(rounds), "--db", str(work / "models.db"), "--export", str(out)]
            p = subprocess.run(args, capture_output=True, text=True)
            if p.returncode not in (0, 1) or not out.exists():
                print(f"{name} --kernels {which}: exit {p.returncode}: {p.stderr[-600:]}")
                continue
            doc = json.loads(out.read_text())
            cols = {(r["variant"], r["backend"]): r for r in doc["results"]}
            eager, ours = cols.get(("baseline", "torch")), cols.get(("baseline", "iree"))
            if not (eager and ours and eager.get("stats") and ours.get("stats")):
                print(f"{name} --kernels {which}: not measured ({(ours or {}).get('error')})")
                continue
            e, o = eager["stats"]["median_us"], ours["stats"]["median_us"]
            cmp = next((c for c in doc["comparisons"] if c["variant"] == "torch"), None)
            print(f"{name} forward+backward, iree_boo --kernels {which}: {o:,.0f} us, eager {e:,.0f} us, "
                  f"iree_boo/eager {o / e:.3f}"
                  + (f" (engine: eager/iree_boo {cmp['ratio']:.3f} {cmp['verdict']})" if cmp else "")
                  + f", numerics {ours.get('numerics', {}).get('verdict')}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", default=[str(ROOT / "sample_commands.txt")])
    ap.add_argument("--iter", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--models", action="store_true", help="also the small nets end to end (boo-tui model)")
    ap.add_argument("--no-kernels", action="store_true", help="only the models")
    ap.add_argument("--db", default=None, help="results database (default: a temporary one)")
    args = ap.parse_args()
    from boo_engine.cpu_defaults.machine import host_cpu

    print(f"CPU: {host_cpu().label()}, {os.cpu_count()} logical cores; load average {os.getloadavg()}")
    print(f"defaults table: {os.environ.get('BOO_DEFAULTS_TABLE') or 'this machine`s, if any'}")
    rc = 0
    with tempfile.TemporaryDirectory(prefix="bench-defaults-") as tmp:
        if not args.no_kernels:
            rc = kernels(args.files, args.iter, args.rounds, args.db or str(Path(tmp) / "r.db"))
        if args.models:
            models(args.iter, args.rounds, Path(tmp))
    print(f"load average after: {os.getloadavg()}")
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
