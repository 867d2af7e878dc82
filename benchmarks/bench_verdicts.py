#!/usr/bin/env python3
"""Are boo-tui's A/B verdicts trustworthy? No "faster"/"slower" where nothing changed (also with another process
on a core), "slower" where something did, and a headline median that a busy core does not move.

Drives the real CLI in child processes (`python3 -m boo_tui`, the `boo-tui` entry point, from this checkout), IREE
only (`--backend iree`: no eager-torch column), one thread, `--no-numerics`, in a private temporary directory with
one kernel cache for every run (the first run compiles, ~1 min on 2 cores; the rest find their kernels there).
Every run has its own database (kept, paths printed) and JSON export; cross-run verdicts come from
`boo-tui compare A.db B.db --export cmp.json --fail-on-regression 5`, in-run ones from the run's export.

Scenarios (`--scenarios a,b,...`, each repeated `--reps` times, default 5), on the five KERNELS below:
  cross-quiet   two runs back to back, compared. Goals: 0 faster/slower; --fail-on-regression 5 exits 0 every rep.
  cross-burner  the same, a BURNER (a `python3 -c` busy loop: one core, 1.5 s on / 1.0 s off) beside the second
                run, killed when it ends. Goals: 0 faster/slower; exit 0 every rep.
  aa-inrun      one run with an A/A variant, `same=--iree-opt-level=O0` (IREE 3.13's real default, see
                boo_engine/tune/report.py DEFAULT_OPT_LEVEL): quiet, then with the on/off burner through the whole
                run. The script checks the A/A claim: the dispatch ELF's .text of both kernels must be identical (the
                vmfbs differ only in embedded cache paths). Goal: 0 faster/slower.
  power         the five kernels with two real changes, quiet and with the on/off burner:
                  slow  = the 512^3 gemm's >= 20% change, by the CPU: on AVX2 hosts
                          --iree-llvmcpu-target-vector-width-in-bytes=16 (1.42x-1.64x on an AMD EPYC Zen 3); on
                          AVX-512 hosts that flag does not compile, and --iree-llvmcpu-target-cpu=haswell (AVX2
                          code) is the change (1.39x on an Intel Xeon with AVX-512).
                  small = --iree-llvmcpu-target-cpu=sandybridge (AVX without FMA): 1.08x-1.22x on the gemm on
                          the Zen 3; on the Xeon 1.7x on the gemm, 1.13x / 1.17x on two convs, 0.94x on layernorm.
                A change's size is its ratio pooled over every rep and condition. Goals: the gemm's slow change
                called slower every time; every change >= 20% called in its direction every rep, quiet and
                loaded; every change of 8-20% called in every quiet rep; none ever called the wrong way.
  headline      per kernel, the baseline's median in quiet runs vs in runs beside a CONTINUOUS burner (one core
                busy the whole run), quiet / burner / quiet per rep. Goal: the median over the reps within 10% for
                kernels >= 100 us (one quiet run against the next moves single kernels 10-30% on a shared VM).

  tune          `boo-tui tune` of the strided conv and the NHWC 1x1 conv (--budget 8, seeds 0..2:
                --tune-reps), then its tuned.toml in a fresh session. Goal: each emitted ratio re-measures inside
                the interval the tune printed for a new session (its own CI's result is shown beside).

Seen while choosing the variants: flags that leave the code byte-identical (--iree-llvmcpu-slp-vectorization=false,
--iree-llvmcpu-loop-unrolling=false, --iree-codegen-reorder-workgroups-strategy=transpose) were called "slower" at
1.04x-1.07x in-run on the shared box (another process took ~27% of a core): what aa-inrun measures.

Run on an otherwise quiet machine (the burner is the only intended load):
    python3 benchmarks/bench_verdicts.py [--scenarios cross-quiet,aa-inrun] [--reps 5] [--json out.json]
        [--cache-dir DIR] [--run-args '--rounds 7'] [--no-keep]
Exit status 1 when a goal is missed (or a run fails).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

#: (short label, command): five kinds (gemm, strided conv + bias, 1x1 NHWC conv, layernorm, backward-data conv)
KERNELS: list[tuple[str, str]] = [
    ("gemm512", "gemm --a_w 512 --a_h 512 --b_w 512"),
    ("conv3x3s2", "conv -n 2 -c 16 -H 56 -W 56 -k 32 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -l 1 -j 1 -m conv -g 1 -F 1 -t 1"),
    ("conv1x1nhwc", "conv -n 4 -c 35 -H 48 -W 32 -k 35 -y 1 -x 1 --in_layout NHWC --out_layout NHWC --fil_layout NHWC"),
    ("layernorm", "layernorm --input 16x128x768 --eps 1e-5 --mode 1 --normalized_dim 2 -F 1"),
    ("conv3x3bwd", "conv -n 2 -c 32 -H 28 -W 28 -k 32 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1 -l 1 -j 1 -m conv -g 1 -F 2 -t 1"),
]
LABEL = dict((cmd, label) for label, cmd in KERNELS)
GEMM = KERNELS[0][1]
AA_VARIANT = "same=--iree-opt-level=O0"
#: the >= 20% change to the 512^3 gemm, by the CPU's widest vectors: on AVX2 (Zen 3) code on 16-byte vectors
#: (1.42x-1.64x); on AVX-512 hosts that flag fails to compile (IREE refuses the 8192-byte vectors it makes), and
#: AVX2 code (haswell) is the change: 1.39x on the Xeon (Sapphire Rapids class)
SLOW_FLAG = {False: "--iree-llvmcpu-target-vector-width-in-bytes=16", True: "--iree-llvmcpu-target-cpu=haswell"}
SMALL_FLAG = "--iree-llvmcpu-target-cpu=sandybridge"
SCENARIOS = ("cross-quiet", "cross-burner", "aa-inrun", "power", "headline", "tune")
MARK = {"faster": "F", "slower": "S", "same": "=", "unclear": "?", "insufficient": "i"}
BURNER = """
import sys, time
on, off = float(sys.argv[1]), float(sys.argv[2])
while True:
    end = time.monotonic() + on
    while time.monotonic() < end:
        pass
    time.sleep(off)
