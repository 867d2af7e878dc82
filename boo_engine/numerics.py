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

An output at rounding level (zero in exact arithmetic, e.g. a cancellation, where eager torch may even be lucky
and exact) is not judged against torch's noise: when the bias or noise test fails and the output's RMS is below the
rounding noise that boo_engine/rounding.py simulates for the op (operands rounded, sums of products accumulated in
any order), it passes when |mean err| and std(err) are within FLOOR_FACTOR (16) times that noise. An ordinary
output is far above its noise (float32 gemm 64x128x96: RMS 2e5x the noise), so BOO's test is unchanged for it. A
gemm whose products cancel in pairs (exact output 0), scaled by 100 and summed in another order than torch's,
reads std err 0.012 against torch's lucky 0.002: a false "noisy" before; its noise is 0.54, so it passes.

plus a structured test (every input zero except one block of ones), which catches indexing bugs that random
data hides, compared with eager torch in the same dtype within a few ulps.

As BOO, errors are pooled over as many seeds as it takes for the main output (output 0) to give
`min_samples` (1000) of them, and every number above is a `NumericsCriteria` field that boo-driver's BOO flags
(`--numerics-{mean,stddev}-{atol,rtol}`, `--numerics-min-samples`, `--numerics-reference-dtype`,
`--skip-structured-tests`) change. Unlike BOO, every output is judged, not only the main one.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Required, TypedDict

import torch

from .ops.base import OpSignature
from .results import NumericsCriteria, NumericsInfo, NumericsVerdict
from .rounding import FLOOR_FACTOR, jitter_mode

if TYPE_CHECKING:
    from .compile.cache import KernelCache
    from .targets import Target
    from .variants import Variant

DEFAULT_CRITERIA = NumericsCriteria()
MEAN_ABS_TOL = DEFAULT_CRITERIA.mean_atol
MEAN_STD_FACTOR = DEFAULT_CRITERIA.mean_rtol
MEAN_SAMPLING_Z = 3.0
STD_ABS_TOL = DEFAULT_CRITERIA.stddev_atol
STD_TORCH_FACTOR = DEFAULT_CRITERIA.stddev_rtol
REFERENCE_DTYPES = {"float64": torch.float64, "float32": torch.float32}
#: relative tolerance of the structured test, per dtype (a few ulps: exact-integer sums, different orders)
STRUCTURED_RTOL = {torch.float32: 1e-5, torch.float16: 1e-2, torch.bfloat16: 3e-2, torch.float64: 1e-10}
#: one seed: its args, the kernel's outputs, and the given reference outputs (None: `sig.reference` in high precision)
_Batch = tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...], torch.Tensor | Sequence[torch.Tensor] | None]


class OutputStats(TypedDict, total=False):
    """One output's errors over the pooled seeds (`NumericsInfo.stats["outputs"]`, one per output): its shape and
    dtype always; the error figures once its shape matched the reference's (a mismatch has only the two max ones
    at infinity); the rounding floor where a bias or noise reason was weighed against it."""

    shape: Required[list[int]]
    dtype: Required[str]
    index: int
    n: int
    mean_err: float
    std_err: float
    torch_std_err: float
    max_abs_err: float
    max_rel_err: float
    ref_max_abs: float
    torch_mean_err: float
    torch_max_abs_err: float
    vs_torch_mean: float
    vs_torch_std: float
    vs_torch_max_abs: float
    mean_err_bound: float
    rounding_noise: float
    rounding_floor: float
    at_rounding_level: str


#: the structured test's result (`NumericsInfo.stats["structured"]`); "pass" is a keyword, hence this form
StructuredTest = TypedDict("StructuredTest", {"pass": bool, "max_err_rel_to_scale": float, "rtol": float})


