"""The model zoo (zoo/*.py) through the real tool: every model captured in every configuration (forward and
forward + backward, eval and train, float32 and bfloat16, and channels-last for the conv nets) with `boo-tui
capture`'s own code, the distinct commands of all captures compiled with IREE and measured once each by `boo-tui`
headless (numerics on, against the float64 reference, with BOO's criteria), and per model and configuration: the
commands, how many compiled, how many passed numerics, and every failure with its one-line reason.

    python3 benchmarks/bench_zoo.py [--models resnet_basic,vit] [--configs bwd,bf16] [--markdown zoo.md]
                                    [--work DIR] [--cache-dir DIR] [--iter 3] [--min-time 0.02] [--jobs N]

The headline is over DISTINCT commands: a command that several configurations (or models) share counts once.
`--configs` keeps the configurations whose name has every word given (`fwd`, `bwd`, `eval`, `train`, `f32`,
`bf16`, `nhwc`). Prints the CPU first: figures from another machine are not comparable. Keeps the captures, the
results database, the JSON export and the run's log in the work folder (default: a temporary one).
"""
from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
ZOO = ROOT / "zoo"


@dataclass(frozen=True)
class Config:
    backward: bool
    eval_mode: bool
    dtype: str          # float32 | bfloat16
    nhwc: bool

    @property
    def name(self) -> str:
        return " ".join(filter(None, ["bwd" if self.backward else "fwd", "eval" if self.eval_mode else "train",
                                      "bf16" if self.dtype == "bfloat16" else "f32", "nhwc" if self.nhwc else ""]))


@dataclass(frozen=True)
class Model:
    name: str
    path: Path
    inputs: tuple[str, ...]
    conv_net: bool
    bf16_factory: str | None

    def configs(self) -> list[Config]:
        return [Config(b, e, d, n) for b, e, d, n in itertools.product(
            (False, True), (True, False), ("float32", "bfloat16"), (False, True) if self.conv_net else (False,))]


@dataclass
class Capture:
    model: Model
    config: Config
    commands: list[str] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0


@dataclass
class Outcome:
    compiled: bool
    passed: bool
    reason: str | None
    stage: str = ""
    """where a failure happened: parse (the line), compile, run (measuring) or numerics"""


def cpu_line() -> str:
    model, flags = "?", []
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and model == "?":
                model = line.split(":", 1)[1].strip()
            if line.startswith("flags") and not flags:
                flags = [f for f in line.split(":", 1)[1].split() if f.startswith(("avx512f", "avx2", "avx512_bf16"))]
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} CPUs ({' '.join(sorted(flags)) or 'no AVX2'})"


