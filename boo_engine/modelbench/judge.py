"""`boo-tui model` numerics: is every output and gradient of iree_boo's column what eager torch computes?

Per tensor, the error is the relative L2 distance from eager's tensor, judged against a per-dtype tolerance
(TOLERANCES). That alone is unfair to a tensor that is zero in exact arithmetic: the gradient of a conv bias
before a training-mode batch norm (the norm subtracts the channel mean, so the bias cancels), of a linear before
a softmax whose sum is the loss (the softmax sums to one whatever its input). Both sides hold rounding noise
there (~1e-8 in float32), and the relative distance between two noises is O(1): a false "numerics fail".

So a tensor at rounding level is judged against its rounding noise instead, measured on the model itself
(`rounding_reference`):

* the exact value: the model run once more in float64 (a copy taken before any pass, same inputs, the random
  generator in eager's state);
* the noise a correct run has: that float64 run repeated NOISE_RUNS times under boo_engine/rounding.py's
  jitter_mode (every aten op's result rounded to the model's dtype, forward and backward, and the
  accumulation error of every sum of products, whatever its order). noise = max(RMS of ||run - exact||_2,
  eager's own ||eager - exact||_2).
* at rounding level: eager itself is off float64 by more than the tolerance (||eager - exact|| >= tol *
  ||exact||). Such a tensor passes when ||iree_boo - exact||_2 <= FLOOR_FACTOR * noise; every other tensor is
  judged by the tolerance alone, as before (the floor loosens nothing for an ordinary tensor).

Measured (2-core Xeon, float32, iree_boo vs float64 on tests/models/zero_grad_nets.py at batch 2-16 and
16x16-32x32): on the tensors at rounding level iree_boo's distance from
float64 is 0.05-0.19x the noise for the conv bias before batch norm (7e-6 at batch 16 x 32x32, 44x eager's own
1.6e-7: iree_boo sums in another order, which the accumulation term covers) and 0.9-1.24x for the linear before
softmax (eager's own noise sets it there); FLOOR_FACTOR 16 leaves 13x of margin. A wrong gradient stays far above
the floor: 1e-4 added to that conv bias's gradient reads 2.8e-4 against a floor of 1.2e-5.

The floors are off (and the note says why) when the float64 run cannot be made, or when eager and float64 differ
by more than the tolerance over all tensors together (a random op such as dropout: float64 is then no reference).
"""
from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..results import NumericsInfo, NumericsVerdict
from ..rounding import FLOOR_FACTOR, jitter_mode
from .bench import TOLERANCES, _one_pass, _snapshot

if TYPE_CHECKING:
    import torch

NOISE_RUNS = 3



@dataclass
class RoundingReference:
    """Per compared tensor: its float64 value and the L2 norm of the rounding noise a correct run has."""

    exact: dict[str, torch.Tensor] = field(default_factory=dict)
    noise: dict[str, float] = field(default_factory=dict)
    note: str | None = None     # why there are no floors


def copy_for_reference(model: torch.nn.Module) -> torch.nn.Module | None:
    """A float64 copy of `model` taken before any pass (or None: it cannot be copied)."""
    import torch

    try:
        return copy.deepcopy(model).to(torch.float64)
    except Exception:  # noqa: BLE001 - the user's model: no floors then
        return None


def _norm(t: torch.Tensor) -> float:
    import torch

    return float(torch.linalg.vector_norm(t.detach().to(torch.float64)))


def rounding_reference(model64: torch.nn.Module | None, inputs: Sequence[torch.Tensor], param_names: Sequence[str],
                       backward: bool, eager: dict[str, torch.Tensor], rng_state: torch.Tensor) -> RoundingReference:
    """Run `model64` (copy_for_reference) on `inputs` in float64, plain and jittered, seeding the generator with
    `rng_state` (eager's) each time; compare with `eager` (eager's snapshot). Never raises."""
    import torch

    if model64 is None:
        return RoundingReference(note="no float64 reference (the model cannot be copied): no rounding floors")
    dtypes = [t.dtype for t in eager.values() if t.is_floating_point()]
    u = max((torch.finfo(d).eps for d in dtypes), default=torch.finfo(torch.float32).eps) / 2
    before = torch.random.get_rng_state()
    try:
        x64 = [x.detach().to(torch.float64).requires_grad_(x.requires_grad) if x.is_floating_point() else x
               for x in inputs]
        params = dict(model64.named_parameters())
        named = [(n, params[n]) for n in param_names if n in params]

        def run() -> dict[str, torch.Tensor]:
            torch.random.set_rng_state(rng_state)
            out = _one_pass(model64, x64, [p for _, p in named], backward)()
            return _snapshot(out, x64, named, backward)

        exact = run()
        runs = []
        for k in range(NOISE_RUNS):
            with jitter_mode(u, seed=k + 1):
                runs.append(run())
    except Exception as e:  # noqa: BLE001 - the user's model: no floors, say why
        return RoundingReference(note=f"no float64 reference ({type(e).__name__}: "
                                      f"{(str(e).splitlines() or [''])[0][:160]}): no rounding floors")
    finally:
        torch.random.set_rng_state(before)
    common = [n for n in eager if n in exact and exact[n].shape == eager[n].shape]
    num = math.sqrt(sum(_norm(eager[n].to(torch.float64) - exact[n]) ** 2 for n in common))
    den = math.sqrt(sum(_norm(exact[n]) ** 2 for n in common)) or 1.0
    tol = min((TOLERANCES.get(str(d).removeprefix("torch."), 1e-4) for d in dtypes), default=1e-4)
    if not math.isfinite(num) or num / den > tol:
        return RoundingReference(note=f"eager differs from its float64 run by {num / den:.3g} > {tol:g} (a random "
                                      "op such as dropout?): no rounding floors")
    noise = {}
    for n in common:
        spread = [_norm(r[n] - exact[n]) for r in runs if n in r and r[n].shape == exact[n].shape]
        rms = math.sqrt(sum(s * s for s in spread) / len(spread)) if spread else 0.0
        noise[n] = max(rms, _norm(eager[n].to(torch.float64) - exact[n]))
    return RoundingReference(exact={n: exact[n].detach() for n in common}, noise=noise)


