"""numerics_verdict is a pure function: correct outputs pass, biased / noisy / NaN / wrong-shape outputs fail,
and the structured test catches indexing bugs random data hides. Only eager torch runs here (fast)."""
from __future__ import annotations

import torch

from boo_engine.commands import parse_command
from boo_engine.numerics import numerics_verdict, structured_args, structured_verdict

GEMM = parse_command("gemm --a_w 64 --a_h 128 --b_w 96")


def _low_precision_like_kernel(sig, args):
    """What a correct kernel returns: the op computed exactly, then rounded to the output dtype."""
    out = sig.reference(*[a.double() for a in args])
    return tuple(o.to(sig.dtype) for o in out) if isinstance(out, tuple) else out.to(sig.dtype)


def test_correct_output_passes_with_stats():
    args = GEMM.get_sample_args(0)
    info = numerics_verdict(GEMM, args, GEMM.reference(*args))
    assert info.verdict == "pass", info.stats
    o = info.stats["outputs"][0]
    assert o["shape"] == [64, 96] and o["max_abs_err"] < 1e-4 and o["max_rel_err"] < 1e-5
    assert set(o) >= {"mean_err", "std_err", "torch_std_err", "max_abs_err", "max_rel_err", "n"}


def test_biased_output_fails():
    args = GEMM.get_sample_args(0)
    info = numerics_verdict(GEMM, args, GEMM.reference(*args) + 1e-3)
    assert info.verdict == "fail" and "biased" in info.stats["reason"]


def test_noisy_output_fails():
    args = GEMM.get_sample_args(0)
    out = GEMM.reference(*args)
    noisy = out + torch.randn(out.shape, generator=torch.Generator().manual_seed(1)) * 1e-3
    info = numerics_verdict(GEMM, args, noisy)
    assert info.verdict == "fail" and "noisy" in info.stats["reason"]


def test_nan_mismatch_fails():
    args = GEMM.get_sample_args(0)
    out = GEMM.reference(*args).clone()
    out[3, 4] = float("nan")
    info = numerics_verdict(GEMM, args, out)
    assert info.verdict == "fail" and "NaN" in info.stats["reason"]


def test_wrong_shape_fails_without_raising():
    args = GEMM.get_sample_args(0)
    info = numerics_verdict(GEMM, args, GEMM.reference(*args)[:10])
    assert info.verdict == "fail" and "shape" in info.stats["reason"]


def test_low_precision_yardstick_is_torch_in_that_dtype():
    """A correctly rounded bf16 result passes although its error is ~1e-2: torch bf16 is as noisy."""
    sig = parse_command("convbfp16 -n 2 -c 16 -H 12 -W 12 -k 16 -y 3 -x 3 -p 1 -q 1")
    args = sig.get_sample_args(0)
    info = numerics_verdict(sig, args, _low_precision_like_kernel(sig, args))
    assert info.verdict == "pass", info.stats.get("reason")
    assert info.stats["outputs"][0]["max_abs_err"] > 1e-3
    # but a bf16 result with 10x torch's noise fails
    out = _low_precision_like_kernel(sig, args).double()
    t_std = info.stats["outputs"][0]["torch_std_err"]
    bad = (out + torch.randn(out.shape, generator=torch.Generator().manual_seed(0)) * 10 * t_std).to(sig.dtype)
    assert numerics_verdict(sig, args, bad).verdict == "fail"


def test_reference_outputs_compare_variant_with_baseline():
    args = GEMM.get_sample_args(0)
    base = GEMM.reference(*args)
    assert numerics_verdict(GEMM, args, base.clone(), reference_outputs=base).verdict == "pass"
    info = numerics_verdict(GEMM, args, base + 1e-3, reference_outputs=base)
    assert info.verdict == "fail" and info.stats["reference"] == "given"


def test_multi_output_judged_per_output():
    sig = parse_command("layernorm --input 8x16x64 --mode 1 --normalized_dim 2 -F 1")
    args = sig.get_sample_args(0)
    y, mean, rstd = sig.reference(*args)
    info = numerics_verdict(sig, args, (y, mean, rstd + 1e-2))
    assert info.verdict == "fail" and "output 2" in info.stats["reason"] and "output 0" not in info.stats["reason"]
    assert len(info.stats["outputs"]) == 3


def test_structured_test_catches_a_layout_bug():
    """Random data with a transposed-weight bug can still look statistically fine for symmetric shapes; the
    block-of-ones input makes the wrong indexing obvious."""
    sig = parse_command("gemm --a_w 8 --a_h 8 --b_w 8")
    a, b = structured_args(sig)
    assert a.sum() == 16 and b.sum() == 16
    assert structured_verdict(sig, (a, b), sig.reference(a, b))["pass"]
    wrong = sig.reference(a, torch.roll(b, 1, dims=0))
    assert not structured_verdict(sig, (a, b), wrong)["pass"]


