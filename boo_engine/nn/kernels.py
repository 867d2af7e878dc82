"""The one place torch code calls our kernels: `run(sig, *tensors)`.

Everything in `boo_engine.nn` (the functional API, the modules, the torch.compile backend) goes through here, so
the rules are the same for all of them:

- **Which kernel**: the signature, built for the target of the tensors' device (`cpu` -> this host's CPU, a CUDA /
  ROCm tensor -> the detected GPU's target) with the variant in force: the one passed, else `use_variant(...)`'s,
  else `BOO_TUNING_SPEC_PATH`'s (as iree-boo-driver), else the kernels $BOO_KERNELS names: `best` (the default:
  each kernel in the best known configuration for this machine, variants/best.py, a finished tune's winner from
  the results database first) or `boo` (the kernel as iree-turbine's BOO builds it). A variant scoped to other
  kernels (a dispatch folder, a tuned file's per-kernel flags) leaves this kernel at the best known one.
- **Caches**: compiled kernels come from the content-addressed disk cache (a hit neither exports nor compiles);
  loaded launchables are kept in memory per (signature, target, variant) for the life of the process, so a call
  after the first costs the argument checks, the zero-copy hand-over and the copy of the results out.
- **Devices**: results come back on the device of the first tensor argument.
- **Accounting**: `record_calls()` collects per-kernel call counts and the wall time spent inside each kernel call;
  what `boo-tui model` breaks a model's time down with.
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from .. import locations
from ..cpu_defaults.rules import DATA_TILING
from ..errors import BooError
from ..locations import KERNELS_ENV, TUNING_SPEC_ENV
from ..ops.base import DEFAULT_FORMULATION, OpSignature
from ..runtime.launchable import Launchable, get_launchable
from ..targets import BOO_BUILD, Target, default_target, parse_target
from ..variants import BEST, Variant
from ..variants.best import best_variant, is_unresolved
from ..variants.parsing import parse_variant_arg, variant_from_env

if TYPE_CHECKING:
    from ..store.tuned import TunedLookup


class BooNNError(BooError, ValueError):
    """A call the nn layer cannot make (wrong dtype, device, shape or arguments): one line naming what is wrong."""


_variant_var: contextvars.ContextVar[Variant | None] = contextvars.ContextVar("boo_nn_variant", default=None)
_target_var: contextvars.ContextVar[Target | None] = contextvars.ContextVar("boo_nn_target", default=None)


def as_variant(variant: Variant | str | None) -> Variant | None:
    """A Variant from a Variant, a `--variant` string (`spec=tuned.mlir`, `name=flags=...`), or None."""
    if variant is None or isinstance(variant, Variant):
        return variant
    return parse_variant_arg(str(variant))


#: the kernels as iree-turbine's BOO builds them (its export, BOO's flags): `kernels="boo"`, $BOO_KERNELS=boo
BOO_KERNELS = Variant(name="boo", base=BOO_BUILD)
#: what `kernels=` (and $BOO_KERNELS) may name
KERNELS = {"best": BEST, "boo": BOO_KERNELS}


def kernels_variant(kernels: str | None = None) -> Variant:
    """The kernels a call gets when no variant is in force: `kernels` ("best" or "boo"), else $BOO_KERNELS's,
    else the best known ones. BooNNError (one line) for another name."""
    name = (kernels or locations.kernels_from_env() or "best").strip().lower()
    if name not in KERNELS:
        where = f"${KERNELS_ENV}" if not kernels else "kernels"
        raise BooNNError(f"{where}={name!r}: expected one of {', '.join(KERNELS)}")
    return KERNELS[name]


_env_variant: tuple[str | None, Variant | None] | None = None


def current_variant(variant: Variant | str | None = None) -> Variant:
    """The variant a kernel call uses: `variant`, else `use_variant`'s, else BOO_TUNING_SPEC_PATH's, else the
    kernels $BOO_KERNELS names (default: the best known kernels, resolved per kernel when it is built)."""
    global _env_variant
    v = as_variant(variant)
    if v is not None:
        return v
    v = _variant_var.get()
    if v is not None:
        return v
    raw = os.environ.get(TUNING_SPEC_ENV)
    if _env_variant is None or _env_variant[0] != raw:   # parsed (and the file checked) once per value
        _env_variant = (raw, variant_from_env())
    return _env_variant[1] or kernels_variant()


@contextlib.contextmanager
def use_variant(variant: Variant | str | None) -> Iterator[Variant | None]:
    """Every kernel call inside the block (functional API, modules, compiled models) uses `variant`."""
    v = as_variant(variant)
    token = _variant_var.set(v)
    try:
        yield v
    finally:
        _variant_var.reset(token)


@contextlib.contextmanager
def use_target(target: Target | str | None) -> Iterator[Target | None]:
    """Force the target kernels are built for inside the block (e.g. `cpu` with threads)."""
    t = target if target is None or isinstance(target, Target) else parse_target(target)
    token = _target_var.set(t)
    try:
        yield t
    finally:
        _target_var.reset(token)


_gpu_target: Target | None = None
_CPU = Target("cpu")


def target_for(device: torch.device) -> Target:
    """The target for tensors on `device`: the forced one, the host CPU, or the detected GPU's."""
    global _gpu_target
    forced = _target_var.get()
    if forced is not None:
        return forced
    if device.type == "cpu":
        return _CPU
    if device.type == "cuda":
        if _gpu_target is None:
            t = default_target()
            if t.kind == "cpu":
                raise BooNNError(f"tensors on {device} but no GPU target detected (pass use_target('cuda:sm_80'))")
            _gpu_target = t
        return _gpu_target
    raise BooNNError(f"tensors on {device}: boo kernels run on cpu and cuda/rocm devices only")


