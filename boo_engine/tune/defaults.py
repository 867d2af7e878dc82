"""`boo-tui tune --defaults FILE...`: which global compiler flags suit each op class on THIS machine.

The best per-op-class flags differ between CPUs (data-tiling makes a bf16 NHWC 1x1 conv 4x faster on a Zen 5 with
avx512bf16 and 28x slower on a Zen 3 without), so they are measured here rather than carried over:

1. The commands are grouped into op classes (`cpu_defaults.rules.op_class`), those `per_op_default_flags` serves.
2. Every command is compiled first (the compile pool, into the kernel cache) with IREE's plain defaults (a target
   with `per_op_defaults=False`: no table or rule of ours on the line, so a set's flags measure against plain
   IREE) and with each candidate: the flag sets im2col, data-tiling, im2col + data-tiling (im2col only for
   convs), aggressive fusion, split reduction and both (reductions: layer norms, batch norms, aten ops), and for
   convs the formulations matmul, fwdconv, matmul with data-tiling and (a data with a weight gradient) mixed:
   the kernel written another way, for the `best` column. A set that fails to compile for a command of the class
   is dropped for the class, with the compiler's first error line. A set that compiles to the same kernel as the
   plain one (the same dumped executables and configurations: im2col leaves backward and grouped convs alone,
   data-tiling leaves layer norms alone) is not measured: its effect is exactly none (noise must not win).
3. The distinct kernels are measured through the ordinary engine (one session, IREE only, interleaved rounds,
   every sample stored in the results database as a run like any other; numerics against the plain kernel's
   outputs: a set that fails them is dropped) and compared with compare.py per command.
4. A class's verdict for a set (`class_comparison`): the geometric mean of its commands' ratios, a conservative
   CI (the geomean of the commands' CI bounds), the commands' Mann-Whitney p-values combined (Fisher), decided
   by `compare.decide` with the run's --min-effect; a set that is significantly SLOWER on any command of the
   class is not FASTER for it. A set wins only when FASTER; among winners the fastest, unless one with fewer
   flags is not significantly slower than it (compared directly, by the same rule). Otherwise the class keeps
   IREE's plain default (stored as no flags).
5. A class's flags are the flag sets' winner. The `best` column's choice (variants/best.py) is the fastest of
   every candidate: a formulation is the class's `formulation` (its flags, e.g. data-tiling, the class's
   `best_flags`), a flag set or the plain kernel leave it "default" (which then beats the built-in rule on this
   machine), BOO's own build makes the class's `build` "boo", a best-only set gives the class's `best_flags`.
6. The winners are stored in the per-machine table (cpu_defaults/table.py) under this machine's resolved CPU and
   compiler version, merged with the classes measured before.

Data-tiling is never a gemm class's per-op flags, only its `best_flags` (best-only): with it IREE 3.13 cannot
apply a tuning spec to a matmul ("failed to build pass pipeline"), and tuning specs must keep working.
"""
from __future__ import annotations

import dataclasses
import datetime
import hashlib
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from .. import events as ev
from ..commands import Command, looks_like_commands_file, parse_invocation, read_commands_file, split_words
from ..compare import FASTER, SAME, SLOWER, UNCLEAR, Comparison, compare_measured, compare_samples, decide, geomean
from ..config import SessionConfig
from ..cpu_defaults.machine import host_cpu
from ..cpu_defaults.rules import DATA_TILING, IM2COL, OpClass, op_class
from ..cpu_defaults.table import machine_key, store_machine
from ..errors import BooError, CommandError, CompileError, elide
from ..hostcpu import HostCpu
from ..iree_tools import compiler_version, first_error
from ..locations import defaults_table
from ..markdown import format_us
from ..ops import FWDCONV, MATMUL, MIXED
from ..results import DONE, FAILED, IREE, JobResult
from ..targets import Target, parse_target
from ..variants import BASELINE, Variant
from .defaults_report import PLAIN, SAME_KERNEL, ClassResult, Outcome, print_table
from .space import AGGRESSIVE_FUSION, SPLIT_REDUCTION

PROG = "boo-tui tune --defaults"
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