def test_small_outputs_do_not_fail_by_chance():
    """An unbiased 16-element result must not fail the bias test ~40% of the time (BOO's bare bound would)."""
    sig = parse_command("gemm --a_w 4 --a_h 32 --b_w 4")
    fails = 0
    for seed in range(40):
        args = sig.get_sample_args(seed)
        out = sig.reference(*args).double()
        noise = torch.randn(out.shape, generator=torch.Generator().manual_seed(100 + seed), dtype=torch.float64)
        fails += numerics_verdict(sig, args, (out + noise * 1e-6).float()).verdict == "fail"
    assert fails <= 2


def test_criteria_change_the_verdict():
    """BOO's tolerance flags reach the judgement: an output 1.5x noisier than torch fails BOO's stddev rtol 1.2
    and passes with 2.0; a bias of 1e-3 passes once mean atol allows it."""
    from boo_engine.results import NumericsCriteria

    sig = parse_command("gemmfp16 --a_w 64 --a_h 128 --b_w 96")
    args = sig.get_sample_args(0)
    exact = sig.reference(*[a.double() for a in args])
    torch_err = sig.reference(*args).double() - exact
    noisy = exact + 1.5 * torch_err   # (kept in float64: rounding to fp16 again would hide the extra noise)
    assert numerics_verdict(sig, args, noisy).verdict == "fail"
    assert numerics_verdict(sig, args, noisy, criteria=NumericsCriteria(stddev_rtol=2.0)).verdict == "pass"
    biased = GEMM.reference(*GEMM.get_sample_args(0)) + 1e-3
    gargs = GEMM.get_sample_args(0)
    assert numerics_verdict(GEMM, gargs, biased).verdict == "fail"
    loose = NumericsCriteria(mean_atol=2e-3, stddev_atol=1.0)
    info = numerics_verdict(GEMM, gargs, biased, criteria=loose)
    assert info.verdict == "pass", info.stats.get("reason")
    assert "2e-03" in info.stats["criteria"] or "0.002" in info.stats["criteria"]


def test_min_samples_pools_seeds_and_reference_dtype():
    from boo_engine.numerics import batches_needed
    from boo_engine.results import NumericsCriteria

    small = parse_command("layernorm --input 64x16 -F 4")   # main output: 16 weight-grad elements
    assert batches_needed(small) == 63 and batches_needed(small, NumericsCriteria(min_samples=16)) == 1
    assert batches_needed(small, NumericsCriteria(min_samples=10**9)) == NumericsCriteria().max_batches
    seeds = [small.get_sample_args(s) for s in range(3)]
    info = numerics_verdict(small, seeds[0], small.reference(*seeds[0]),
                            more=[(a, small.reference(*a)) for a in seeds[1:]],
                            criteria=NumericsCriteria(reference_dtype="float32"))
    assert info.verdict == "pass" and info.stats["outputs"][0]["n"] == 48 and info.stats["seeds"] == 3
    assert info.stats["reference"] == "float32"


def _cancelling_gemm(scale):
    """A gemm whose products cancel in pairs (exact output 0) and what a correct kernel summing in another order
    than torch's returns: rounding noise, while eager torch's order is nearly exact."""
    a, b = GEMM.get_sample_args(0)
    a, b = a * scale, b * scale
    a[:, 1::2] = a[:, ::2]
    b[1::2] = -b[::2]
    perm = torch.randperm(a.shape[1], generator=torch.Generator().manual_seed(3))
    return (a, b), a[:, perm] @ b[perm]


def test_output_zero_in_exact_arithmetic_passes_at_rounding_level():
    args, out = _cancelling_gemm(100.0)
    assert float(GEMM.reference(*[t.double() for t in args]).abs().max()) == 0.0
    info = numerics_verdict(GEMM, args, out)
    assert info.verdict == "pass", info.stats
    o = info.stats["outputs"][0]
    # the kernel's noise is 6x torch's (BOO's test alone said "noisy"), and far below the op's rounding floor
    assert o["std_err"] > 1.2 * o["torch_std_err"] + 1e-5
    assert o["std_err"] < o["rounding_floor"]
    assert o["at_rounding_level"].startswith("zero in exact arithmetic")


def test_output_at_rounding_level_that_is_wrong_still_fails():
    args, out = _cancelling_gemm(1.0)
    bad = out.clone()
    bad[3, 4] = 1.0       # one element off by 1 where the terms are ~1 and the floor ~1e-3
    info = numerics_verdict(GEMM, args, bad)
    assert info.verdict == "fail" and "noisy" in info.stats["reason"]
    assert "at_rounding_level" not in info.stats["outputs"][0]


def test_ordinary_output_is_not_judged_by_the_floor():
    """A 1.001x scaled gemm fails BOO's test; its RMS is far above the rounding noise, so no floor rescues it."""
    args = GEMM.get_sample_args(0)
    info = numerics_verdict(GEMM, args, GEMM.reference(*args) * 1.001)
    o = info.stats["outputs"][0]
    assert info.verdict == "fail" and "at_rounding_level" not in o
    assert o["ref_max_abs"] > 1e4 * o["rounding_noise"]
