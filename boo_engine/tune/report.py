"""What a tune leaves in its output folder:

- `tuned.mlir`: one tuning spec with an entry for every kernel whose winner set tile sizes, each commented with
  the kernel, its command, the op's shape, the measured ratio with its CI, the machine and the IREE version;
- `tuned.toml`: a variants file defining the variant `tuned`: that spec plus the flags (and formulation) each
  improved kernel won, as per-kernel tables, so `--variants-file DIR/tuned.toml` measures exactly what won;
- `tuned.<kernel>.mlir`: on cuda, whose pipeline ignores tuning specs in IREE 3.13, a winner's tile sizes are
  its configured dispatch, substituted for that kernel only (`substitute_sources` in its table of tuned.toml);
- `report.md`: per kernel the baseline, the best, the ratio and CI, the candidates tried and what won.
Files are written atomically; a kernel that found nothing better keeps the default (no entry).
"""
from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..compare import geomean, next_run_interval
from ..fsutil import atomic_write
from ..variants.root_op import RootOp
from ..variants.tile_spec import SpecEntry, spec_module, symbol
from .records import (
    COMPILE_FAILED,
    DUPLICATE,
    FAILED,
    IMPROVED,
    MEASURED,
    NOT_APPLIED,
    NUMERICS_FAILED,
    Tried,
    TunedKernel,
)

SPEC_FILE, VARIANTS_FILE, REPORT_FILE = "tuned.mlir", "tuned.toml", "report.md"
#: the flag a no-winner tuned.toml names: the compiler's own default (O2 is NOT: it builds other gemm kernels)
DEFAULT_OPT_LEVEL = "--iree-opt-level=O0"
#: a cuda winner's configured dispatch: tuned.<func_name>.mlir
DISPATCH_PREFIX = "tuned."


def machine_line(env: Mapping[str, Any]) -> str:
    cpu = env.get("cpu_name") or env.get("cpu") or "unknown CPU"
    feats = env.get("cpu_features")
    if isinstance(feats, (list, tuple)):
        feats = " ".join(str(f) for f in feats)
    parts = [str(env.get("host") or "?"), str(cpu)]
    if feats:
        parts.append(str(feats))
    if env.get("gpu"):
        parts.append(f"GPU {env.get('gpu')} ({env.get('gpu_arch') or '?'})")
    return ", ".join(parts)


def compiler_line(env: Mapping[str, Any]) -> str:
    return str(env.get("iree_compile_version") or "iree-compile (version unknown)").splitlines()[0]