"""


def cpu_info() -> dict[str, Any]:
    model, flags = "unknown", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and model == "unknown":
                model = line.split(":", 1)[1].strip()
            elif line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return {"model": model, "cores": os.cpu_count(), "avx512f": "avx512f" in flags, "avx2": "avx2" in flags}


@contextmanager
def burner(on_s: float, off_s: float) -> Iterator[None]:
    """One core busy (on_s seconds on, off_s off; off_s=0: continuously) while the block runs, then killed."""
    p = subprocess.Popen([sys.executable, "-c", BURNER, str(on_s), str(off_s)])
    try:
        yield
    finally:
        p.kill()
        p.wait()


class Bench:
    def __init__(self, tmp: Path, cache: Path, run_args: list[str]) -> None:
        self.tmp, self.cache, self.run_args = tmp, cache, run_args
        self.n = 0
        self.failures: list[str] = []
        self.cmds = tmp / "kernels.txt"
        self.cmds.write_text("".join(cmd + "\n" for _, cmd in KERNELS))
        self.env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))

    def _boo(self, args: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "boo_tui", *args], capture_output=True, text=True,
                              env=self.env, timeout=3600)

    def run(self, name: str, variants: tuple[str, ...] = (), *, burn: tuple[float, float] | None = None,
            files: list[Path] | None = None, extra: tuple[str, ...] | list[str] = ()) -> dict[str, Any] | None:
        """One headless run (own database and export); its export as a dict, None when it failed."""
        self.n += 1
        stem = self.tmp / f"{self.n:02d}-{name}"
        db, export = stem.with_suffix(".db"), stem.with_suffix(".json")
        args = [*(str(f) for f in files or [self.cmds]), "--target", "cpu", "--backend", "iree", "--db", str(db),
                "--cache-dir", str(self.cache), "--headless", "--no-numerics", "--export", str(export),
                *self.run_args, *extra]
        for v in variants:
            args += ["--variant", v]
        t0 = time.perf_counter()
        if burn:
            with burner(*burn):
                p = self._boo(args)
        else:
            p = self._boo(args)
        secs = time.perf_counter() - t0
        if p.returncode != 0 or not export.exists():
            self.failures.append(f"run {stem.name}: exit {p.returncode}: {p.stderr.strip()[-400:]}")
            print(f"  run {stem.name} FAILED (exit {p.returncode})\n{p.stderr.strip()[-400:]}", flush=True)
            return None
        doc: dict[str, Any] = json.loads(export.read_text())
        doc["_db"], doc["_seconds"] = str(db), secs
        print(f"  run {stem.name}: {secs:.0f} s, {db}", flush=True)
        return doc

    def compare(self, a: dict[str, Any], b: dict[str, Any]) -> tuple[int, dict[str, Any] | None]:
        out = Path(b["_db"]).with_suffix(".cmp.json")
        p = self._boo(["compare", a["_db"], b["_db"], "--export", str(out), "--fail-on-regression", "5"])
        if p.returncode not in (0, 3) or not out.exists():
            self.failures.append(f"compare {out.name}: exit {p.returncode}: {p.stderr.strip()[-400:]}")
            return p.returncode, None
        return p.returncode, json.loads(out.read_text())


def verdict_cell(c: dict[str, Any]) -> str:
    ratio = c.get("ratio")
    return f"{ratio:6.3f}{MARK.get(c['verdict'], '?')}" if ratio is not None else f"  -   {MARK.get(c['verdict'], '?')}"


def label(cmd: str) -> str:
    return LABEL.get(cmd, cmd)


def elf_text(vmfb: str) -> bytes:
    """The executable code of a vmfb: every embedded dispatch ELF's .text, concatenated (the vmfb itself embeds
    the cache entry's path, so two cache entries of the same code never compare byte-equal as files)."""
    out = []
    with zipfile.ZipFile(vmfb) as z:
        for info in z.infolist():
            if not info.filename.endswith(".so"):
                continue
            b = z.read(info)
            shoff = struct.unpack_from("<Q", b, 0x28)[0]
            shentsize, shnum, shstrndx = struct.unpack_from("<HHH", b, 0x3A)
            secs = [struct.unpack_from("<IIQQQQIIQQ", b, shoff + k * shentsize) for k in range(shnum)]
            names = secs[shstrndx][4]
            for s in secs:
                start = names + s[0]
                if b[start:b.index(b"\0", start)] == b".text":
                    out.append(b[s[4]:s[4] + s[5]])
    return b"".join(out)