@dataclass(frozen=True)
class ClassChoice:
    """A global flag set, or a formulation (how the kernel is written for export: ops/conv_forms.py), tried on
    every command of the classes it applies to."""

    name: str
    flags: tuple[str, ...]
    formulation: str | None = None
    base: str | None = None         # "boo": BOO's own build, measured for the `best` column

    def applies_to(self, cls: OpClass) -> bool:
        if self.base is not None:
            return True
        if self.formulation == MIXED:   # a data gradient with a weight gradient
            return cls.is_conv and cls.mode == "backward" and cls.detail.split("-")[0] == "all"
        if self.formulation is not None:
            return cls.is_conv
        if AGGRESSIVE_FUSION in self.flags or SPLIT_REDUCTION in self.flags:
            return not cls.is_conv and cls.op != "gemm"   # reductions and elementwise kernels
        return IM2COL not in self.flags or cls.is_conv

    def best_only(self, cls: OpClass) -> str | None:
        """Why this set may be the `best` column's choice for `cls` but never its per-op flags (which tuning specs
        are compiled with), or None."""
        if DATA_TILING in self.flags and cls.op == "gemm":
            return "breaks tuning specs on matmuls"
        return None


CANDIDATES = (ClassChoice("im2col", (IM2COL,)), ClassChoice("data-tiling", (DATA_TILING,)),
              ClassChoice("im2col+data-tiling", (IM2COL, DATA_TILING)),
              # what the tuner's whole-kernel stage tries on reductions (tune/space.py global_choices)
              ClassChoice("fusion", (AGGRESSIVE_FUSION,)), ClassChoice("split-reduction", (SPLIT_REDUCTION,)),
              ClassChoice("fusion+split", (AGGRESSIVE_FUSION, SPLIT_REDUCTION)),
              # the formulations, for the `best` column (the class's flags stay the flag sets' winner)
              ClassChoice("matmul", (), MATMUL), ClassChoice("fwdconv", (), FWDCONV),
              ClassChoice("matmul+data-tiling", (DATA_TILING,), MATMUL), ClassChoice("mixed", (), MIXED),
              # BOO's own build: where it is the fastest of all, the `best` column takes it for the class
              ClassChoice("boo", (), base="boo"))


@dataclass(frozen=True)
class Built:
    """One command compiled with one flag set: the kernel's fingerprint, or the compiler's first error line."""

    fingerprint: str | None = None
    error: str | None = None


def run_defaults(inputs: list[str], config: SessionConfig, *, out: TextIO | None = None) -> int:
    """Measure the op classes of `inputs` (commands files and command strings) with each candidate flag set on
    this machine's CPU, print a per-class table to `out`, store the winners in the per-machine defaults table.
    Returns 0 when done (also when no set won anywhere), 1 when nothing could be measured or the table cannot be
    written, 2 on usage errors (no or bad commands, a non-cpu target), 130 when interrupted (nothing stored).
    `out`: where the progress and the table go (default: sys.stderr at the time of the call)."""
    out = out if out is not None else sys.stderr
    try:
        if config.target is not None and parse_target(config.target).kind != "cpu":
            raise BooError(f"measures the CPU's defaults: --target {config.target} is not the cpu")
        commands = _read_inputs(inputs)
        if not commands:
            raise BooError("no commands: give a commands file (e.g. sample_commands.txt) or a quoted command")
    except BooError as e:
        print(f"{PROG}: error: {e}", file=out)
        return EXIT_USAGE
    classes: dict[OpClass, list[Command]] = {}
    for cmd in commands:
        classes.setdefault(op_class(cmd.signature), []).append(cmd)
    cpu = host_cpu()
    cfg = dataclasses.replace(config, target="cpu", backends=(IREE,), per_op_defaults=False, trials=True)
    print(f"{PROG}: {len(classes)} op classes, {len(commands)} commands on {cpu.label()}; candidates: "
          f"{PLAIN}, {', '.join(c.name for c in CANDIDATES)}", file=out)
    try:
        built = _compile_all(classes, cfg, out)
        results = _measure(commands, _variants(classes, built), cfg, out)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted: nothing stored", file=out)
        return EXIT_INTERRUPTED
    except BooError as e:
        print(f"{PROG}: error: {e}", file=out)
        return EXIT_FAILED
    decided = [_decide(cls, cmds, built, results, cfg.min_effect, seed=cfg.seed) for cls, cmds in classes.items()]
    print_table(decided, [c.name for c in CANDIDATES], out)
    return _store(decided, cpu, cfg, out)


