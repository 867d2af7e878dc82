"""The `best` column: each kernel in the best known configuration for this machine, built our way (our export,
this machine's per-op default flags) in the formulation and with the changes that measured fastest HERE.

`best_variant(sig, target, tuned)` resolves the BEST marker for one kernel, in this order (the first that knows
the kernel wins; nothing measured on another CPU is used):

1. `tuned`: a finished `boo-tui tune`'s winner for this kernel, measured on this machine (the caller's lookup:
   the session reads the results database's tune tables; see store/tuned.py) -> "tune N";
2. the per-machine table `tune --defaults` measured (cpu_defaults/table.py, keyed by the resolved CPU and compiler):
   its flags are the class's per-op defaults already, its formulation and the flags that go with it (`best_flags`:
   data-tiling of the matmul formulation, or of a gemm, which tuning specs cannot take) are taken from here ->
   "table";
3. the built-in rules, keyed on the op class (cpu_defaults/rules.py: rule_build, BOO's own build where it is known
   to beat ours; rule_formulation; rule_flags through the per-op defaults) -> "rules".

BOO's build in the best column (a table's choice or a rule's) takes the flags a rule gives a class in any build
(`rule_reduction_flags`: reassociated sums for layer and batch norms). By rule, a plain kxk f32 forward conv on an
AVX-512 CPU is the matmul formulation, data-tiled for long dot products, unless it is a 3x3 one with short dot
products (`rule_conv_matmul`); a 2-D matmul is data-tiled where its right-hand operand is read transposed or it is
bf16 (`rule_data_tiled_gemm`), and so is a channels-last 1x1 f32 conv, whose filter is such an operand
(`rule_data_tiled_pointwise`); a conv's weight and bias gradients are summed reassociated
(`rule_reassociated_gradients`). None of these goes into the per-op flags that tuning specs are compiled with:
data-tiling leaves a matmul's spec nothing to match. And every kernel the best column builds our way on the CPU
(a tune's winner aside: its tiles are its own) takes aligned workgroup tiles (`Variant.aligned_tiles`,
`rule_aligned_distribution`): where IREE's workgroup tile of the root op is not a whole number of vector tiles, a
one-op spec written from a first compile pass makes it one (compile/aligned.py).

The result is a Variant named `best` (so job ids stay what they are) that says in `best` what chose it, and
builds the kernel our way (`base="ours"`) with that kernel's formulation and flags, or BOO's way where that is
the best known (`base="boo"`).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable

from ..cpu_defaults.machine import defaults_state, host_cpu
from ..cpu_defaults.rules import (
    DATA_TILING,
    MATMUL,
    REASSOCIATE,
    op_class,
    rule_build,
    rule_conv_matmul,
    rule_data_tiled_gemm,
    rule_data_tiled_pointwise,
    rule_formulation,
    rule_reassociated_gradients,
    rule_reduction_flags,
)
from ..ops.base import DEFAULT_FORMULATION, OpSignature
from ..targets import BOO_BUILD, OUR_BUILD, Target
from .common import BEST_NAME
from .variant import BEST, Variant

#: the marker of an unresolved best column (BEST.best)
UNRESOLVED = BEST.best

#: a finished tune's winner for a kernel on this machine (a Variant built our way), or None
TunedLookup = Callable[[OpSignature], "Variant | None"]


def is_unresolved(variant: Variant) -> bool:
    return variant.best == UNRESOLVED


def best_variant(sig: OpSignature, target: Target, tuned: TunedLookup | None = None) -> Variant:
    """The BEST column's variant for kernel `sig` on `target` (see the module docstring)."""
    winner = tuned(sig) if tuned is not None else None
    if winner is not None:
        return dataclasses.replace(winner, name=BEST_NAME, base=OUR_BUILD)
    form, chosen_by = best_formulation(sig, target)
    cls = op_class(sig)
    if form == BOO_BUILD:   # BOO's own build is the best known here, with the flags a rule gives every build
        extra = tuple(rule_reduction_flags(cls)) if target.kind == "cpu" else ()
        return Variant(name=BEST_NAME, base=BOO_BUILD, best=chosen_by, flags=extra)
    flags: tuple[str, ...] = ()
    aligned = target.kind == "cpu" and target.per_op_defaults   # our build: whole vector tiles per workgroup
    if chosen_by == "table":
        flags = _table_best_flags(str(cls), form)
    elif chosen_by == "rules" and target.kind == "cpu" and target.per_op_defaults:
        features = host_cpu().features
        matmul = rule_conv_matmul(cls, sig, features)
        if matmul is not None and sig.formulation_problem(MATMUL) is None:
            form, flags = MATMUL, matmul
        elif rule_data_tiled_gemm(sig, features) or rule_data_tiled_pointwise(cls, sig, features):
            flags = (DATA_TILING,)
        if rule_reassociated_gradients(cls):
            flags = (*flags, REASSOCIATE)
    func = sig.func_name
    return Variant(name=BEST_NAME, base=OUR_BUILD, best=chosen_by, flags=flags, aligned_tiles=aligned,
                   kernel_formulations=((func, form),) if form != DEFAULT_FORMULATION else ())


def _table_best_flags(cls: str, form: str) -> tuple[str, ...]:
    """The flags the machine's table gives the best column for class `cls` (with its formulation, or flags tuning
    specs cannot take), when the kernel is written as the table says (not where it lacks that formulation)."""
    state = defaults_state()
    return state.best_flags.get(cls, ()) if state.formulations.get(cls, form) == form else ()


def best_formulation(sig: OpSignature, target: Target) -> tuple[str, str]:
    """(formulation, or "boo" for BOO's own build; what chose it: "table" or "rules") of kernel `sig` for the best
    column. Rules apply to the cpu target only (their figures are CPU ones); a formulation the kernel lacks gives
    its default."""
    if target.kind != "cpu":
        return DEFAULT_FORMULATION, "rules"
    cls = op_class(sig)
    state = defaults_state() if target.per_op_defaults else None
    if state is not None and str(cls) in state.classes:
        if state.builds.get(str(cls)) == BOO_BUILD:
            return BOO_BUILD, "table"
        form = state.formulations.get(str(cls)) or rule_formulation(cls) or DEFAULT_FORMULATION
        chosen_by = "table"
    elif rule_build(cls) == BOO_BUILD:
        return BOO_BUILD, "rules"
    else:
        form, chosen_by = rule_formulation(cls) or DEFAULT_FORMULATION, "rules"
    if sig.formulation_problem(form) is not None:
        form = DEFAULT_FORMULATION
    return form, chosen_by