def same_code(doc: dict[str, Any], variant: str) -> dict[str, bool | None]:
    """Per command: is `variant`'s dispatch code identical to the baseline's? (None: cannot tell)"""
    arts: dict[tuple[str, str], str | None] = {}
    for r in doc["results"]:
        arts[(r["command"], r["variant"])] = (r.get("compile") or {}).get("artifact")
    out: dict[str, bool | None] = {}
    for (cmd, var), art in arts.items():
        base = arts.get((cmd, "baseline"))
        if var != variant:
            continue
        try:
            out[cmd] = elf_text(art) == elf_text(base) if art and base else None
        except (OSError, zipfile.BadZipFile, struct.error, ValueError):
            out[cmd] = None
    return out


def count(comps: list[dict[str, Any]]) -> dict[str, int]:
    return {v: sum(1 for c in comps if c["verdict"] == v) for v in MARK}


# --- scenarios ---------------------------------------------------------------------------------------------------

def cross(bench: Bench, reps: int, burn: bool) -> dict[str, Any]:
    name = "cross-burner" if burn else "cross-quiet"
    rows: list[dict[str, Any]] = []
    for rep in range(reps):
        a = bench.run(f"{name}-a")
        b = bench.run(f"{name}-b", burn=(1.5, 1.0) if burn else None)
        if not (a and b):
            continue
        rc, cmp = bench.compare(a, b)
        if cmp is None:
            continue
        rows.append({"rep": rep + 1, "exit": rc, "comparisons": cmp["comparisons"], "differences": cmp["differences"],
                     "notes": cmp["notes"], "a_db": a["_db"], "b_db": b["_db"]})
    comps = [c for r in rows for c in r["comparisons"]]
    n = count(comps)
    wrong = n["faster"] + n["slower"]
    exits_ok = sum(1 for r in rows if r["exit"] == 0)
    print(f"\n## {name}: B / A per kernel and rep (F faster, S slower, = same, ? unclear, i insufficient)")
    for cmd in dict.fromkeys(c["command"] for c in comps):
        cells = [verdict_cell(c) for r in rows for c in r["comparisons"] if c["command"] == cmd]
        print(f"| {label(cmd):12} | {' '.join(cells)} |")
    exits = " ".join(f"{r['exit']:7d}" for r in rows)
    print(f"| exit         | {exits} |")
    goals = [goal(f"{name}: 0 faster/slower", wrong == 0 and len(rows) == reps,
                  f"{wrong} of {len(comps)} ({n}) over {len(rows)}/{reps} reps"),
             goal(f"{name}: --fail-on-regression 5 exits 0 every rep", exits_ok == reps,
                  f"{exits_ok}/{reps} reps exit 0")]
    return {"rows": rows, "counts": n, "goals": goals}


