"""How much `boo-tui tune` finds, how long it takes, and whether its winners hold.

    python3 benchmarks/bench_tune.py [COMMANDS_FILE] [--budget 32] [--out DIR] [--stability]

1. Tunes COMMANDS_FILE (default: sample_commands.txt) on this machine and times the whole tune (goal <= 15 min
   on 2 cores).
2. Measures, in ONE session, interleaved, 1 s per job: IREE's own defaults (no per-op flags), ours (the
   per-machine defaults: the baseline), the tuned variant (`--variants-file OUT/tuned.toml`) and eager torch.
   Prints per kernel and the geomeans: tuned vs ours (goal: >= 1.5x faster, i.e. <= 0.667) and tuned vs torch
   (the moonshot: <= 1.0).
3. How the find grows with the budget: for b = 4, 8, 16, 32..., the best screening ratio among the first b
   candidates each kernel tried (from the stored candidates; no extra measuring), as a geomean over kernels.
4. --stability: tunes the first kernel that improved twice more with seeds 1 and 2, and measures the two winners
   and the baseline interleaved: the two winners' speeds should agree within their CIs.
Read the CPU first: figures from another machine do not transfer.
"""
from __future__ import annotations

import argparse
import math
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

IREE_DEFAULTS = ("--iree-global-opt-use-im2col-for-convs=false", "--iree-opt-data-tiling=false")


def geomean(xs):
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def tune(inputs, out, db, budget, seed=0, cache_dir=None):
    from boo_engine.tune.report import write_outputs
    from boo_engine.tune.search import Tuner, TuneSettings

    settings = TuneSettings(out_dir=str(out), db_path=str(db), budget=budget, seed=seed, cache_dir=cache_dir)
    tuner = Tuner(settings, listener=_progress)
    t0 = time.monotonic()
    kernels = tuner.run(inputs)
    wall = time.monotonic() - t0
    write_outputs(out, kernels, tuner.environment, target=tuner.session.target.name, settings=settings.to_dict())
    return tuner, kernels, wall


def _progress(event):
    from boo_engine.tune.events import KernelTuned

    if isinstance(event, KernelTuned):
        k = event.kernel
        print(f"  [{event.index}/{event.total}] {k.func_name}: {k.status} {k.message[:100]}", file=sys.stderr)


def measure(inputs, variants_file, db, *, min_time=1.0, extra_variants=()):
    from boo_engine.config import SessionConfig
    from boo_engine.results import IREE, TORCH
    from boo_engine.session import Session
    from boo_engine.variants import BASELINE, Variant, load_variants_file

    variants = [BASELINE, Variant(name="iree-defaults", flags=IREE_DEFAULTS)]
    if variants_file:
        variants += load_variants_file(variants_file)
    variants += list(extra_variants)
    config = SessionConfig(target="cpu", variants=variants, backends=(IREE, TORCH), db_path=str(db),
                           min_time_s=min_time, iters=20)
    with Session(config) as s:
        s.add_inputs(inputs)
        s.start()
        s.wait()
        jobs = list(s.jobs.values())
        comparisons = s.comparisons(jobs)
    return jobs, comparisons


