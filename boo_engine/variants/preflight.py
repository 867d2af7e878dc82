"""Pre-flight: check everything a variant names before any compile, because every way of changing a kernel has a
SILENT failure mode in IREE 3.13 and a benchmark that quietly measures the baseline twice is worse than none.
A spec must parse, verify and have an entry point (specs.preflight_spec); several specs must link; substituted
files must parse and hold the executable they replace; flags must be options this iree-compile knows (a typo is
otherwise one compile error per kernel); a preprocess tool must be on PATH.

Where no iree-compile is installed (a GPU machine measuring a cache filled elsewhere) there is nothing to check
with and nothing will be compiled: every kernel must come prebuilt from the cache (compile.build), built where the
variant was pre-flighted, and one that is not there fails by name. The pre-flight is then skipped."""
from __future__ import annotations

import functools
import re
import shlex
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .. import iree_tools
from ..errors import VariantError
from .common import KINDS
from .linking import merged_spec_path
from .mlir_text import executable_name
from .specs import compiler_error, iree_opt, preflight_spec, spec_backend
from .variant import Variant

if TYPE_CHECKING:  # pragma: no cover
    from ..targets import Target


def check_named_kernels(variants: Sequence[Variant], func_names: Sequence[str]) -> list[str]:
    """The kernels a variant's per-kernel tables (or scope) name, against this run's kernels. A variant none of
    whose named kernels is in the run, and nothing else to change, would measure the baseline again under its
    name (a typo in `[v.kernels.NAME]` did, silently): VariantError, naming the nearest kernel of the run. Tables
    for kernels this run does not have, in a variant that does apply (a tuned.toml of a whole model, measured on
    one of its commands), are normal: one note line per variant, returned."""
    import dataclasses
    import difflib

    known = set(func_names)
    notes = []
    for v in variants:
        named = v.named_kernels
        missing = [n for n in named if n not in known]
        if not missing:
            continue
        near = difflib.get_close_matches(missing[0], sorted(known), n=1, cutoff=0.6)
        hint = f"; did you mean {near[0]}?" if near else ""
        rest = dataclasses.replace(v, kernels=(), kernel_flags=(), kernel_formulations=(), kernel_substitutions=())
        if len(missing) == len(named) and (rest.is_baseline or v.kernels):
            raise VariantError(f"variant {v.name}: kernels.{missing[0]} is not a kernel of this run and the variant "
                               f"changes nothing else, so it would measure the baseline again{hint}")
        notes.append(f"variant {v.name}: {len(missing)} of its {len(named)} per-kernel tables name kernels not in "
                     f"this run and are left unused: kernels.{missing[0]}{hint}")
    return notes


#: what iree-compile says of an empty module for ANY target it can build: not the target's fault
_EMPTY_MODULE_NOISE = ("does not contain a vm.module op", "does not provide any executable targets")


@functools.cache
def preflight_target(target: Target) -> None:
    """Can this iree-compile build for `target`? An empty module compiled with the target's flags answers in
    ~0.1 s (`Unknown ROCM target 'gfx9999'`), where the first kernel's compile answered after ~10 s of export and
    compile, once per job. TargetError, one line; nothing to check with where no compiler is installed."""
    import tempfile

    from ..errors import TargetError

    exe = iree_tools.find_tool("iree-compile")
    if exe is None:
        return
    with tempfile.TemporaryDirectory(prefix="boo-target-") as tmp:
        src = Path(tmp) / "empty.mlir"
        src.write_text("module {}\n")
        out = iree_tools.run_tool([exe, str(src), *target.compile_flags(), "-o", str(Path(tmp) / "x.vmfb")],
                                  error=TargetError)
    errors = [ln for ln in (out.stdout + out.stderr).splitlines()
              if "error:" in ln and not any(noise in ln for noise in _EMPTY_MODULE_NOISE)]
    if errors:
        raise TargetError(f"--target {target.name}: iree-compile cannot build for it: "
                          f"{iree_tools.first_error(errors[0])}")