def aa_inrun(bench: Bench, reps: int) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    identical: dict[str, bool | None] = {}
    for rep in range(reps):
        for cond, burn in (("quiet", None), ("burner", (1.5, 1.0))):
            doc = bench.run(f"aa-{cond}", (AA_VARIANT,), burn=burn)
            if doc is None:
                continue
            if not identical:
                identical = same_code(doc, "same")
            rows.append({"rep": rep + 1, "condition": cond, "db": doc["_db"],
                         "comparisons": [c for c in doc["comparisons"] if c["variant"] == "same"]})
    print("\n## aa-inrun: same (O0) / baseline in one run, per kernel: quiet reps | burner reps")
    for cmd in dict.fromkeys(c["command"] for r in rows for c in r["comparisons"]):
        cells = {cond: " ".join(verdict_cell(c) for r in rows if r["condition"] == cond
                                for c in r["comparisons"] if c["command"] == cmd) for cond in ("quiet", "burner")}
        code = {True: "same code", False: "CODE DIFFERS", None: "code ?"}[identical.get(cmd)]
        print(f"| {label(cmd):12} | {cells['quiet']} | {cells['burner']} | {code} |")
    goals = []
    out: dict[str, Any] = {"rows": rows, "identical_code": identical}
    for cond in ("quiet", "burner"):
        comps = [c for r in rows if r["condition"] == cond for c in r["comparisons"]]
        n = count(comps)
        wrong = n["faster"] + n["slower"]
        got = sum(1 for r in rows if r["condition"] == cond)
        out[f"counts_{cond}"] = n
        goals.append(goal(f"aa-inrun {cond}: 0 faster/slower", wrong == 0 and got == reps,
                          f"{wrong} of {len(comps)} ({n}) over {got}/{reps} reps"))
    if not all(identical.values()):
        print(f"  warning: the A/A variant's code differs from the baseline's for "
              f"{[label(c) for c, ok in identical.items() if not ok]}")
    out["goals"] = goals
    return out