def _read_inputs(inputs: Sequence[str]) -> list[Command]:
    """Every command of the inputs once (by kernel); a bad line or command is a usage error (CommandError)."""
    found: dict[str, Command] = {}
    for item in inputs:
        if looks_like_commands_file(item):
            cmds = read_commands_file(item)
        else:
            try:
                cmds = [parse_invocation(split_words(item))]
            except ValueError as e:  # an unbalanced quote (CommandError is a ValueError too, and says enough)
                raise e if isinstance(e, CommandError) else CommandError(f"{elide(item)!r}: {e}") from None
        for cmd in cmds:
            found.setdefault(cmd.signature.func_name, cmd)
    return list(found.values())


def _compile_all(classes: dict[OpClass, list[Command]], cfg: SessionConfig, out: TextIO
                 ) -> dict[tuple[str, str], Built]:
    """Compile every command with IREE's plain defaults and each candidate that applies to its class, in the
    pool, into the cache the session then measures from: {(func_name, set name): Built}."""
    from ..compile.cache import open_cache
    from ..compile.pool import CompilePool

    target = Target("cpu", threads=cfg.threads, per_op_defaults=False)
    jobs = [(c, v) for cls, cmds in classes.items() for c in cmds
            for v in [BASELINE] + [Variant(name=k.name, flags=k.flags, formulation=k.formulation, base=k.base)
                                   for k in CANDIDATES if k.applies_to(cls)]]
    print(f"  compiling {len(jobs)} kernels", file=out, flush=True)
    built: dict[tuple[str, str], Built] = {}
    with CompilePool(cfg.compile_workers, cfg.compile_timeout_s, open_cache(cfg.cache_dir)) as pool:
        futures = [(c.signature.func_name, v.name, pool.submit(c.signature, target, v)) for c, v in jobs]
        for func, name, future in futures:
            try:
                built[(func, name)] = Built(fingerprint=_fingerprint(future.result().configs_dir))
            except CompileError as e:
                built[(func, name)] = Built(error="compile failed: " + (first_error(e.stderr, limit=200)
                                                                        if e.stderr else str(e)))
    return built


def _fingerprint(configs_dir: str) -> str | None:
    """What a kernel is, for telling two flag sets apart: every dispatch's dumped executable and configuration."""
    h = hashlib.sha256()
    try:
        for p in sorted(Path(configs_dir).glob("*.mlir")):
            h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    except OSError:
        return None
    return h.hexdigest()


def _variants(classes: dict[OpClass, list[Command]], built: dict[tuple[str, str], Built]) -> list[Variant]:
    """The plain baseline, and each candidate scoped to the kernels where it compiled to a different kernel."""
    variants = [BASELINE]
    for cand in CANDIDATES:
        kernels = tuple(f for f in (c.signature.func_name for cmds in classes.values() for c in cmds)
                        if (b := built.get((f, cand.name))) is not None and b.error is None
                        and not _same_kernel(b, built.get((f, BASELINE.name))))
        if kernels:  # (kernels=() would mean every kernel)
            variants.append(Variant(name=cand.name, flags=cand.flags, kernels=kernels, formulation=cand.formulation,
                                    base=cand.base))
    return variants


def _same_kernel(a: Built | None, b: Built | None) -> bool:
    return a is not None and b is not None and a.fingerprint is not None and a.fingerprint == b.fingerprint


