"""Kernel formulations (OpSignature.formulations, Variant.formulation): every formulation of every conv mode computes
the reference's function (eagerly in float64, and compiled by IREE on this CPU against BOO's numerics), exports
MLIR of its own while the default exports what it always did, and a variant naming one gets its own cache entry.
Real torch.export and iree-compile throughout (tiny kernels, compiled once through the pool)."""
from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import torch

from boo_engine.commands import parse_command
from boo_engine.compile.cache import KernelCache
from boo_engine.compile.export import export_mlir
from boo_engine.compile.pool import CompilePool, compile_signature, lookup_cached
from boo_engine.errors import CompileError
from boo_engine.numerics import check_numerics
from boo_engine.ops import FORMULATIONS
from boo_engine.variants import BASELINE, Variant

NHWC = "-I NHWC -O NHWC -f NHWC"
# strides 1 and 2, padding 0 and 1, dilation 1 and 2, groups 1 and 2, NCHW and NHWC, every gradient, transposed,
# 1-D and 3-D, one fp16 kernel: each line mixes several of them, so the matrix stays a dozen compiles per formulation
COMMANDS = [
    "conv -n 2 -c 4 -H 9 -W 8 -k 6 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -g 2 -F 10",
    f"conv -n 2 -c 4 -H 9 -W 8 -k 4 -y 3 -x 2 -p 0 -q 0 -l 2 -j 2 -F 10 {NHWC}",
    f"conv -n 2 -c 4 -H 9 -W 8 -k 6 -y 3 -x 3 -p 1 -q 0 -u 2 -v 1 -l 2 -j 1 -g 2 -F 2 {NHWC}",
    "conv -n 2 -c 4 -H 9 -W 8 -k 6 -y 3 -x 3 -p 0 -q 1 -u 1 -v 2 -l 1 -j 2 -F 4",
    f"conv -n 2 -c 4 -H 9 -W 8 -k 6 -y 2 -x 3 -p 1 -q 1 -u 2 -v 2 -l 2 -j 2 -g 2 -F 9 {NHWC}",
    "conv -n 2 -c 4 -H 9 -W 8 -k 6 -y 3 -x 3 -p 1 -q 1 -g 2 -F 1 -b 1",
    "conv -n 1 -c 4 -H 5 -W 5 -k 6 -y 3 -x 3 -u 2 -v 2 -p 1 -q 1 -m trans -Y 1 -g 2 -F 1 -b 1",
    f"conv -n 1 -c 4 -H 5 -W 5 -k 6 -y 3 -x 3 -u 2 -v 2 -p 1 -q 1 -m trans -Y 1 -g 2 -F 10 {NHWC}",
    "conv -_ 1 -n 2 -c 4 -H 12 -k 6 -y 3 -p 1 -u 2 -l 2 -g 2 -F 10 -I NHC -O NHC -f NHC",
    "conv -_ 3 -n 1 -c 2 -! 5 -H 5 -W 4 -k 4 -@ 3 -y 3 -x 2 -$ 2 -p 1 -u 2 -F 10",
    "convfp16 -n 2 -c 4 -H 9 -W 8 -k 6 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -F 10",
    # a 7x7 image: the matmul puts the output channels innermost (conv_forms.channels_innermost), forward and in a
    # data gradient's conv
    "conv -n 1 -c 4 -H 7 -W 7 -k 32 -y 3 -x 3 -p 1 -q 1 -F 1",
    f"conv -n 1 -c 64 -H 7 -W 7 -k 4 -y 3 -x 3 -p 1 -q 1 -g 2 -F 2 {NHWC}",
]
# compiled: every formulation of every 2-D kernel; 1-D and 3-D with fwdconv only (their matmul form, the same slices
# and matmuls over more taps, costs 7 s of compile and is checked eagerly below)
CASES = [(c, f) for c in COMMANDS for f in parse_command(c).formulations()[1:]
         if f != "matmul" or "-_ " not in c]
GEMM = "gemm --a_w 4 --a_h 8 --b_w 4"
BWD_DATA = "conv -n 1 -c 2 -H 6 -W 6 -k 2 -y 3 -x 3 -p 1 -q 1 -F 2"


def _tuple(r) -> tuple[torch.Tensor, ...]:
    return tuple(r) if isinstance(r, (tuple, list)) else (r,)