def power(bench: Bench, reps: int, slow_flag: str, small_flag: str) -> dict[str, Any]:
    """Real changes, quiet and beside the on/off burner. Each run measures the five kernels with two variants, so
    it holds ten real changes of many sizes (the same flag moves kernels differently: on the Xeon sandybridge made
    the 512^3 gemm 1.7x slower, a conv 1.13x slower and the layernorm 0.94x). A change's true size is taken as
    its ratio pooled over every rep and both conditions (the geometric mean: 10x the data of one run); then
    every change of >= 20% must be called, in its direction, in every rep quiet and loaded, and every change of
    >= 8% in every quiet rep. No change may be called in the wrong direction, ever."""
    variants = (f"slow={slow_flag}",) + ((f"small={small_flag}",) if small_flag else ())
    rows: list[dict[str, Any]] = []
    for rep in range(reps):
        for cond, burn in (("quiet", None), ("burner", (1.5, 1.0))):
            doc = bench.run(f"power-{cond}", variants, burn=burn)
            if doc is not None:
                rows.append({"rep": rep + 1, "condition": cond, "db": doc["_db"], "comparisons": doc["comparisons"]})
    changes = sorted({(c["command"], c["variant"]) for r in rows for c in r["comparisons"]
                      if c["variant"] in ("slow", "small")}, key=lambda cv: (cv[1], label(cv[0])))
    print(f"\n## power: variant / baseline per rep (slow: {slow_flag}; small: {small_flag or '-'}); pooled = "
          "geometric mean over every rep and condition")
    goals, table = [], []
    big_ok = small_ok = True
    big_n = small_n = wrong = 0
    details = []
    for cmd, var in changes:
        cells = {cond: [c for r in rows if r["condition"] == cond for c in r["comparisons"]
                        if c["command"] == cmd and c["variant"] == var] for cond in ("quiet", "burner")}
        ratios = [c["ratio"] for cs in cells.values() for c in cs if c.get("ratio")]
        if not ratios:
            continue
        pooled = math.exp(statistics.fmean(math.log(x) for x in ratios))
        effect = abs(math.log(pooled))
        right = "slower" if pooled > 1 else "faster"
        wrong += sum(1 for cs in cells.values() for c in cs if c["verdict"] in ("faster", "slower")
                     and c["verdict"] != right)
        need = []
        if effect >= math.log(1.20):
            need, big_n = ["quiet", "burner"], big_n + 1
        elif effect >= math.log(1.08):
            need, small_n = ["quiet"], small_n + 1
        for cond in need:
            called = sum(1 for c in cells[cond] if c["verdict"] == right)
            if called < reps:
                details.append(f"{label(cmd)}/{var} pooled {pooled:.3f}: {called}/{reps} {right} {cond}")
                if effect >= math.log(1.20):
                    big_ok = False
                else:
                    small_ok = False
        print(f"| {label(cmd):12} | {var:5} | pooled {pooled:6.3f} | quiet {' '.join(verdict_cell(c) for c in cells['quiet'])}"
              f" | burner {' '.join(verdict_cell(c) for c in cells['burner'])} |")
        table.append({"command": cmd, "variant": var, "pooled": pooled})
    gemm_slow = [c for r in rows for c in r["comparisons"] if c["command"] == GEMM and c["variant"] == "slow"]
    goals.append(goal("power: the 512^3 gemm's slow variant called slower in every rep, quiet and loaded",
                      sum(1 for c in gemm_slow if c["verdict"] == "slower") == 2 * reps,
                      f"{sum(1 for c in gemm_slow if c['verdict'] == 'slower')}/{2 * reps}, ratios "
                      f"{fmt_range([c['ratio'] for c in gemm_slow if c.get('ratio')])}"))
    goals.append(goal("power: every change >= 20% called in its direction, every rep, quiet and loaded",
                      big_ok and big_n > 0, f"{big_n} such changes; " + ("; ".join(d for d in details) or "all called")))
    goals.append(goal("power: every change of 8-20% called in its direction in every quiet rep",
                      small_ok and small_n > 0, f"{small_n} such changes; " + ("; ".join(details) or "all called")))
    goals.append(goal("power: no change ever called in the wrong direction", wrong == 0, f"{wrong} wrong"))
    return {"rows": rows, "slow_flag": slow_flag, "small_flag": small_flag, "changes": table, "goals": goals}


TUNED = [KERNELS[1][1], KERNELS[2][1]]   # the strided conv and the NHWC 1x1 conv: each has wins to find