def _measure(commands: list[Command], variants: list[Variant], cfg: SessionConfig, out: TextIO
             ) -> dict[tuple[str, str], JobResult]:
    """Measure every command with every variant that applies; {(func_name, variant name): final JobResult}."""
    from ..session import Session

    cfg = dataclasses.replace(cfg, variants=variants)

    total = [0, 0]

    def listener(event: ev.Event) -> None:
        if isinstance(event, ev.JobFinished):
            total[0] += 1
            r = event.result
            what = f"median {format_us(r.stats.median_us)} us" if r.status == DONE and r.stats else \
                f"{r.status}: {first_error((r.error or '').replace(f'{r.func_name}: ', ''), limit=120)}"
            print(f"  [{total[0]}/{total[1]}] {r.func_name} [{r.variant}]: {what}", file=out, flush=True)

    with Session(cfg, listener) as session:
        ids: dict[tuple[str, str], str] = {}
        for cmd in commands:
            for job in session.add_command(list(cmd.tokens)):
                ids[(cmd.signature.func_name, job.variant)] = job.job_id
        total[1] = len(ids)
        session.start()
        session.wait()
        if session.failure:
            raise BooError(session.failure)
        return {key: session.jobs[job_id] for key, job_id in ids.items()}


def _job_error(r: JobResult | None) -> str | None:
    """None for a measured job with passing numerics, else why it cannot count (one line)."""
    if r is None:
        return "not measured"
    if r.status == FAILED:
        if r.compile is not None and r.compile.error:
            return "compile failed: " + first_error(r.compile.error, limit=200)
        return first_error(r.error or "failed", limit=200)
    if r.status != DONE or not r.samples_us:
        return str(r.status)
    if r.numerics is not None and r.numerics.failed:
        return f"numerics {r.numerics.verdict} against IREE's plain kernel"
    return None


def _decide(cls: OpClass, cmds: list[Command], built: dict[tuple[str, str], Built],
            results: dict[tuple[str, str], JobResult], min_effect: float, *, seed: int = 0) -> ClassResult:
    res = ClassResult(cls, [c.text for c in cmds])
    funcs = [c.signature.func_name for c in cmds]
    errors = {f: built.get((f, BASELINE.name), Built()).error or _job_error(results.get((f, BASELINE.name)))
              for f in funcs}
    kept = [f for f in funcs if errors[f] is None]
    res.skipped = [f"{f}: {errors[f]}" for f in funcs if f not in kept]
    plain = Outcome(PLAIN, ())
    res.outcomes.append(plain)
    if not kept:
        plain.error = errors[funcs[0]] if funcs else "no commands"
        return res
    base = {f: results[(f, BASELINE.name)] for f in kept}
    plain.geomean_us = geomean(_median(base[f]) for f in kept)
    for cand in CANDIDATES:
        if not cand.applies_to(cls):
            continue
        o = Outcome(cand.name, cand.flags, formulation=cand.formulation, best_only=cand.best_only(cls))
        res.outcomes.append(o)
        comps, medians = [], []
        for f in kept:
            b = built.get((f, cand.name), Built(error="not compiled"))
            if _same_kernel(b, built.get((f, BASELINE.name))):  # no effect to measure: exactly none
                m = _median(base[f])
                comps.append(Comparison(1.0, 1.0, 1.0, 1.0, SAME, len(base[f].samples_us), len(base[f].samples_us),
                                        m, m))
                medians.append(m)
                o.samples[f] = base[f].samples_us
                continue
            job = results.get((f, cand.name))
            o.error = b.error or _job_error(job)
            if o.error or job is None:
                break
            comps.append(compare_measured(base[f], job, paired=True, min_effect=min_effect))
            medians.append(_median(job))
            o.samples[f] = job.samples_us
        if o.error:
            continue
        if all(_same_kernel(built.get((f, cand.name)), built.get((f, BASELINE.name))) for f in kept):
            o.note = o.note or SAME_KERNEL
        o.comparison = class_comparison(comps, min_effect)
        o.geomean_us = geomean(medians)
    settle(res, min_effect, seed=seed)
    return res