@pytest.fixture(scope="module")
def built(cache) -> dict[tuple[str, str], object]:
    """Every (command, formulation) of CASES compiled once, in parallel through the pool, plus GEMM asking for a
    formulation it does not have: {(command, formulation): Artifact or the exception}."""
    with CompilePool(cache=cache) as pool:
        futures = {(c, f): pool.submit(parse_command(c), "cpu", Variant(name=f, formulation=f))
                   for c, f in [*CASES, (GEMM, "fwdconv")]}
        return {k: fut.exception() or fut.result() for k, fut in futures.items()}


# ---- the contract -------------------------------------------------------------------------------------------

def test_formulations_start_with_default_and_are_known():
    for cmd in [*COMMANDS, GEMM, "layernorm -X 3x4x8 -m 1 -F 1", "bnorm -n 4 -c 3 -H 4 -W 4 -m 0 -F 2"]:
        forms = parse_command(cmd).formulations()
        assert forms[0] == "default" and set(forms) <= set(FORMULATIONS), (cmd, forms)
    assert parse_command(GEMM).formulations() == ("default",)
    assert parse_command(BWD_DATA).formulations() == ("default", "fwdconv", "matmul")
    assert parse_command(BWD_DATA.replace("-F 2", "-F 7")).formulations() == ("default",)   # bias grad only
    assert parse_command(BWD_DATA.replace("-F 2", "-F 1 -g 2")).formulations() == ("default", "matmul")
    # a data with a weight gradient: the data gradient as fwdconv, the weight gradient as matmul
    assert parse_command(BWD_DATA.replace("-F 2", "-F 10")).formulations() == ("default", "fwdconv", "matmul", "mixed")
    assert "mixed" not in parse_command(BWD_DATA.replace("-F 2", "-F 10 -m trans")).formulations()


def test_unknown_formulation_is_refused_in_one_line():
    sig = parse_command(GEMM)
    with pytest.raises(ValueError, match=r"does not support formulation 'fwdconv'; it has: default$"):
        sig.as_module("fwdconv")
    with pytest.raises(CompileError) as e:
        export_mlir(sig, "fwdconv")
    assert str(e.value) == f"{sig.func_name} does not support formulation 'fwdconv'; it has: default"


@pytest.mark.parametrize("cmd", COMMANDS + [c.replace("-F 10", f"-F {f}") for f in (6, 8) for c in COMMANDS[:2]])
def test_every_formulation_matches_the_reference_in_float64(cmd):
    sig = parse_command(cmd)
    args = [a.to(torch.float64) for a in sig.get_sample_args(0)]
    ref = _tuple(sig.reference(*args))
    for form in sig.formulations():
        out = _tuple(sig.formulated(form, *args))
        assert [o.shape for o in out] == [r.shape for r in ref], form
        for o, r in zip(out, ref):
            torch.testing.assert_close(o, r, rtol=1e-9, atol=1e-9, msg=f"{form}: {cmd}")


def test_fwdconv_and_matmul_cover_every_stride_padding_dilation_and_group():
    """Eagerly, over the whole grid the compiled matrix samples (float64, exact up to rounding)."""
    for s, p, d, g, mode in itertools.product((1, 2), (0, 1, 2), (1, 2), (1, 2), ("conv", "trans")):
        cmd = (f"conv -n 2 -c 4 -H 7 -W 6 -k 6 -y 3 -x 2 -p {p} -q {p} -u {s} -v {s} -l {d} -j {d} -g {g} -F 10 "
               f"-m {mode}" + (" -Y 1" if mode == "trans" and s > 1 else ""))
        try:
            sig = parse_command(cmd)
        except ValueError:
            continue  # padding larger than the input allows
        args = [a.to(torch.float64) for a in sig.get_sample_args(1)]
        ref = _tuple(sig.reference(*args))
        for form in sig.formulations()[1:]:
            for o, r in zip(_tuple(sig.formulated(form, *args)), ref):
                torch.testing.assert_close(o, r, rtol=1e-9, atol=1e-9, msg=f"{form}: {cmd}")