def compare_tensors(ref: dict[str, torch.Tensor], got: dict[str, torch.Tensor],
                    rounding: RoundingReference | None = None) -> NumericsInfo:
    """Relative L2 error of every tensor of `got` against `ref` (eager); the worst decides. With `rounding`, a
    tensor at rounding level (eager itself off float64 by more than the tolerance) is judged by its floor."""
    import torch

    errors: dict[str, float] = {}
    floored: dict[str, str] = {}
    failed: list[str] = []
    worst_name, worst_ratio, tol_of_worst = None, -1.0, None
    bound: dict[str, str] = {}
    missing = sorted(set(ref) - set(got))
    for name, r in ref.items():
        g = got.get(name)
        if g is None or g.shape != r.shape:
            continue
        r64, g64 = r.to(torch.float64), g.to(torch.float64)
        err = _norm(g64 - r64) / (_norm(r64) or 1.0)
        errors[name] = err
        tol = TOLERANCES.get(str(r.dtype).removeprefix("torch."), 1e-4)
        ratio = err / tol if math.isfinite(err) else math.inf
        exact = rounding.exact.get(name) if rounding is not None else None
        if rounding is not None and exact is not None and _norm(r64 - exact) >= tol * _norm(exact):
            floor = FLOOR_FACTOR * rounding.noise[name]
            off = _norm(g64 - exact)
            ratio = off / floor if floor > 0 else (0.0 if off == 0 else math.inf)
            bound[name] = f"|iree_boo - float64| {off:.3g} vs rounding floor {floor:.3g}"
            if ratio <= 1.0:
                floored[name] = _floor_note(name, r64, g64, exact, floor)
            else:
                failed.append(f"{name}: at rounding level (|float64| {_norm(exact):.2g}) but |iree_boo - float64| "
                              f"{off:.3g} > rounding floor {floor:.3g}")
        elif ratio > 1.0:
            failed.append(f"{name}: rel L2 err {err:.3g} > {tol:g}")
        if ratio > worst_ratio:
            worst_name, worst_ratio, tol_of_worst = name, ratio, tol
    ok = not missing and bool(errors) and worst_ratio <= 1.0
    stats: dict[str, Any] = {"compared": len(errors), "rel_l2_err": errors, "worst": worst_name,
                             "worst_rel_err": errors.get(worst_name or "", None), "tolerance": tol_of_worst,
                             "reference": "eager torch, same inputs and parameters"}
    if worst_name in bound:     # judged by its floor, not by the tolerance
        stats["worst_judged_by"] = bound[worst_name]
    if rounding is not None:
        stats["rounding_floor"] = (rounding.note or f"a tensor that eager itself computes off float64 by more than "
                                   f"the tolerance is judged against {FLOOR_FACTOR:g} x its rounding noise")
    if floored:
        stats["at_rounding_level"] = floored
    if failed:
        stats["reason"] = "; ".join(failed)
    if missing:
        stats["missing"] = missing
    return NumericsInfo(NumericsVerdict.PASS if ok else NumericsVerdict.FAIL, stats)


def _floor_note(name: str, eager: torch.Tensor, got: torch.Tensor, exact: torch.Tensor, floor: float) -> str:
    """Why `name` passed by the floor, in words."""
    e, g, x, off = _norm(eager), _norm(got), _norm(exact), _norm(got - exact)
    if x <= floor / FLOOR_FACTOR:     # the exact value is below the rounding noise itself
        return (f"{name}: zero in exact arithmetic (both sides at rounding level: |eager| {e:.2g}, |iree_boo| "
                f"{g:.2g}, |float64| {x:.2g}; |iree_boo - float64| {off:.2g} < floor {floor:.2g})")
    return (f"{name}: at rounding level (|float64| {x:.2g}, |eager| {e:.2g}, |iree_boo| {g:.2g}; "
            f"|iree_boo - float64| {off:.2g} < floor {floor:.2g})")
