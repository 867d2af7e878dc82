"""Is a kernel's output right? BOO's statistical criteria against a float64 reference, plus max errors.

Why statistical and not allclose: a correct low-precision kernel differs from the exact result by rounding noise
whose size depends on the op (reduction length, dtype). So the yardstick is eager torch in the KERNEL's dtype:
its error against float64 tells how much noise a correct kernel has. Per output, with signed errors
err = kernel - reference:

* |mean(err)|  <= 1e-5 + 0.2 * std(err)            (no bias: errors average out)
* std(err)     <= 1e-5 + 1.2 * std(torch err)       (no noisier than torch in the same dtype, within 20%)
* NaN where and only where the reference has NaN

One deliberate difference from BOO: the bias test gets a sampling allowance of 3*std/sqrt(n). BOO's bare
0.2*std bound assumes big outputs; on a 16-element output (a layernorm weight gradient, a conv bias gradient)
a perfectly unbiased kernel exceeds it ~40% of the time by chance. For outputs of 10^4+ elements the allowance
is below 0.03*std, i.e. BOO's test.

plus a structured test (every input zero except one block of ones), which catches indexing bugs that random
data hides, compared with eager torch in the same dtype within a few ulps.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from .ops.base import OpSignature
from .results import NumericsInfo

MEAN_ABS_TOL = 1e-5
MEAN_STD_FACTOR = 0.2
MEAN_SAMPLING_Z = 3.0
STD_ABS_TOL = 1e-5
STD_TORCH_FACTOR = 1.2
#: relative tolerance of the structured test, per dtype (a few ulps: exact-integer sums, different orders)
STRUCTURED_RTOL = {torch.float32: 1e-5, torch.float16: 1e-2, torch.bfloat16: 3e-2, torch.float64: 1e-10}


def _as_tuple(x: torch.Tensor | Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
    return (x,) if isinstance(x, torch.Tensor) else tuple(x)


def _f64(args: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
    """float64 copies of the floating-point arguments; integer and bool arguments (indices, masks) as they are."""
    return tuple(a.detach().cpu().to(torch.float64) if a.is_floating_point() else a.detach().cpu() for a in args)


def numerics_verdict(sig: OpSignature, args: Sequence[torch.Tensor],
                     outputs: torch.Tensor | Sequence[torch.Tensor], *,
                     reference_outputs: torch.Tensor | Sequence[torch.Tensor] | None = None) -> NumericsInfo:
    """Judge `outputs` (what the kernel returned for `args`). Pure: only eager torch runs.

    The reference is `sig.reference` on float64 copies of `args`, or `reference_outputs` when given (e.g. the
    baseline kernel's outputs when judging a variant). The noise yardstick is always eager torch in the args'
    dtype against the float64 reference."""
    args = tuple(a.detach().cpu() for a in args)
    outs = _as_tuple(outputs)
    with torch.no_grad():
        exact = _as_tuple(sig.reference(*_f64(args)))
        ref = exact if reference_outputs is None else _f64(_as_tuple(reference_outputs))
        torch_low = _as_tuple(sig.reference(*args))
    per_output: list[dict[str, Any]] = []
    reasons: list[str] = []
    if len(outs) != len(ref):
        reasons.append(f"kernel returned {len(outs)} outputs, the reference {len(ref)}")
    for i, (k, r, t, e) in enumerate(zip(outs, ref, torch_low, exact)):
        st, why = _judge_output(k, r, t, e)
        st["index"] = i
        per_output.append(st)
        reasons += [f"output {i}: {w}" for w in why]
    stats: dict[str, Any] = {
        "outputs": per_output,
        "reference": "float64" if reference_outputs is None else "given",
        "criteria": f"|mean err| <= {MEAN_ABS_TOL:g} + {MEAN_STD_FACTOR:g}*std(err) + {MEAN_SAMPLING_Z:g}*std/sqrt(n); "
                    f"std(err) <= {STD_ABS_TOL:g} + {STD_TORCH_FACTOR:g}*std(torch {sig.dtype_name} err); NaN match",
        "max_abs_err": max((o["max_abs_err"] for o in per_output), default=math.nan),
        "max_rel_err": max((o["max_rel_err"] for o in per_output), default=math.nan),
    }
    if reasons:
        stats["reason"] = "; ".join(reasons)
    return NumericsInfo(verdict="fail" if reasons else "pass", stats=stats)


def _judge_output(kernel: torch.Tensor, ref: torch.Tensor, torch_low: torch.Tensor,
                  exact: torch.Tensor) -> tuple[dict[str, Any], list[str]]:
    st: dict[str, Any] = {"shape": list(kernel.shape), "dtype": str(kernel.dtype).replace("torch.", "")}
    if tuple(kernel.shape) != tuple(ref.shape):
        st.update(max_abs_err=math.inf, max_rel_err=math.inf)
        return st, [f"shape {tuple(kernel.shape)} != reference {tuple(ref.shape)}"]
    k = kernel.detach().cpu().to(torch.float64)
    # integer / bool results (argmax, masks) are compared as numbers: a correct kernel's errors are all 0
    ref, exact = ref.to(torch.float64), exact.to(torch.float64)
    t_err = torch_low.detach().cpu().to(torch.float64) - exact
    nan_k, nan_r = torch.isnan(k), torch.isnan(ref)
    why: list[str] = []
    if not torch.equal(nan_k, nan_r):
        why.append(f"NaN mismatch ({int(nan_k.sum())} NaN in kernel, {int(nan_r.sum())} in reference)")
    ok = ~(nan_k | nan_r)
    err = (k - ref)[ok]
    t_err = t_err[ok & ~torch.isnan(t_err)]
    n = err.numel()
    mean = float(err.mean()) if n else 0.0
    std = float(err.std(unbiased=False)) if n else 0.0
    t_std = float(t_err.std(unbiased=False)) if t_err.numel() else 0.0
    max_abs = float(err.abs().max()) if n else 0.0
    scale = float(ref[ok].abs().max()) if n else 0.0
    st.update(n=n, mean_err=mean, std_err=std, torch_std_err=t_std, max_abs_err=max_abs,
              max_rel_err=max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else math.inf),
              ref_max_abs=scale)
    mean_bound = MEAN_ABS_TOL + MEAN_STD_FACTOR * std + (MEAN_SAMPLING_Z * std / math.sqrt(n) if n else 0.0)
    st["mean_err_bound"] = mean_bound
    if not math.isfinite(mean) or abs(mean) > mean_bound:
        why.append(f"biased: mean err {mean:.3g} > bound {mean_bound:.3g} ({MEAN_ABS_TOL:g} + "
                   f"{MEAN_STD_FACTOR:g}*std {std:.3g} + sampling allowance, n={n})")
    if not math.isfinite(std) or std > STD_ABS_TOL + STD_TORCH_FACTOR * t_std:
        why.append(f"noisy: std err {std:.3g} > {STD_ABS_TOL:g} + {STD_TORCH_FACTOR:g}*torch std {t_std:.3g}")
    return st, why


def structured_args(sig: OpSignature) -> tuple[torch.Tensor, ...]:
    """Every input zero except one block of ones: the leading half (rounded up) of every dimension."""
    out = []
    for shape, dt in zip(sig.input_shapes(), sig.input_dtypes()):
        t = torch.zeros(shape, dtype=dt)
        t[tuple(slice(0, (d + 1) // 2) for d in shape)] = 1
        out.append(t)
    return tuple(out)


def structured_verdict(sig: OpSignature, args: Sequence[torch.Tensor],
                       outputs: torch.Tensor | Sequence[torch.Tensor]) -> dict[str, Any]:
    """Kernel vs eager torch in the same dtype on structured inputs, within a few ulps."""
    with torch.no_grad():
        expect = _as_tuple(sig.reference(*args))
    outs = _as_tuple(outputs)
    rtol = STRUCTURED_RTOL.get(sig.dtype, 1e-2)
    worst, ok = 0.0, len(outs) == len(expect)
    for k, e in zip(outs, expect):
        k64, e64 = k.detach().cpu().double(), e.detach().cpu().double()
        if k64.shape != e64.shape:
            ok = False
            continue
        scale = max(1.0, float(e64.nan_to_num(0.0).abs().max()) if e64.numel() else 1.0)
        diff = (k64 - e64).abs().nan_to_num(0.0)
        worst = max(worst, float(diff.max()) / scale if diff.numel() else 0.0)
        ok = ok and torch.equal(torch.isnan(k64), torch.isnan(e64)) and bool(
            torch.allclose(k64, e64, rtol=rtol, atol=rtol * scale, equal_nan=True))
    return {"pass": ok, "max_err_rel_to_scale": worst, "rtol": rtol}


def check_numerics(sig: OpSignature, target: Any = "cpu", variant: Any = None, *, seed: int = 0,
                   cache: Any = None) -> NumericsInfo:
    """Compile (through the cache), run on random and structured inputs, judge. Raises CompileError or
    LaunchError when the kernel cannot be built or loaded here."""
    from .runtime.launchable import get_launchable

    kernel = get_launchable(sig, target, variant, cache=cache)
    args = sig.get_sample_args(seed)
    info = numerics_verdict(sig, args, kernel(*args))
    sargs = structured_args(sig)
    structured = structured_verdict(sig, sargs, kernel(*sargs))
    info.stats["structured"] = structured
    if not structured["pass"]:
        info.verdict = "fail"
        reason = (f"structured test: off by {structured['max_err_rel_to_scale']:.3g} of scale "
                  f"(rtol {structured['rtol']:g})")
        info.stats["reason"] = "; ".join(filter(None, [info.stats.get("reason"), reason]))
    return info