def tuning_aliases(sig: OpSignature) -> tuple[str, ...]:
    """Other kernels whose tuned settings fit this one: a conv with a fused activation is tuned as the plain conv
    `boo-tui capture` records and `boo-tui tune` tunes (the activation is an elementwise epilogue)."""
    if getattr(sig, "activation", ""):
        return (dataclasses.replace(sig, activation="").func_name,)   # type: ignore[type-var]
    return ()


_tuned: TunedLookup | None = None


def tuned_lookup() -> TunedLookup:
    """The best column's first source for torch's calls: a finished tune's winners measured on this machine,
    read (once per process, never written) from the results database $BOO_DB names (default ./boo-results.db)."""
    global _tuned
    if _tuned is None:
        from ..store.tuned import TunedLookup

        _tuned = TunedLookup(path=locations.db_path())
    return _tuned


def kernel_variant(sig: OpSignature, variant: Variant, target: Target | None = None) -> Variant:
    """`variant` as it applies to `sig`: the best known kernel (variants/best.py, resolved for `target`) for the
    best marker, and where `variant` is scoped to other kernels; per-kernel flags and formulations recorded under
    one of `tuning_aliases(sig)` carried over to sig's own name; a formulation the kernel does not have
    (`formulation=fwdconv` asks for backward convs written as forward ones: a model's forward convs have no such
    form) left out for this kernel rather than failing it."""
    name = sig.func_name
    aliases = tuning_aliases(sig)
    target = target or _CPU
    if is_unresolved(variant) or (variant.kernels and not any(n in variant.kernels for n in (name, *aliases))):
        return best_variant(sig, target, tuned_lookup() if target.kind == "cpu" else None)
    if _per_kernel_only(variant) and not any(n in variant.named_kernels for n in (name, *aliases)):
        # a tuned file's per-kernel tables name the kernels it changes: another kernel keeps the best known one
        # (it got the plain build, with nothing of the variant for it: a ResNet's stem-conv gradient 1.36 -> 3.5 ms)
        best = kernel_variant(sig, BEST, target)
        if variant.tuning_specs and best.base != BOO_BUILD:   # a winner that is a spec alone matches by content
            # (tuned without data-tiling: a data-tiled matmul leaves the spec nothing to match)
            best = dataclasses.replace(best, tuning_specs=variant.tuning_specs,
                                       flags=tuple(f for f in best.flags if f != DATA_TILING))
        return best
    form = variant.formulation_for(name)
    if form not in (None, DEFAULT_FORMULATION) and form not in sig.formulations():
        variant = dataclasses.replace(variant, formulation=None, kernel_formulations=tuple(
            (n, f) for n, f in variant.kernel_formulations if n != name))
    if not aliases:
        return variant
    have_flags = {n for n, _ in variant.kernel_flags}
    have_forms = {n for n, _ in variant.kernel_formulations}
    extra_flags = tuple((name, f) for n, f in variant.kernel_flags if n in aliases and name not in have_flags)
    extra_forms = tuple((name, f) for n, f in variant.kernel_formulations if n in aliases and name not in have_forms)
    if not (extra_flags or extra_forms):
        return variant
    return dataclasses.replace(variant, kernel_flags=variant.kernel_flags + extra_flags,
                               kernel_formulations=variant.kernel_formulations + extra_forms)