def _as_tuple(x: torch.Tensor | Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
    return (x,) if isinstance(x, torch.Tensor) else tuple(x)


def _to(args: Sequence[torch.Tensor], dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    """Copies of the floating-point arguments in `dtype`; integer and bool arguments (an aten call's indices
    and masks) as they are."""
    return tuple(a.detach().cpu().to(dtype) if a.is_floating_point() else a.detach().cpu() for a in args)


def _f64(args: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
    return _to(args, torch.float64)


def batches_needed(sig: OpSignature, criteria: NumericsCriteria = DEFAULT_CRITERIA) -> int:
    """How many seeds give at least `criteria.min_samples` errors of the main output (output 0), as BOO
    collects them; at most `criteria.max_batches`."""
    shapes = sig.output_shapes()
    n = math.prod(shapes[0]) if shapes else 1
    if n <= 0:
        return 1
    return max(1, min(criteria.max_batches, -(-criteria.min_samples // n)))


def numerics_verdict(sig: OpSignature, args: Sequence[torch.Tensor],
                     outputs: torch.Tensor | Sequence[torch.Tensor], *,
                     reference_outputs: torch.Tensor | Sequence[torch.Tensor] | None = None,
                     criteria: NumericsCriteria = DEFAULT_CRITERIA,
                     more: Sequence[tuple[Sequence[torch.Tensor], torch.Tensor | Sequence[torch.Tensor]]] = (),
                     ) -> NumericsInfo:
    """Judge `outputs` (what the kernel returned for `args`). Pure: only eager torch runs.

    The reference is `sig.reference` on copies of `args` in `criteria.reference_dtype` (float64 by default), or
    `reference_outputs` when given (e.g. the baseline kernel's outputs when judging a variant). The noise
    yardstick is always eager torch in the args' dtype against that high-precision reference. `more`: (args,
    outputs) of further seeds (BOO's --numerics-min-samples), whose errors are pooled with the first's; they are
    judged against the high-precision reference."""
    ref_dtype = REFERENCE_DTYPES[criteria.reference_dtype]
    batches: list[_Batch] = [(tuple(a.detach().cpu() for a in args), _as_tuple(outputs), reference_outputs)]
    batches += [(tuple(a.detach().cpu() for a in a2), _as_tuple(o2), None) for a2, o2 in more]
    pooled, n_out, reasons = _pool_outputs(sig, batches, ref_dtype)
    per_output, why = _judge_outputs(sig, pooled[: n_out or 0], batches[0][0], criteria, ref_dtype)
    reasons += why
    c = criteria
    stats: dict[str, Any] = {
        "outputs": per_output,
        "reference": criteria.reference_dtype if reference_outputs is None else "given",
        "criteria": f"|mean err| <= {c.mean_atol:g} + {c.mean_rtol:g}*std(err) + {MEAN_SAMPLING_Z:g}*std/sqrt(n); "
                    f"std(err) <= {c.stddev_atol:g} + {c.stddev_rtol:g}*std(torch {sig.dtype_name} err); NaN match",
        "seeds": len(batches),
        "max_abs_err": max((o["max_abs_err"] for o in per_output), default=math.nan),
        "max_rel_err": max((o["max_rel_err"] for o in per_output), default=math.nan),
    }
    if reasons:
        stats["reason"] = "; ".join(reasons)
    return NumericsInfo(verdict=NumericsVerdict.FAIL if reasons else NumericsVerdict.PASS, stats=stats)


def _pool_outputs(sig: OpSignature, batches: Sequence[_Batch], ref_dtype: torch.dtype,
                  ) -> tuple[list[list[tuple[torch.Tensor, ...]]], int | None, list[str]]:
    """Per output its seeds' (kernel, reference, eager torch, float64), how many to judge, any count mismatch."""
    pooled: list[list[tuple[torch.Tensor, ...]]] = []
    reasons: list[str] = []
    n_out = None
    for bargs, outs, given in batches:
        with torch.no_grad():
            exact = _as_tuple(sig.reference(*_to(bargs, ref_dtype)))
            ref = exact if given is None else _to(_as_tuple(given), ref_dtype)
            torch_low = _as_tuple(sig.reference(*bargs))
        if len(outs) != len(ref):
            reasons.append(f"kernel returned {len(outs)} outputs, the reference {len(ref)}")
            break
        n_out = len(outs)
        for i, (k, r, t, e) in enumerate(zip(outs, ref, torch_low, exact)):
            if len(pooled) <= i:
                pooled.append([])
            pooled[i].append((k, r, t, e))
    return pooled, n_out, reasons


def _judge_outputs(sig: OpSignature, pooled: list[list[tuple[torch.Tensor, ...]]],
                   first_args: tuple[torch.Tensor, ...], criteria: NumericsCriteria, ref_dtype: torch.dtype,
                   ) -> tuple[list[OutputStats], list[str]]:
    """Each output's stats (with its index) over the pooled seeds, and the reasons any output fails."""
    per_output: list[OutputStats] = []
    reasons: list[str] = []
    rounding_noise = _lazy_rounding_noise(sig, first_args)
    for i, quads in enumerate(pooled):
        st, why = _judge_output(quads, criteria, ref_dtype)
        if why:
            why = _rounding_level(st, why, quads, functools.partial(rounding_noise, i))
        st["index"] = i
        per_output.append(st)
        reasons += [f"output {i}: {w}" for w in why]
    return per_output, reasons


def _lazy_rounding_noise(sig: OpSignature, args: tuple[torch.Tensor, ...]) -> Callable[[int], torch.Tensor]:
    """Output i's simulated rounding noise on `args`, made on the first call and kept for the others."""
    noise: list[tuple[torch.Tensor, ...]] = []     # simulated rounding noise of the first seed, made if asked

    def rounding_noise(i: int) -> torch.Tensor:
        if not noise:
            x64 = _f64(args)
            with torch.no_grad(), jitter_mode(torch.finfo(sig.dtype).eps / 2, seed=1):
                jittered = _as_tuple(sig.reference(*x64))
            with torch.no_grad():
                noise.append(tuple(j - e for j, e in zip(jittered, _as_tuple(sig.reference(*x64)))))
        return noise[0][i]

    return rounding_noise


def _moments(err: torch.Tensor) -> tuple[float, float, float]:
    """(mean, std, max |err|) as BOO computes them: signed mean, unbiased std, max absolute."""
    n = err.numel()
    if n == 0:
        return 0.0, 0.0, 0.0
    return float(err.mean()), float(err.std()) if n > 1 else 0.0, float(err.abs().max())


def _judge_output(quads: list[tuple[torch.Tensor, ...]], criteria: NumericsCriteria,
                  ref_dtype: torch.dtype) -> tuple[OutputStats, list[str]]:
    """One output over every seed: (kernel, reference, eager torch in the op's dtype, high-precision) each."""
    kernel = quads[0][0]
    st: OutputStats = {"shape": list(kernel.shape), "dtype": str(kernel.dtype).replace("torch.", "")}
    for k, r, _, _ in quads:
        if tuple(k.shape) != tuple(r.shape):
            st.update({"max_abs_err": math.inf, "max_rel_err": math.inf})
            return st, [f"shape {tuple(k.shape)} != reference {tuple(r.shape)}"]
    flat = lambda i: torch.cat([q[i].detach().cpu().to(ref_dtype).reshape(-1) for q in quads])  # noqa: E731
    k, ref, low, exact = flat(0), flat(1), flat(2), flat(3)
    t_err = low - exact
    nan_k, nan_r = torch.isnan(k), torch.isnan(ref)
    why: list[str] = []
    if not torch.equal(nan_k, nan_r):
        why.append(f"NaN mismatch ({int(nan_k.sum())} NaN in kernel, {int(nan_r.sum())} in reference)")
    ok = ~(nan_k | nan_r)
    err = (k - ref)[ok]
    ok_t = ok & ~torch.isnan(t_err)
    n = err.numel()
    mean, std, max_abs = _moments(err)
    t_mean, t_std, t_max = _moments(t_err[ok_t])
    v_mean, v_std, v_max = _moments((k - low)[ok_t])
    scale = float(ref[ok].abs().max()) if n else 0.0
    st.update({"n": n, "mean_err": mean, "std_err": std, "torch_std_err": t_std, "max_abs_err": max_abs,
               "max_rel_err": max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else math.inf),
               "ref_max_abs": scale, "torch_mean_err": t_mean, "torch_max_abs_err": t_max,
               "vs_torch_mean": v_mean, "vs_torch_std": v_std, "vs_torch_max_abs": v_max})
    c = criteria
    mean_bound = c.mean_atol + c.mean_rtol * std + (MEAN_SAMPLING_Z * std / math.sqrt(n) if n else 0.0)
    st["mean_err_bound"] = mean_bound
    if not math.isfinite(mean) or abs(mean) > mean_bound:
        why.append(f"biased: mean err {mean:.3g} > bound {mean_bound:.3g} ({c.mean_atol:g} + "
                   f"{c.mean_rtol:g}*std {std:.3g} + sampling allowance, n={n})")
    if not math.isfinite(std) or std > c.stddev_atol + c.stddev_rtol * t_std:
        why.append(f"noisy: std err {std:.3g} > {c.stddev_atol:g} + {c.stddev_rtol:g}*torch std {t_std:.3g}"
                   + noise_pattern(std, t_std, st["dtype"]))
    return st, why


#: the ratio band read as "about sqrt(2)": one extra rounding (sampling spread of a std over 1000+ errors is ~3%)
SQRT2_BAND = (1.3, 1.55)


def noise_pattern(std: float, torch_std: float, dtype: str) -> str:
    """What a too-noisy output's error pattern suggests, as a suffix for its reason ('' when nothing is read
    from it). An error std about sqrt(2) times torch's in a 16-bit dtype is what two independent roundings to
    that dtype give where torch rounds once: an intermediate (a matmul's product before the bias is added, a
    partial sum) stored in the kernel's dtype while torch keeps it in float32. Reported, never excused: the
    criterion stays BOO's."""
    if not (torch_std > 0 and math.isfinite(std)):
        return ""
    ratio = std / torch_std
    text = f" ({ratio:.2f}x torch's"
    if dtype in ("float16", "bfloat16") and SQRT2_BAND[0] <= ratio <= SQRT2_BAND[1]:
        return (text + f", about sqrt(2): consistent with an intermediate rounded to {dtype} before the last "
                f"step, e.g. the product rounded before the bias is added, where torch rounds once)")
    return text + ")"


def _rounding_level(st: OutputStats, why: list[str], quads: list[tuple[torch.Tensor, ...]],
                    noise: Callable[[], torch.Tensor]) -> list[str]:
    """`why` (the bias / noise reasons) dropped for an output at rounding level whose errors are within its floor;
    `noise()`: the simulated rounding noise of the first seed's output (boo_engine/rounding.py)."""
    if any(w.startswith(("NaN", "shape")) for w in why):
        return why
    n = noise().detach().double().reshape(-1)
    level = float(n.pow(2).mean().sqrt()) if n.numel() else 0.0
    exact = torch.cat([q[3].detach().double().reshape(-1) for q in quads])
    rms = float(exact.pow(2).mean().sqrt()) if exact.numel() else 0.0
    mean, std = st.get("mean_err", math.inf), st.get("std_err", math.inf)
    floor = FLOOR_FACTOR * level
    st.update({"rounding_noise": level, "rounding_floor": floor})
    if not (rms <= level and abs(mean) <= floor and std <= floor):
        return why
    st["at_rounding_level"] = (f"zero in exact arithmetic (RMS {rms:.2g}): both sides at rounding level, "
                               f"|mean err| {abs(mean):.2g} and std err {std:.2g} < floor {floor:.2g}")
    return []


def structured_args(sig: OpSignature) -> tuple[torch.Tensor, ...]:
    """Every input zero except one block of ones: the leading half (rounded up) of every dimension."""
    out = []
    for shape, dt in zip(sig.input_shapes(), sig.input_dtypes()):
        t = torch.zeros(shape, dtype=dt)
        t[tuple(slice(0, (d + 1) // 2) for d in shape)] = 1
        out.append(t)
    return tuple(out)


def structured_verdict(sig: OpSignature, args: Sequence[torch.Tensor],
                       outputs: torch.Tensor | Sequence[torch.Tensor]) -> StructuredTest:
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


def check_numerics(sig: OpSignature, target: Target | str = "cpu", variant: Variant | None = None, *, seed: int = 0,
                   cache: KernelCache | None = None, criteria: NumericsCriteria = DEFAULT_CRITERIA) -> NumericsInfo:
    """Compile (through the cache), run on random and structured inputs, judge. Raises CompileError or
    LaunchError when the kernel cannot be built or loaded here."""
    from .runtime.launchable import get_launchable

    kernel = get_launchable(sig, target, variant, cache=cache)
    args = sig.get_sample_args(seed)
    more = [(a, kernel(*a)) for a in (sig.get_sample_args(seed + b) for b in range(1, batches_needed(sig, criteria)))]
    info = numerics_verdict(sig, args, kernel(*args), criteria=criteria, more=more)
    if criteria.structured:
        sargs = structured_args(sig)
        add_structured(info, structured_verdict(sig, sargs, kernel(*sargs)))
    return info


def add_structured(info: NumericsInfo, structured: StructuredTest) -> None:
    """Record the structured test in `info`; a failed one fails the check."""
    info.stats["structured"] = structured
    if not structured["pass"]:
        info.verdict = NumericsVerdict.FAIL
        reason = (f"structured test: off by {structured['max_err_rel_to_scale']:.3g} of scale "
                  f"(rtol {structured['rtol']:g})")
        info.stats["reason"] = "; ".join(filter(None, [info.stats.get("reason"), reason]))