def settle(res: ClassResult, min_effect: float, *, seed: int = 0) -> None:
    """A class's choices from its measured outcomes (the plain default first): the per-op flags are the flag sets'
    winner; the best column's is the fastest of every candidate (a formulation with its flags, BOO's build, a
    best-only set, or the class's flags, which then keep the default formulation)."""
    plain = res.outcomes[0]
    res.winner = choose([o for o in res.outcomes if o.formulation is None and o.name != "boo" and not o.best_only],
                        min_effect, seed=seed)
    overall = choose(res.outcomes, min_effect, seed=seed)
    res.boo_wins, res.best_choice = overall.name == "boo", overall.name
    res.best_flags = overall.flags if overall.formulation is not None or overall.best_only else ()
    if any(o.formulation is not None for o in res.outcomes):
        res.form_winner = overall if overall.formulation is not None else plain


def _median(r: JobResult | None) -> float:
    m = r.median_us if r is not None else None
    return math.nan if m is None else m


def class_comparison(comps: Sequence[Comparison], min_effect: float) -> Comparison:
    """One comparison for a class from its commands' (see the module docstring, step 4). With one command it is
    that command's comparison."""
    if len(comps) == 1:
        return comps[0]
    from scipy.stats import combine_pvalues

    ratio = geomean(c.ratio for c in comps)
    low, high = geomean(c.ci_low for c in comps), geomean(c.ci_high for c in comps)
    ps = [c.p_value for c in comps if math.isfinite(c.p_value)]
    p = float(combine_pvalues(ps, method="fisher").pvalue) if len(ps) == len(comps) else math.nan
    verdict = decide(ratio, low, high, p, min_effect=min_effect)
    if verdict == FASTER and any(c.verdict == SLOWER for c in comps):
        verdict = UNCLEAR  # faster on some shapes, slower on others: not a default for the class
    return Comparison(ratio, low, high, p, verdict, sum(c.n_baseline for c in comps),
                      sum(c.n_variant for c in comps), geomean(c.baseline_median_us for c in comps),
                      geomean(c.variant_median_us for c in comps))


def choose(outcomes: list[Outcome], min_effect: float, *, seed: int = 0) -> Outcome:
    """The plain default (outcomes[0]) unless a set is FASTER than it (and eligible). Then the fastest of those,
    unless a winner with fewer flags is not significantly slower than it (the two compared directly, sample for
    sample, by the same class rule): a flag earns its place only by a measured gain."""
    winners = sorted((o for o in outcomes[1:] if o.comparison is not None and o.comparison.verdict == FASTER
                      and not o.note), key=lambda o: o.comparison.ratio if o.comparison else math.inf)
    if not winners:
        return outcomes[0]
    best = winners[0]
    for simpler in sorted(winners[1:], key=lambda o: len(o.flags)):
        if len(simpler.flags) >= len(best.flags) or set(simpler.samples) != set(best.samples):
            continue
        vs = class_comparison([compare_samples(simpler.samples[f], best.samples[f], min_effect=min_effect, seed=seed)
                               for f in simpler.samples], min_effect)
        if vs.verdict != FASTER:  # the extra flags bring no significant gain
            return simpler
    return best


def _store(decided: list[ClassResult], cpu: HostCpu, cfg: SessionConfig, out: TextIO) -> int:
    classes = {str(r.cls): r.entry() for r in decided if r.winner is not None}
    if not classes:
        print(f"{PROG}: nothing measured: no table written", file=out)
        return EXIT_FAILED
    path = defaults_table()
    if path is None:
        print(f"{PROG}: CPU defaults tables are switched off ($BOO_DEFAULTS_TABLE): nothing stored", file=out)
        return EXIT_OK
    version = cpu.compiler_version
    if version is None:
        version = compiler_version()
    key = machine_key(cpu.machine_key, version)
    entry = {"cpu": cpu.name, "features": cpu.key_features, "compiler_version": version,
             "measured_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
             "min_effect": cfg.min_effect, "threads": cfg.threads, "classes": classes}
    try:
        written, warning = store_machine(key, entry, path)
    except (OSError, ValueError) as e:
        print(f"{PROG}: error: cannot write the CPU defaults table {path}: {e}", file=out)
        return EXIT_FAILED
    if warning:
        print(f"{PROG}: warning: {warning}", file=out)
    print(f"\n{PROG}: stored {len(classes)} op classes in {written} (machine {cpu.machine_key}); later cpu runs "
          "on this machine and compiler use them", file=out)
    return EXIT_OK