def tune(bench: Bench, reps: int, budget: int) -> dict[str, Any]:
    """`boo-tui tune` (its winner verified in a new worker process before it is emitted), then the emitted
    tuned.toml measured in a fresh session (`boo-tui FILE --variants-file tuned.toml`): its ratio against the
    default must lie inside the interval the tune printed (report.md). A no-winner kernel has nothing to check."""
    rows: list[dict[str, Any]] = []
    cmds = bench.tmp / "tuned-kernels.txt"
    cmds.write_text("".join(c + "\n" for c in TUNED))
    for rep in range(reps):
        bench.n += 1
        out = bench.tmp / f"{bench.n:02d}-tune"
        t0 = time.perf_counter()
        p = bench._boo(["tune", str(cmds), "--target", "cpu", "--out", str(out), "--budget", str(budget),
                        "--seed", str(rep), "--db", str(out) + ".db", "--cache-dir", str(bench.cache)])
        if p.returncode != 0 or not (out / "report.md").exists():
            bench.failures.append(f"tune {out.name}: exit {p.returncode}: {p.stderr.strip()[-400:]}")
            continue
        print(f"  tune {out.name}: {time.perf_counter() - t0:.0f} s", flush=True)
        printed: dict[str, tuple[float, float, float, float, float]] = {}
        for line in (out / "report.md").read_text().splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) >= 6 and cells[0].startswith("`") and cells[3] and cells[5].startswith("["):
                lo, hi = (float(x) for x in cells[4].strip("[]").split(","))     # this session's interval
                nlo, nhi = (float(x) for x in cells[5].strip("[]").split(","))   # a new session's
                printed[cells[0].strip("`")] = (float(cells[3]), lo, hi, nlo, nhi)
        if not printed:
            rows.append({"rep": rep + 1, "tune": str(out), "kernels": {}})
            print("  nothing was faster: nothing to re-measure", flush=True)
            continue
        doc = bench.run("tune-fresh", files=[cmds], extra=["--variants-file", str(out / "tuned.toml")])
        if doc is None:
            continue
        func = {r["command"]: r["func_name"] for r in doc["results"]}
        kernels = {}
        for c in doc["comparisons"]:
            name = func.get(c["command"])
            if name in printed and c.get("ratio") and c["variant"] != "torch":
                ratio, lo, hi, nlo, nhi = printed[name]
                kernels[name] = {"printed": [ratio, lo, hi, nlo, nhi], "fresh": c["ratio"],
                                 "fresh_verdict": c["verdict"], "inside": nlo <= c["ratio"] <= nhi,
                                 "inside_own_ci": lo <= c["ratio"] <= hi}
        rows.append({"rep": rep + 1, "tune": str(out), "fresh_db": doc["_db"], "kernels": kernels})
    print("\n## tune: the ratio the tune printed [its CI], [its interval for a new session] vs the emitted tuned.toml "
          "in a fresh session")
    checked = inside = 0
    for r in rows:
        for name, k in r["kernels"].items():
            checked += 1
            inside += k["inside"]
            ratio, lo, hi, nlo, nhi = k["printed"]
            print(f"| rep {r['rep']} | {name[:48]:48} | tune {ratio:.3f} [{lo:.3f}, {hi:.3f}], a new session "
                  f"[{nlo:.3f}, {nhi:.3f}] | fresh {k['fresh']:.3f} {k['fresh_verdict']:7} | "
                  f"{'inside' if k['inside'] else 'OUTSIDE'} (its own CI: "
                  f"{'inside' if k['inside_own_ci'] else 'outside'}) |")
    goals = [goal("tune: the emitted ratio re-measures inside its printed new-session interval in a fresh session",
                  checked > 0 and inside == checked, f"{inside}/{checked} inside over {len(rows)}/{reps} tunes")]
    return {"rows": rows, "goals": goals}


def headline(bench: Bench, reps: int) -> dict[str, Any]:
    """Per rep: a quiet run, a run beside a continuous burner, a second quiet run (in that order, so drift hits
    both sides). On a shared VM one quiet run against the next moves single kernels by 10-30% (see cross-quiet),
    so one burner run against one quiet run mostly measures that; the goal is on the medians over the reps (each
    kernel's burner headline against its quiet one), and the quiet-vs-quiet spread is printed beside it."""
    per: dict[str, list[tuple[float, float, float]]] = {}
    rows: list[dict[str, Any]] = []
    for rep in range(reps):
        q = bench.run("headline-quiet")
        b = bench.run("headline-burner", burn=(3600.0, 0.0))
        q2 = bench.run("headline-quiet2")
        if not (q and b and q2):
            continue

        def medians(doc: dict[str, Any]) -> dict[str, float]:
            return {r["command"]: r["stats"]["median_us"] for r in doc["results"]
                    if r["variant"] == "baseline" and r["backend"] == "iree" and r.get("stats")}

        mq, mb, mq2 = medians(q), medians(b), medians(q2)
        for cmd in mq:
            if cmd in mb and cmd in mq2:
                per.setdefault(cmd, []).append((mq[cmd], mb[cmd], mq2[cmd]))
        rows.append({"rep": rep + 1, "quiet_db": q["_db"], "burner_db": b["_db"], "quiet2_db": q2["_db"],
                     "quiet": mq, "burner": mb, "quiet2": mq2})
    print("\n## headline: baseline median beside a continuous burner / quiet (median over reps; per rep; "
          "and quiet / quiet for scale)")
    bad, checked = [], 0
    for cmd, triples in per.items():
        quiet = statistics.median([x for qq, _, q2 in triples for x in (qq, q2)])
        loaded = statistics.median(bq for _, bq, _ in triples)
        ratios = [2 * bq / (qq + q2) for qq, bq, q2 in triples]
        aa = [q2 / qq for qq, _, q2 in triples]
        gated = quiet >= 100
        checked += gated
        off = gated and (abs(loaded / quiet - 1) > 0.10 or len(triples) < reps)
        if off:
            bad.append(f"{label(cmd)} {loaded / quiet:.3f}")
        print(f"| {label(cmd):12} | quiet {quiet:9.1f} us | burner/quiet {loaded / quiet:6.3f} | per rep "
              f"{' '.join(f'{r:6.3f}' for r in ratios)} | quiet/quiet {fmt_range(aa)} | "
              f"{'' if gated else '(< 100 us: not gated)'}{'OFF' if off else ''} |")
    goals = [goal("headline: a continuous burner moves the medians over the reps <= 10% (kernels >= 100 us)",
                  not bad and checked > 0, "; ".join(bad) or f"{checked} kernels within 10%")]
    return {"rows": rows, "goals": goals}