def write_outputs(out_dir: str | Path, kernels: Mapping[str, TunedKernel], env: Mapping[str, Any], *,
                  target: str, settings: Mapping[str, Any]) -> list[Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    improved = [k for k in kernels.values() if k.status == IMPROVED and k.best is not None]
    entries = [_entry(k, env) for k in improved if k.best is not None and k.best.params.get("tiles")]
    spec_entries = [e for e in entries if e is not None]
    if spec_entries:
        header = (f"boo-tui tune: the configurations that were significantly faster on {machine_line(env)}",
                  f"with {compiler_line(env)}, target {target}. Tile sizes are machine-specific: re-tune on",
                  "another CPU or GPU. Each entry matches its op exactly (types, indexing maps, every loop size).")
        atomic_write(out / SPEC_FILE, spec_module(spec_entries, header=header))
        written.append(out / SPEC_FILE)
    elif (out / SPEC_FILE).exists():
        (out / SPEC_FILE).unlink()   # a stale spec from an earlier tune must not be picked up by tuned.toml
    for old in out.glob(f"{DISPATCH_PREFIX}*.mlir"):   # likewise a stale substituted dispatch
        old.unlink()
    dispatches: dict[str, tuple[str, str]] = {}
    for k in improved:
        sub = _substituted(k)
        if sub is not None:
            name = f"{DISPATCH_PREFIX}{k.func_name}.mlir"
            atomic_write(out / name, sub[1])
            written.append(out / name)
            dispatches[k.func_name] = (sub[0], name)
    atomic_write(out / VARIANTS_FILE, variants_toml(improved, has_spec=bool(spec_entries), env=env, target=target,
                                                    dispatches=dispatches))
    written.append(out / VARIANTS_FILE)
    atomic_write(out / REPORT_FILE, report_md(kernels, env, target=target, settings=settings))
    written.append(out / REPORT_FILE)
    return written


def _entry(k: TunedKernel, env: Mapping[str, Any]) -> SpecEntry | None:
    best = k.best
    if best is None or not best.spec:
        return None
    start = best.spec.find("#iree_codegen.compilation_info<")
    end = best.spec.find(" -> !transform.any_param", start)
    root = _root_from(k, best)
    if start < 0 or end < 0 or root is None:
        return None
    comment = (f"{k.func_name}", f"  {k.command}",
               f"  op {root.op_name} loops {'x'.join(str(b) for b in root.bounds)} ({'/'.join(root.elem_types)}); "
               f"{best.description}",
               f"  measured {k.ratio:.3f}x [{k.ci_low:.3f}, {k.ci_high:.3f}] of the default ({k.baseline_us:.1f} us"
               f" -> {k.best_us:.1f} us; a new session: {_next(k)}) on {machine_line(env)}, {compiler_line(env)}")
    return SpecEntry(symbol(f"match_{k.func_name}"), root, best.spec[start:end], comment)


def _substituted(k: TunedKernel) -> tuple[str, str] | None:
    """(executable, configured source) of a winner that is a substituted dispatch (cuda), else None."""
    best = k.best
    if best is None or not best.spec or "hal.executable" not in best.spec:
        return None
    root = best.params.get("root")
    exe = root.get("dispatch") if root else None
    return (str(exe), best.spec) if exe else None


def _root_from(k: TunedKernel, best: Tried) -> RootOp | None:
    """The winner's root op, rebuilt from its own spec's matcher inputs (stored with the candidate)."""
    r = best.params.get("root")
    if not r:
        return None
    return RootOp(dispatch=r.get("dispatch", ""), op_name=r["op"], kind=r["kind"], maps=tuple(r["maps"]),
                  iterators=tuple(r["iterators"]), bounds=tuple(r["bounds"]),
                  elem_types=(r["types"][0], r["types"][1], r["types"][2]))


def variants_toml(improved: list[TunedKernel], *, has_spec: bool, env: Mapping[str, Any], target: str,
                  dispatches: Mapping[str, tuple[str, str]] | None = None) -> str:
    """`dispatches`: kernel -> (executable, file in the output folder) substituted for that kernel only."""
    dispatches = dispatches or {}
    lines = [f"# boo-tui tune: the variant `tuned` = what won on {machine_line(env)},",
             f"# {compiler_line(env)}, target {target}. Measure it: boo-tui FILE --variants-file tuned.toml",
             "[tuned]"]
    if has_spec:
        lines.append(f'specs = ["{SPEC_FILE}"]')
    per_kernel = []
    for k in improved:
        best = k.best
        if best is None:
            continue
        flags = list(best.params.get("flags") or [])
        form = best.params.get("formulation")
        if flags or form or k.func_name in dispatches:
            per_kernel.append((k.func_name, flags, form))
    if not has_spec and not per_kernel:
        lines.append("# nothing was significantly faster: this variant is the compiler's default")
        # a variant must define something: the opt level IREE 3.13 compiles at by default, O0 (measured: the same
        # configurations as no flag, for cuda and cpu gemms and a cpu conv; O2 changes the gemms' kernels)
        lines.append(f"flags = [{json.dumps(DEFAULT_OPT_LEVEL)}]")
    for func, flags, form in per_kernel:
        lines.append("")
        lines.append(f'[tuned.kernels."{func}"]')
        if flags:
            lines.append("flags = [" + ", ".join(json.dumps(f) for f in flags) + "]")
        if form:
            lines.append(f"formulation = {json.dumps(form)}")
        if func in dispatches:
            exe, file = dispatches[func]
            lines.append(f"substitute_sources = {{{json.dumps(exe)} = {json.dumps(file)}}}")
    return "\n".join(lines) + "\n"


def report_md(kernels: Mapping[str, TunedKernel], env: Mapping[str, Any], *, target: str,
              settings: Mapping[str, Any]) -> str:
    ks = list(kernels.values())
    improved = [k for k in ks if k.status == IMPROVED and k.ratio]
    ratios = [k.ratio if k.status == IMPROVED and k.ratio else 1.0 for k in ks if k.baseline_us]
    lines = ["# boo-tui tune report", "",
             f"- machine: {machine_line(env)}", f"- compiler: {compiler_line(env)}", f"- target: {target}",
             f"- budget: {settings.get('budget')} candidates per kernel, seed {settings.get('seed')}, "
             f"min effect {float(settings.get('min_effect') or 0) * 100:g}%",
             f"- kernels: {len(ks)}, improved {len(improved)}; geomean time vs the default "
             f"{geomean(ratios):.3f}x" if ratios else f"- kernels: {len(ks)}", "",
             "| kernel | default us | tuned us | ratio | 95% CI | a new session | tried | compiled | measured "
             "| outcome |",
             "|---|---:|---:|---:|---|---|---:|---:|---:|---|"]
    for k in ks:
        tried = k.tried
        compiled = sum(1 for t in tried if t.status != COMPILE_FAILED)
        measured = sum(1 for t in tried if t.status == MEASURED)
        ci = f"[{k.ci_low:.3f}, {k.ci_high:.3f}]" if k.ci_low is not None and k.ci_high is not None else ""
        tuned = f"{k.best_us:.1f}" if k.status == IMPROVED and k.best_us else ""
        ratio = f"{k.ratio:.3f}" if k.status == IMPROVED and k.ratio else ""
        base = f"{k.baseline_us:.1f}" if k.baseline_us else ""
        outcome = k.message.replace("|", "/") or k.status
        nxt = _next(k) if k.status == IMPROVED and k.ratio else ""
        lines.append(f"| `{k.func_name}` | {base} | {tuned} | {ratio} | {ci} | {nxt} | {len(tried)} | {compiled} | "
                     f"{measured} | {outcome} |")
    lines += ["", "Candidates left out, by reason (pruned by trying): " + ", ".join(
        f"{kind} {sum(1 for k in ks for t in k.tried if t.status == kind)}"
        for kind in (COMPILE_FAILED, NOT_APPLIED, NUMERICS_FAILED, FAILED, DUPLICATE)), ""]
    return "\n".join(lines)


def _next(k: TunedKernel) -> str:
    """Where a new session should measure the winner (compare.next_run_interval), as printed."""
    if k.ratio is None or k.ci_low is None or k.ci_high is None:
        return ""
    lo, hi = next_run_interval(k.ratio, k.ci_low, k.ci_high)
    return f"[{lo:.3f}, {hi:.3f}]" if math.isfinite(lo) else ""