@pytest.mark.parametrize("positions, channels, taps, inner", [
    (49, 32, (3, 3), True), (49, 256, (3, 3), True), (25, 64, (3, 3), True),     # 7x7, 5x5 images
    (49, 512, (3, 3), False), (49, 16, (3, 3), False), (49, 40, (3, 3), False),  # too many, one vector, not whole
    (196, 64, (3, 3), False), (784, 64, (3, 3), False), (25, 192, (3, 1), False),  # few lanes idle; not 3x3
])
def test_the_matmul_puts_channels_innermost_on_small_images(positions, channels, taps, inner):
    from boo_engine.ops.conv_forms import channels_innermost

    assert channels_innermost(positions, channels, taps) is inner


def test_the_matmul_of_a_small_image_is_written_channels_innermost():
    """The 7x7 conv's matmul reads the im2col transposed (channels innermost); a 28x28 one's does not."""
    small = export_mlir(parse_command("conv -n 1 -c 4 -H 7 -W 7 -k 32 -y 3 -x 3 -p 1 -q 1 -F 1"), "matmul")
    big = export_mlir(parse_command("conv -n 1 -c 4 -H 28 -W 28 -k 32 -y 3 -x 3 -p 1 -q 1 -F 1"), "matmul")
    assert "torch.aten.transpose" in small and "torch.aten.transpose" not in big


def test_default_formulation_exports_the_reference():
    sig = parse_command(BWD_DATA)
    default = export_mlir(sig)
    assert export_mlir(sig, "default") == default
    assert "convolution_backward" in default
    fwd = export_mlir(sig, "fwdconv")
    assert "convolution_backward" not in fwd and "torch.aten.convolution" in fwd
    assert "torch.aten.matmul" in export_mlir(sig, "matmul")


# ---- compiled by IREE -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("command,formulation", CASES)
def test_formulation_compiles_and_passes_numerics(command, formulation, cache, built):
    sig = parse_command(command)
    assert Path(built[(command, formulation)].mlir_path).name == f"{sig.func_name}.{formulation}.mlir"
    info = check_numerics(sig, "cpu", Variant(name=formulation, formulation=formulation), cache=cache)
    assert info.verdict == "pass", info.stats.get("reason")
    assert info.stats["structured"]["pass"]


def test_formulation_variant_has_its_own_cache_entry(tmp_path):
    """The export-free index never hands one formulation's kernel to another, each entry keeps its own MLIR."""
    cache = KernelCache(tmp_path)
    sig = parse_command(BWD_DATA)
    fwd = compile_signature(sig, "cpu", Variant(name="fwd", formulation="fwdconv"), cache=cache)
    assert Path(fwd.mlir_path).name == f"{sig.func_name}.fwdconv.mlir"
    assert "convolution_backward" not in Path(fwd.mlir_path).read_text()
    assert lookup_cached(sig, "cpu", BASELINE, cache=KernelCache(tmp_path)) is None
    base = compile_signature(sig, "cpu", cache=cache)
    assert not base.cache_hit and base.key != fwd.key and base.func_name == fwd.func_name
    assert Path(base.mlir_path).name == f"{sig.func_name}.mlir"
    assert "convolution_backward" in Path(base.mlir_path).read_text()
    again = lookup_cached(sig, "cpu", Variant(name="other-name", formulation="fwdconv"), cache=KernelCache(tmp_path))
    assert again is not None and again.key == fwd.key
    named_default = compile_signature(sig, "cpu", Variant(name="d", formulation="default"), cache=cache)
    assert named_default.cache_hit and named_default.key == base.key   # "default" is the baseline's very kernel
    # per kernel, as `boo-tui tune` writes it: only that kernel is written as matmul
    tuned = Variant(name="tuned", kernel_formulations=((sig.func_name, "matmul"), ("other_kernel", "fwdconv")))
    assert tuned.export_formulation(sig.func_name) == "matmul" and tuned.export_formulation("x") == "default"
    mm = compile_signature(sig, "cpu", tuned, cache=cache)
    assert Path(mm.mlir_path).name == f"{sig.func_name}.matmul.mlir" and mm.key not in (base.key, fwd.key)
    assert "torch.aten.matmul" in Path(mm.mlir_path).read_text()


def test_unsupported_formulation_fails_that_compile_in_one_line(built):
    sig = parse_command(GEMM)
    err = built[(GEMM, "fwdconv")]
    assert isinstance(err, CompileError)
    assert str(err) == f"{sig.func_name} does not support formulation 'fwdconv'; it has: default"