def fmt_range(xs: list[float]) -> str:
    return f"{min(xs):.3f}-{max(xs):.3f}" if xs else "-"


def goal(what: str, met: bool, figures: str) -> dict[str, Any]:
    return {"goal": what, "met": met, "figures": figures}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenarios", default=",".join(SCENARIOS), help=f"comma-separated subset of {','.join(SCENARIOS)}")
    ap.add_argument("--reps", type=int, default=5, help="repetitions of each scenario")
    ap.add_argument("--cache-dir", help="kernel cache shared by every run (default: one in the temporary directory)")
    ap.add_argument("--run-args", default="", help="extra boo-tui arguments for every run, e.g. '--rounds 7'")
    ap.add_argument("--slow-flag", help="power: the 512^3 gemm's >= 20%% slower variant's flags (default by CPU)")
    ap.add_argument("--small-flag", default=SMALL_FLAG, help="power: the ~10%% slower variant's flags ('' = none)")
    ap.add_argument("--keep", action=argparse.BooleanOptionalAction, default=True,
                    help="keep the temporary directory (databases, exports; default: keep)")
    ap.add_argument("--tune-reps", type=int, default=3, help="tune: how many tunes (seeds 0, 1, ...)")
    ap.add_argument("--tune-budget", type=int, default=8, help="tune: candidates per kernel")
    ap.add_argument("--json", help="write every figure here")
    opts = ap.parse_args()
    chosen = [s.strip() for s in opts.scenarios.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in SCENARIOS]
    if unknown:
        ap.error(f"unknown scenario(s) {unknown}; choose from {','.join(SCENARIOS)}")

    tmp = Path(tempfile.mkdtemp(prefix="bench-verdicts-"))
    cache = Path(opts.cache_dir) if opts.cache_dir else tmp / "kernels"
    bench = Bench(tmp, cache, shlex.split(opts.run_args))
    cpu = cpu_info()
    print(f"CPU: {cpu['model']} ({cpu['cores']} cores, avx512f={cpu['avx512f']}, avx2={cpu['avx2']}); "
          f"runs, databases and exports in {tmp}; kernel cache {cache}", flush=True)
    results: dict[str, Any] = {}
    for s in chosen:
        print(f"\n# {s}", flush=True)
        if s in ("cross-quiet", "cross-burner"):
            results[s] = cross(bench, opts.reps, burn=s == "cross-burner")
        elif s == "aa-inrun":
            results[s] = aa_inrun(bench, opts.reps)
        elif s == "power":
            results[s] = power(bench, opts.reps, opts.slow_flag or SLOW_FLAG[cpu["avx512f"]], opts.small_flag)
        elif s == "tune":
            results[s] = tune(bench, opts.tune_reps, opts.tune_budget)
        else:
            results[s] = headline(bench, opts.reps)
    goals = [g for r in results.values() for g in r["goals"]]
    print("\n# goals")
    for g in goals:
        print(f"{'met   ' if g['met'] else 'MISSED'} {g['goal']}: {g['figures']}")
    for failure in bench.failures:
        print(f"FAILED {failure}")
    print(f"databases and exports: {tmp}")
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump({"when": time.strftime("%Y-%m-%dT%H:%M:%S"), "cpu": cpu, "tmp": str(tmp), "reps": opts.reps,
                       "kernels": KERNELS, "scenarios": results, "goals": goals, "failures": bench.failures},
                      f, indent=1, default=str)
    if not opts.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if bench.failures or not all(g["met"] for g in goals) else 0


if __name__ == "__main__":
    sys.exit(main())