def _per_kernel_only(variant: Variant) -> bool:
    """A variant whose changes are all per kernel (what `boo-tui tune` writes: per-kernel tables beside a spec),
    with nothing that changes every kernel (flags, formulation, substitutions, preprocess, build, cache mode)."""
    return bool(variant.kernel_flags or variant.kernel_formulations or variant.kernel_substitutions) and not (
        variant.flags or variant.formulation is not None or variant.substitutions or variant.preprocess
        or variant.base is not None or variant.cache_mode is not None)


# ---- in-memory launchable cache ---------------------------------------------------------------------------

_launchables: dict[tuple[OpSignature, Target, Variant], tuple[Launchable, Variant]] = {}
_launch_lock = threading.Lock()


def launchable_for(sig: OpSignature, target: Target, variant: Variant) -> tuple[Launchable, Variant]:
    """The loaded kernel for (sig, target, variant) and the variant it was built with (the best known one where
    `variant` is the best marker or scoped to other kernels): compiled through the disk cache on first use, then
    kept in memory.
    Keyed by the variant as given: a spec file edited while the process runs is not seen (the disk cache,
    keyed by content, sees it in the next process)."""
    key = (sig, target, variant)
    hit = _launchables.get(key)
    if hit is not None:
        return hit
    with _launch_lock:
        hit = _launchables.get(key)
        if hit is None:
            v = kernel_variant(sig, variant, target)
            hit = (get_launchable(sig, target, v), v)
            _launchables[key] = hit
        return hit


def cached_launchables() -> int:
    """How many kernels this process holds loaded."""
    return len(_launchables)


def clear_launchables() -> None:
    """Drop the in-memory cache (the disk cache stays)."""
    with _launch_lock:
        _launchables.clear()


# ---- accounting ---------------------------------------------------------------------------------------------

@dataclass
class KernelTally:
    """Calls of one kernel and the wall time spent in them (argument hand-over and result copy included)."""

    sig: OpSignature
    variant: str
    calls: int = 0
    total_ns: int = 0


@dataclass
class CallLog:
    """What `record_calls()` saw: per (kernel, variant) tallies, in first-call order."""

    tallies: dict[tuple[str, str], KernelTally] = field(default_factory=dict)

    def add(self, sig: OpSignature, variant: str, ns: int) -> None:
        key = (sig.func_name, variant)
        t = self.tallies.get(key)
        if t is None:
            t = self.tallies[key] = KernelTally(sig, variant)
        t.calls += 1
        t.total_ns += ns

    def reset(self) -> None:
        self.tallies.clear()


_log_var: contextvars.ContextVar[CallLog | None] = contextvars.ContextVar("boo_nn_log", default=None)


@contextlib.contextmanager
def record_calls(log: CallLog | None = None) -> Iterator[CallLog]:
    """Tally every kernel call made inside the block (this thread / context)."""
    log = log if log is not None else CallLog()
    token = _log_var.set(log)
    try:
        yield log
    finally:
        _log_var.reset(token)


# ---- the call -----------------------------------------------------------------------------------------------

def run(sig: OpSignature, *tensors: torch.Tensor, variant: Variant | str | None = None,
        device: torch.device | None = None) -> torch.Tensor | tuple[torch.Tensor, ...]:
    """Call sig's kernel on `tensors` (as `sig.reference(*tensors)` would) and return its result(s) on `device`
    (default: the first tensor's device)."""
    if device is None:
        device = tensors[0].device if tensors else torch.device("cpu")
    launch, v = launchable_for(sig, target_for(device), current_variant(variant))
    log = _log_var.get()
    if log is None:
        out = launch(*tensors)
    else:
        t0 = time.perf_counter_ns()
        out = launch(*tensors)
        log.add(sig, v.name, time.perf_counter_ns() - t0)
    if device.type != "cpu":
        out = tuple(o.to(device) for o in out) if isinstance(out, tuple) else out.to(device)
    return out