def preflight_variant(v: Variant, target: Target | str | None = None) -> None:
    """Check everything a variant names before any compile: specs (and their linking, when several), the
    substituted files (exist, parse, hold the named executable), the flags (known to this iree-compile) and
    the preprocess tool (on PATH). With a `target`, a spec that only sets GPU configurations is refused for the
    cpu target and vice versa (it would match and then fail to compile, once per kernel). Raises VariantError
    naming the variant and the file."""
    if not iree_tools.compiler_here():
        return   # a cache-only machine: nothing is compiled here (module docstring)
    kind = None
    if target is not None:
        kind = (target if isinstance(target, str) else target.name).split(":", 1)[0].lower()
        kind = "cpu" if kind in ("cpu", "llvm-cpu", "host") else "gpu"
    try:
        for spec in v.tuning_specs:
            preflight_spec(spec)
            made_for = spec_backend(spec)
            if kind and made_for and made_for != kind:
                raise VariantError(f"tuning spec {spec}: sets #iree_{made_for}.lowering_config, written for "
                                   f"{made_for.upper()} targets, but the target is {target}")
        if len(v.tuning_specs) > 1:
            merged_spec_path(v.tuning_specs)
        for sub_kind, exe, path in [*v.substitutions, *((k, e, p) for _, k, e, p in v.kernel_substitutions)]:
            _preflight_substitution(sub_kind, exe, path)
        _preflight_flags([*v.flags, *(f for _, flags in v.kernel_flags for f in flags)])
        if v.preprocess:
            _preflight_preprocess(v.preprocess)
    except VariantError as e:
        msg = str(e)
        raise VariantError(msg if msg.startswith(f"variant {v.name}") else f"variant {v.name}: {msg}") from None


def _preflight_substitution(kind: str, exe: str, path: str) -> None:
    if kind not in KINDS:
        raise VariantError(f"substitution {path}: kind {kind!r} is not one of {', '.join(KINDS)}")
    try:
        text = Path(path).read_text(errors="replace")
    except OSError as e:
        raise VariantError(f"substituted {kind} {path}: {e.strerror or e}") from None
    if executable_name(text) != exe:
        raise VariantError(f"substituted {kind} {path}: holds no hal.executable @{exe}")
    proc = iree_tools.run_tool([iree_opt(), path], error=VariantError)
    if proc.returncode != 0:
        raise VariantError(f"substituted {kind} {path}: {compiler_error(proc.stderr)}")


@functools.lru_cache(maxsize=1)
def _known_compiler_options() -> frozenset[str]:
    exe = iree_tools.tool_path("iree-compile", VariantError)
    proc = iree_tools.run_tool([exe, "--help-list-hidden"], error=VariantError)
    return frozenset(re.findall(r"^\s{2,}(--?[A-Za-z0-9][\w.-]*)", proc.stdout, flags=re.M))


def _preflight_flags(flags: Sequence[str]) -> None:
    if not flags:
        return
    known = _known_compiler_options()
    for f in flags:
        if not f.startswith("-"):
            raise VariantError(f"flag {f!r} does not start with '-' (write --flag=value)")
        opt = f.split("=", 1)[0]
        bare = opt.lstrip("-")
        if bare in ("o", "compile-to", "compile-from", "output-format"):
            raise VariantError(f"flag {f}: the tool controls the output; remove it from the variant")
        if known and f"--{bare}" not in known and f"-{bare}" not in known:
            raise VariantError(f"flag {f}: iree-compile has no option {opt} (see iree-compile --help-hidden)")


def _preflight_preprocess(value: str) -> None:
    if value.startswith("builtin.module(") or value.startswith("func.func("):
        return  # a pass pipeline, checked by the compiler itself
    tool = shlex.split(value)[0] if value.strip() else ""
    if "/" in tool:
        raise VariantError(f"preprocess {value!r}: IREE looks the tool up on PATH and mangles paths; "
                           "put it on PATH and give its bare name")
    if not shutil.which(tool):
        raise VariantError(f"preprocess {value!r}: {tool} is not on PATH")
