"""The iree-compile flags of a kernel: what shapes the artifact (`compile_flags`, part of the cache key) and how
the compiler runs (`RUN_FLAGS`, kept out of the key)."""
from __future__ import annotations

from collections.abc import Callable, Sequence

from ..cpu_defaults.machine import per_op_default_flags
from ..ops.base import OpSignature
from ..targets import BOO_BUILD, Target, is_target_flag, parse_target
from ..variants import BASELINE, Variant


def as_target(target: Target | str) -> Target:
    return target if isinstance(target, Target) else parse_target(target)


def compile_flags(sig: OpSignature, target: Target, variant: Variant = BASELINE,
                  extra_flags: Sequence[str] = ()) -> list[str]:
    """Every iree-compile flag that shapes the artifact, in order: target, per-op-class defaults, variant,
    extra. Later flags win, so a variant can override a default (e.g. `--iree-opt-data-tiling=false`)."""
    return _flags(sig, target, variant, extra_flags, str)


def key_flags(sig: OpSignature, target: Target, variant: Variant = BASELINE,
              extra_flags: Sequence[str] = ()) -> list[str]:
    """`compile_flags` as the cache key sees them: the variant's own files (its tuning spec, its substituted
    dispatches, the kernel's own substituted ones) named by a placeholder instead of their path, since the key
    already holds their CONTENT (`Variant.key_material`). A tune's candidates written under another --out, or a
    variants file on another machine, then find the kernel built from the same text (a cache prepared here and
    measured on a GPU box). Flags from elsewhere (--flags, a kernel's flags) keep their paths: their files'
    content is not in the key."""
    return _flags(sig, target, variant, extra_flags, _placeholder)


def _placeholder(_path: str) -> str:
    return "<file>"


def kernel_build(target: Target, variant: Variant) -> str:
    """How `variant` builds its kernels for `target`: its own `base`, else the target's build."""
    return variant.base or target.build


def _flags(sig: OpSignature, target: Target, variant: Variant, extra_flags: Sequence[str],
           path_of: Callable[[str], str]) -> list[str]:
    own = variant.compile_flags(path_of) + variant.flags_for(sig.func_name, path_of) + list(extra_flags)
    if kernel_build(target, variant) == BOO_BUILD:
        # BOO's flags, verbatim: iree-compile detects the input (turbine's util/hal MLIR, or our torch-dialect
        # export where BOO has no such kernel), and no per-op default of ours is added
        return sig.required_compile_flags() + target.boo_flags() + own
    return (["--iree-input-type=torch"] + sig.required_compile_flags() + target.compile_flags()
            + per_op_default_flags(sig, target) + own)


#: How iree-compile runs, not what it builds (measured byte-identical vmfbs for cpu, gfx942 and sm_80): MLIR's
#: thread pool costs more than it gives on these one-op modules. 15 sample kernels one at a time: 5.9 s instead of
#: 6.8 s wall (and 5.9 s of CPU instead of 7.5 s); two at a time: 3.2 s instead of 3.5 s. Kept out of the cache key.
RUN_FLAGS = ("--mlir-disable-threading",)


#: flags of a compile command that are the machinery's, not a choice that shapes the kernel's speed
_MACHINERY = ("--iree-input-type=", "--iree-hal-dump-executable-configurations-to=")


def chosen_flags(command: Sequence[str]) -> list[str]:
    """The flags of an iree-compile command line (`CompileInfo.command`) beyond the target's own: the per-op
    defaults and the variant's flags (tuning spec, substitutions). Leaves out the compiler, the source, `-o` and
    its path, the target flags, the input type, the configurations dump and RUN_FLAGS."""
    out: list[str] = []
    args = iter(list(command)[1:])
    for arg in args:
        if arg == "-o":
            next(args, None)
        elif arg.startswith("-") and not (is_target_flag(arg) or arg.startswith(_MACHINERY) or arg in RUN_FLAGS):
            out.append(arg)
    return out


def run_flags(flags: Sequence[str]) -> list[str]:
    """RUN_FLAGS not already among `flags` (a flag given twice is an error for iree-compile)."""
    given = {f.split("=", 1)[0] for f in flags}
    return [f for f in RUN_FLAGS if f.split("=", 1)[0] not in given]