def zoo_models() -> list[Model]:
    """Every factory the zoo's files list in INPUTS, in file order."""
    models = []
    for path in sorted(ZOO.glob("*.py")):
        if path.name.startswith("_"):
            continue
        spec = importlib.util.spec_from_file_location(f"_zoo_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        bf16 = getattr(module, "BF16", {})
        for name, inputs in module.INPUTS.items():
            models.append(Model(name, path, tuple(inputs), name in module.CONV_NETS, bf16.get(name)))
    return models


def capture(model: Model, config: Config) -> Capture:
    """The real capture path (`boo-tui capture`'s model_commands), one torch thread."""
    from boo_engine.capture import model_commands, parse_input
    from boo_engine.capture.errors import CaptureError

    factory, inputs = model.name, list(model.inputs)
    if config.dtype == "bfloat16":
        if model.bf16_factory:
            factory = model.bf16_factory
        else:
            inputs = [s if ":" in s else f"{s}:bfloat16" for s in inputs]
    cap = Capture(model, config)
    t0 = time.perf_counter()
    try:
        text = model_commands(f"{model.path}:{factory}", [parse_input(s) for s in inputs], backward=config.backward,
                              layout="nhwc" if config.nhwc else None, eval_mode=config.eval_mode, threads=1)
        cap.commands = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    except CaptureError as e:
        cap.error = f"capture failed: {e}"
    cap.seconds = time.perf_counter() - t0
    return cap


def run_commands(commands: list[str], work: Path, args: argparse.Namespace) -> dict[str, Outcome]:
    """Every command compiled and measured once by `boo-tui` headless; command -> its outcome."""
    cmd_file = work / "zoo-commands.txt"
    cmd_file.write_text("".join(c + "\n" for c in commands))
    export = work / "zoo.json"
    argv = [sys.executable, "-m", "boo_tui", str(cmd_file), "--target", "cpu", "--backend", "iree",
            "--iter", str(args.iter), "--min-time", str(args.min_time), "--rounds", "1",
            "--db", str(work / "zoo.db"), "--export", str(export)]
    if args.cache_dir:
        argv += ["--cache-dir", args.cache_dir]
    if args.jobs:
        argv += ["--jobs", str(args.jobs)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    log = work / "run.log"
    with log.open("w") as f:
        p = subprocess.run(argv, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=work)
    if p.returncode not in (0, 1) or not export.exists():
        sys.exit(f"bench_zoo: boo-tui exited {p.returncode} without its export; see {log}")
    by_line = {i + 1: c for i, c in enumerate(commands)}
    outcomes: dict[str, Outcome] = {}
    for r in json.loads(export.read_text())["results"]:
        if r.get("backend") == "torch":
            continue
        line = int(str(r.get("source") or "").rpartition(":")[2] or 0)
        command = by_line.get(line, r["command"])
        outcomes[command] = outcome(r)
    return outcomes


def outcome(r: dict) -> Outcome:
    comp = r.get("compile") or {}
    compiled = bool(comp.get("artifact")) and not comp.get("error")
    numerics = r.get("numerics") or {}
    verdict = numerics.get("verdict")
    if r["status"] != "done":
        error = r.get("error") or comp.get("error") or r["status"]
        stage = "compile" if comp.get("error") or "compile failed" in error else "run" if comp else "parse"
        return Outcome(compiled, False, one_line(error), stage)
    if verdict == "pass":
        return Outcome(True, True, None)
    reason = (numerics.get("stats") or {}).get("reason") or f"numerics {verdict}"
    return Outcome(True, False, one_line(reason), "numerics")


def one_line(text: str, limit: int = 400) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[:limit - 3] + "..."


def pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole else "-"


def short(command: str, limit: int = 160) -> str:
    return command if len(command) <= limit else command[:limit - 3] + "..."


def report(captures: list[Capture], outcomes: dict[str, Outcome], seconds: dict[str, float]) -> list[str]:
    """The Markdown: per model and configuration, per model (distinct over its configurations), the total
    (distinct over everything) and the failures."""
    out = ["| model | configuration | commands | compiled | numerics pass |", "|---|---|---:|---:|---:|"]

    def counts(cmds: set[str]) -> tuple[int, int, int]:
        got = [outcomes.get(c) for c in cmds]
        return (len(cmds), sum(1 for o in got if o is not None and o.compiled),
                sum(1 for o in got if o is not None and o.passed))

    per_model: dict[str, set[str]] = {}
    for cap in captures:
        cmds = set(cap.commands)
        per_model.setdefault(cap.model.name, set()).update(cmds)
        n, c, p = counts(cmds)
        extra = f" ({cap.error})" if cap.error else ""
        out.append(f"| {cap.model.name} | {cap.config.name}{extra} | {n} | {c} | {p} |")
    out += ["", "| model | configurations | distinct commands | compiled | numerics pass | pass % |",
            "|---|---:|---:|---:|---:|---:|"]
    everything: set[str] = set()
    for name, cmds in per_model.items():
        everything |= cmds
        n, c, p = counts(cmds)
        configs = sum(1 for cap in captures if cap.model.name == name)
        bad = sum(1 for cap in captures if cap.model.name == name and cap.error)
        out.append(f"| {name} | {configs}{f' ({bad} failed to capture)' if bad else ''} | {n} | {c} | {p} | "
                   f"{pct(p, n)} |")
    n, c, p = counts(everything)
    failed_captures = sum(1 for cap in captures if cap.error)
    out.append(f"| **all (distinct)** | {len(captures)} | **{n}** | **{c}** ({pct(c, n)}) | **{p}** | "
               f"**{pct(p, n)}** |")
    out += ["", f"Capture: {len(captures)} configurations in {seconds['capture']:.0f} s"
                f"{f', {failed_captures} failed' if failed_captures else ''}; compile + measure of {n} distinct "
                f"commands: {seconds['run']:.0f} s; in all {seconds['capture'] + seconds['run']:.0f} s.", ""]
    failures = sorted((c for c in everything if c not in outcomes or not outcomes[c].passed),
                      key=lambda c: (outcomes[c].stage, outcomes[c].reason or "") if c in outcomes else ("", ""))
    if failures or failed_captures:
        out.append("Failures:")
        out.append("")
    for cap in captures:
        if cap.error:
            out.append(f"- {cap.model.name} / {cap.config.name}: {cap.error}")
    for c in failures:
        where = sorted({cap.model.name for cap in captures if c in cap.commands})
        configs = sorted({cap.config.name for cap in captures if c in cap.commands})
        o = outcomes.get(c)
        reason = o.reason if o is not None else "no result (the run stopped before it?)"
        stage = o.stage if o is not None else "run"
        out.append(f"- `{short(c)}` ({', '.join(where)}; {len(configs)} configuration(s), e.g. {configs[0]}): "
                   f"{stage}: {reason}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=None, help="comma-separated factory names (default: the whole zoo)")
    ap.add_argument("--configs", default=None,
                    help="comma-separated words a configuration's name must all have (fwd, bwd, eval, train, f32, "
                         "bf16, nhwc)")
    ap.add_argument("--markdown", default=None, metavar="FILE", help="also write the tables as Markdown to FILE")
    ap.add_argument("--work", default=None, metavar="DIR", help="work folder (default: a temporary one)")
    ap.add_argument("--cache-dir", default=None, metavar="DIR", help="kernel cache (default: boo-tui's)")
    ap.add_argument("--iter", type=int, default=3, help="samples per command (default 3: this checks, not times)")
    ap.add_argument("--min-time", type=float, default=0.02, help="seconds per command at least (default 0.02)")
    ap.add_argument("--jobs", type=int, default=None, help="parallel compiles (default: one per core)")
    args = ap.parse_args()

    models = zoo_models()
    if args.models:
        wanted = [m.strip() for m in args.models.split(",") if m.strip()]
        unknown = sorted(set(wanted) - {m.name for m in models})
        if unknown:
            sys.exit(f"bench_zoo: --models: no zoo model {', '.join(unknown)} (the zoo has "
                     f"{', '.join(m.name for m in models)})")
        models = [m for m in models if m.name in wanted]
    words = {w.strip() for w in (args.configs or "").split(",") if w.strip()}
    known = {"fwd", "bwd", "eval", "train", "f32", "bf16", "nhwc"}
    if words - known:
        sys.exit(f"bench_zoo: --configs: unknown word(s) {', '.join(sorted(words - known))} (of {', '.join(sorted(known))})")
    work = Path(args.work or tempfile.mkdtemp(prefix="bench-zoo-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    print(f"CPU: {cpu_line()}\nwork folder: {work}", flush=True)

    t0 = time.perf_counter()
    captures = []
    for model in models:
        for config in model.configs():
            if words <= set(config.name.split()):
                cap = capture(model, config)
                captures.append(cap)
                (work / "captures").mkdir(exist_ok=True)
                (work / "captures" / f"{model.name}-{config.name.replace(' ', '-')}.txt").write_text(
                    "".join(c + "\n" for c in cap.commands))
                print(f"  captured {model.name:18} {config.name:20} {len(cap.commands):3} commands "
                      f"{cap.seconds:5.1f} s{'  ' + cap.error if cap.error else ''}", flush=True)
    capture_s = time.perf_counter() - t0
    distinct = list(dict.fromkeys(c for cap in captures for c in cap.commands))
    print(f"{len(distinct)} distinct commands from {len(captures)} captures ({capture_s:.0f} s); compiling and "
          f"measuring them (log: {work / 'run.log'})", flush=True)
    t0 = time.perf_counter()
    outcomes = run_commands(distinct, work, args) if distinct else {}
    run_s = time.perf_counter() - t0
    lines = report(captures, outcomes, {"capture": capture_s, "run": run_s})
    print()
    print("\n".join(lines))
    if args.markdown:
        Path(args.markdown).write_text(f"CPU: {cpu_line()}\n\n" + "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