def table(jobs, comparisons):
    by_cmd = {}
    for j in jobs:
        if j.stats is not None:
            by_cmd.setdefault(j.command, {})[j.variant if j.backend == "iree" else "torch"] = j.stats.median_us
    rows, ratios = [], {"iree-defaults": [], "tuned": [], "torch": []}
    print("| kernel | IREE defaults us | ours us | tuned us | torch us | tuned/ours | tuned/torch |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for cmd, m in by_cmd.items():
        ours = m.get("baseline")
        if not ours:
            continue
        tuned = m.get("tuned", ours)   # a kernel the tune left alone runs the default in `tuned`
        for name in ratios:
            v = tuned if name == "tuned" else m.get(name)
            if v:
                ratios[name].append(v / ours)
        torch = m.get("torch")
        print(f"| `{cmd[:60]}` | {m.get('iree-defaults', float('nan')):.1f} | {ours:.1f} | {tuned:.1f} | "
              f"{torch or float('nan'):.1f} | {tuned / ours:.3f} | {tuned / torch if torch else float('nan'):.3f} |")
        rows.append(cmd)
    g = {k: geomean(v) for k, v in ratios.items()}
    tuned_vs_torch = g["tuned"] / g["torch"] if g["torch"] else float("nan")
    print(f"\ngeomean vs ours: IREE defaults {g['iree-defaults']:.3f}, tuned {g['tuned']:.3f} "
          f"(= {1 / g['tuned']:.2f}x faster; goal >= 1.5x), torch {g['torch']:.3f}; tuned vs torch "
          f"{tuned_vs_torch:.3f} (moonshot <= 1.0)")
    return g


def budget_growth(db, tune_id, budgets=(4, 8, 16, 32, 64)):
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT func_name, ratio, status FROM tune_candidates WHERE tune_id = ? ORDER BY rowid",
                         (tune_id,)).fetchall()
    per: dict[str, list] = {}
    for func, ratio, status in rows:
        per.setdefault(func, []).append(ratio if status == "measured" else None)
    print("\n| budget | geomean of the best screening ratio among the first b candidates |")
    print("|---:|---:|")
    for b in budgets:
        best = [min([r for r in rs[:b] if r] + [1.0]) for rs in per.values()]
        print(f"| {b} | {geomean(best):.3f} |")


def stability(inputs, out, db, kernel, cache_dir):
    from boo_engine.variants import load_variants_file

    cmd = kernel.command
    found = []
    for seed in (1, 2):
        d = Path(out) / f"seed{seed}"
        tuner, kernels, wall = tune([cmd], d, db, budget=32, seed=seed, cache_dir=cache_dir)
        (k,) = kernels.values()
        print(f"seed {seed}: {k.status} {k.message} ({wall:.0f} s)")
        if k.status == "improved":
            (v,) = load_variants_file(d / "tuned.toml")
            found.append(v.__class__(**{**v.__dict__, "name": f"seed{seed}"}))
    if len(found) < 2:
        print("stability: fewer than two winners, nothing to compare")
        return
    jobs, comparisons = measure([cmd], None, db, min_time=2.0, extra_variants=found)
    for (_, _, label), c in comparisons.items():
        if label.startswith("seed"):
            print(f"{label}: {c.ratio:.3f} [{c.ci_low:.3f}, {c.ci_high:.3f}] {c.verdict}")
    a, b = (comparisons[k] for k in comparisons if k[2].startswith("seed"))
    overlap = a.ci_low <= b.ci_high and b.ci_low <= a.ci_high
    print(f"the two winners agree within their CIs: {overlap}")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("file", nargs="?", default=str(ROOT / "sample_commands.txt"))
    p.add_argument("--budget", type=int, default=32)
    p.add_argument("--out", default=str(Path(tempfile.gettempdir()) / "bench_tune"))
    p.add_argument("--cache-dir", default=None)
    p.add_argument("--stability", action="store_true")
    args = p.parse_args()
    from boo_engine.environment import collect_environment

    env = collect_environment("cpu")
    print(f"machine: {env.get('cpu_name') or ''} {env.get('cpu')} ({env.get('cores_logical')} cores), "
          f"{(env.get('iree_compile_version') or '').splitlines()[0]}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    db = out / "bench.db"
    tuner, kernels, wall = tune([args.file], out, db, args.budget, cache_dir=args.cache_dir)
    improved = [k for k in kernels.values() if k.status == "improved"]
    print(f"tune of {args.file}: {len(kernels)} kernels, {len(improved)} improved, {wall / 60:.1f} min "
          f"(goal <= 15 min), budget {args.budget}")
    jobs, comparisons = measure([args.file], out / "tuned.toml", db)
    table(jobs, comparisons)
    budget_growth(db, tuner.tune_id)
    if args.stability and improved:
        stability([args.file], out, db, improved[0], args.cache_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
