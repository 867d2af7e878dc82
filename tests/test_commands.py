"""The MIOpenDriver grammar: flags (long and short forms, defaults), names, errors, commands files."""
from __future__ import annotations

import pytest

from boo_engine.commands import Command, CommandLine, parse_command, parse_invocation, read_commands_file
from boo_engine.errors import CommandError
from boo_engine.ops.conv import ConvSignature
from boo_engine.ops.gemm import GemmSignature
from boo_engine.ops.layernorm import LayerNormSignature

BOO_NAMES = [
    ("conv -n 2 -c 8 -H 16 -W 16 -k 8 -y 1 -x 1 -F 1 -b 1",
     "conv_2d_float32_forward_b_2x8x16x16_nchw_8x8x1x1_fchw_nfhw_1x1s_0x0p_1x1d_1g"),
    ("convbfp16 -n 16 -c 96 -H 48 -W 32 -k 96 -y 3 -x 1 -p 2 -q 0 -u 1 -v 1 -l 2 -j 2 -m conv -g 1 -F 2 "
     "--in_layout NHWC --out_layout NHWC --fil_layout NHWC",
     "conv_2d_bfloat16_input_backward_16x48x32x96_nhwc_96x3x1x96_fhwc_nhwf_1x1s_2x0p_2x2d_1g"),
    ("gemmfp16 --a_w 32 --a_h 64 --b_w 128", "gemm_float16_forward_32x64x128"),
    ("gemm -k 32 -m 64 -n 128 -u 1 -v 1", "gemm_float32_forward_32x64x128_transA_transB"),
    ("gemmbfp16 -k 32 -m 64 -n 128 -F 2 --transB 1", "gemm_bfloat16_a_backward_32x64x128_transB"),
    ("gemm -F 3", "gemm_float32_b_backward_256x256x256"),
    # -b 1 shows only in forward names (as BOO): a data/weight grad kernel does not depend on the bias
    ("conv -n 2 -c 8 -H 16 -W 16 -k 8 -y 1 -x 1 -F 4 -b 1",
     "conv_2d_float32_weight_backward_2x8x16x16_nchw_8x8x1x1_fchw_nfhw_1x1s_0x0p_1x1d_1g"),
    ("conv -n 2 -c 8 -H 16 -W 16 -k 8 -y 1 -x 1 -F 10",
     "conv_2d_float32_all_backward_2x8x16x16_nchw_8x8x1x1_fchw_nfhw_1x1s_0x0p_1x1d_1g"),
    ("convfp16 -_ 3 -n 1 -c 4 -! 5 -H 6 -W 7 -k 8 -@ 1 -y 2 -x 3 -# 1 -u 2 -v 1 -$ 0 -p 1 -q 0 -^ 1 -l 1 -j 2",
     "conv_3d_float16_forward_1x4x5x6x7_ncdhw_8x4x1x2x3_fcdhw_nfdhw_1x2x1s_0x1x0p_1x1x2d_1g"),
    ("conv -_ 1 -n 2 -c 4 -H 10 -k 6 -y 3 -g 2", "conv_1d_float32_forward_2x4x10_nch_6x2x3_fch_nfh_1s_0p_1d_2g"),
    ("conv -n 2 -c 4 -H 10 -W 9 -k 6 -y 3 -x 3 -I CHWN -f HWCN -O NWHC",
     "conv_2d_float32_forward_4x10x9x2_chwn_3x3x4x6_hwcf_nwhf_1x1s_0x0p_1x1d_1g"),
    ("conv -n 1 -c 4 -H 5 -W 5 -k 6 -y 3 -x 3 -u 2 -v 2 -m trans -Y 1 -X 0",
     "conv_2d_float32_forward_1x4x5x5_nchw_4x6x3x3_fchw_nfhw_2x2s_0x0p_1x1d_1g_trans_1x0op"),
    ("layernorm --input 16x128x768 --eps 1e-5 --mode 1 --normalized_dim 2 -F 1",
     "layer_norm_1d_float32_forward_16x128x768_w_b_eps1e-05"),
    ("layernormbfp16 -X 16x128x768 -e 1e-6 -m 0 -o 1 -F 2",
     "layer_norm_2d_bfloat16_input_backward_16x128x768_eps1e-06"),
]


@pytest.mark.parametrize("cmd,name", BOO_NAMES)
def test_func_names(cmd: str, name: str) -> None:
    assert parse_command(cmd).func_name == name


def test_conv_defaults_match_miopen() -> None:
    sig = parse_command("conv")
    assert isinstance(sig, ConvSignature)
    assert (sig.batch, sig.in_channels, sig.out_channels) == (100, 3, 32)
    assert sig.in_spatial == (32, 32) and sig.fil_spatial == (3, 3)
    assert sig.stride == (1, 1) and sig.padding == (0, 0) and sig.dilation == (1, 1)
    assert (sig.groups, sig.bias, sig.mode, sig.transposed) == (1, False, "forward", False)
    assert sig.in_layout == sig.fil_layout == sig.out_layout == "NCHW"
    assert sig.dtype_name == "float32"
    assert parse_command("conv -_ 3").in_spatial == (32, 32, 32)
    assert parse_command("conv -_ 1").in_layout == "NCH"


# every conv flag, long form vs short form -> the same signature
CONV_LONG_SHORT = [
    ("--spatial_dim", "-_", "3"), ("--batchsize", "-n", "3"), ("--in_channels", "-c", "4"),
    ("--in_h", "-H", "9"), ("--in_w", "-W", "10"), ("--in_layout", "-I", "NHWC"),
    ("--out_channels", "-k", "6"), ("--fil_h", "-y", "2"), ("--fil_w", "-x", "1"), ("--fil_layout", "-f", "NHWC"),
    ("--bias", "-b", "1"), ("--out_layout", "-O", "NHWC"), ("--forw", "-F", "4"), ("--mode", "-m", "trans"),
    ("--conv_stride_h", "-u", "2"), ("--conv_stride_w", "-v", "3"), ("--pad_h", "-p", "1"), ("--pad_w", "-q", "2"),
    ("--dilation_h", "-l", "2"), ("--dilation_w", "-j", "3"), ("--group_count", "-g", "2"),
]


@pytest.mark.parametrize("long,short,value", CONV_LONG_SHORT)
def test_conv_long_and_short_flags_agree(long: str, short: str, value: str) -> None:
    base = "conv -n 1 -c 2 -H 12 -W 12 -k 2 -y 3 -x 3"
    a = parse_command(f"{base} {long} {value}")
    b = parse_command(f"{base} {short} {value}")
    c = parse_command(f"{base} {long}={value}")
    assert a == b == c
    assert a != parse_command(base)


@pytest.mark.parametrize("long,short,value", [
    ("--in_d", "-!", "5"), ("--fil_d", "-@", "2"), ("--conv_stride_d", "-#", "2"), ("--pad_d", "-$", "1"),
    ("--dilation_d", "-^", "2"),
])
def test_conv_3d_flags(long: str, short: str, value: str) -> None:
    base = "conv -_ 3 -n 1 -c 2 -! 8 -H 6 -W 6 -k 2 -@ 3 -y 3 -x 3"
    a, b = parse_command(f"{base} {long} {value}"), parse_command(f"{base} {short} {value}")
    assert a == b != parse_command(base)


def test_conv_trans_output_padding_flags() -> None:
    base = "conv -_ 3 -n 1 -c 2 -! 4 -H 4 -W 4 -k 2 -@ 3 -y 3 -x 3 -m trans -# 2 -u 2 -v 2"
    for long, short in (("--trans_output_pad_d", "-%"), ("--trans_output_pad_h", "-Y"),
                        ("--trans_output_pad_w", "-X")):
        a, b = parse_command(f"{base} {long} 1"), parse_command(f"{base} {short} 1")
        assert a == b != parse_command(base)


def test_layout_sets_spatial_dims_and_shapes() -> None:
    sig = parse_command("conv -n 2 -c 3 -! 4 -H 5 -W 6 -k 7 -@ 1 -y 1 -x 1 --in_layout NDHWC")
    assert sig.num_spatial_dims == 3
    assert sig.input_shape == (2, 4, 5, 6, 3)
    assert sig.filter_shape == (7, 3, 1, 1, 1)  # filter layout defaults to NCDHW
    sig = parse_command("conv -n 2 -c 8 -H 5 -W 6 -k 4 -y 3 -x 1 -g 2 -f NHWC -O NHWC -p 1")
    assert sig.filter_shape == (4, 3, 1, 4)
    assert sig.output_shape == (2, 5, 6, 4)
    assert parse_command("conv -I nhwc").in_layout == "NHWC"


def test_layernorm_flags_and_defaults() -> None:
    sig = parse_command("layernorm")
    assert isinstance(sig, LayerNormSignature)
    assert sig.input_shape == (100, 3, 32, 32) and sig.normalized_dim == 3
    assert (sig.eps, sig.affine, sig.mode) == (1e-5, False, "forward")
    a = parse_command("layernormfp16 --input 2x3x4 --eps 1e-3 --mode 1 --normalized_dim 1 --forw 14")
    b = parse_command("layernormfp16 -X 2x3x4 -e 1e-3 -m 1 -o 1 -F 14")
    assert a == b
    assert (a.input_shape, a.normalized_shape, a.eps, a.affine, a.mode) == (
        (2, 3, 4), (3, 4), 1e-3, True, "all_backward")
    # without -o the last dim is normalized whatever the rank (BOO's behaviour)
    assert parse_command("layernorm --input 16x128x768").normalized_shape == (768,)
    assert parse_command("layernorm --input 7").normalized_shape == (7,)


def test_layernorm_names_distinct_for_distinct_kernels() -> None:
    base = "layernorm --input 4x8x16 -m 1"
    variants = [base, "layernorm --input 4x8x16 -m 0", base + " -e 1e-6", base + " -o 1", base + " -F 2",
                base + " -F 4", base + " -F 8", base + " -F 14", "layernormbfp16 --input 4x8x16 -m 1"]
    names = {parse_command(v).func_name for v in variants}
    assert len(names) == len(variants)


def test_layernorm_boo_modes_and_argument_lists() -> None:
    """BOO's layernorm: every -F in both modes (BOO's sample file has `-F 4` and `-F 8` without --mode, i.e.
    mode 0), with BOO's argument list per kernel: input backward takes the weight in both modes, the full
    backward takes weight and bias in mode 1 only."""
    args = lambda cmd: parse_command(cmd).arg_names()
    x = "layernorm --input 10x32x42x32 -t 1 --iter 100"
    assert args(f"{x} -F 4") == ["dLdy", "x", "mean", "rstd"]
    assert args(f"{x} -F 8") == ["dLdy"]
    for mode in (0, 1):
        assert args(f"{x} -F 2 -m {mode}") == ["dLdy", "x", "weight", "mean", "rstd"]
        assert args(f"{x} -F 4 -m {mode}") == ["dLdy", "x", "mean", "rstd"]
        assert args(f"{x} -F 8 -m {mode}") == ["dLdy"]
    assert args(f"{x} -F 14 -m 1") == ["dLdy", "x", "weight", "bias", "mean", "rstd"]
    assert args(f"{x} -F 14 -m 0") == ["dLdy", "x", "mean", "rstd"]
    assert args(f"{x} -F 1 -m 0") == ["x"] and args(f"{x} -F 1 -m 1") == ["x", "weight", "bias"]
    assert parse_command(f"{x} -F 14 -m 0").output_shapes() == [(10, 32, 42, 32), (32,), (32,)]


def test_layernorm_input_permutation_and_use_aten() -> None:
    plain = parse_command("layernorm --input 2x3x4 -F 2")
    perm = parse_command("layernorm --input 2x3x4 -F 2 --input-permutation 0 2 1")
    assert perm == parse_command("layernorm --input 2x3x4 -F 2 --input-permutation=0,2,1")
    assert perm.input_permutation == (0, 2, 1) and perm.input_shapes()[1] == (2, 4, 3)
    assert perm.input_shapes()[0] == (2, 3, 4)   # dLdy keeps the plain layout, as in BOO
    assert perm.func_name != plain.func_name
    # the identity (and BOO's empty list) is the plain layout: the same kernel
    assert parse_command("layernorm --input 2x3x4 -F 2 --input-permutation 0 1 2") == plain
    assert parse_command("layernorm --input 2x3x4 -F 2 --input-permutation") == plain
    # --use-aten changes nothing here (our kernels always write the math out)
    assert parse_command("layernorm --input 2x3x4 -F 14 -m 1 --use-aten 0") == parse_command(
        "layernorm --input 2x3x4 -F 14 -m 1")


def test_miopen_driver_flags_per_op_family() -> None:
    """MIOpenDriver's own flags, as its driver/*_driver.hpp declare them per op: -V verify everywhere; -w wall in
    conv, bnorm, layernorm; -s search, -S solution, -G gpualloc in conv only (in bnorm -s is --save, an op flag)."""
    conv = parse_invocation("conv -n 2 -V 1 -w 2 -s 1 -S ConvDirectNaiveFwd -G 1 -i 5 --wall 1")
    assert (conv.verify, conv.iters, conv.ignored_flags) == (1, 5, ("-w", "-s", "-S", "-G", "--wall"))
    assert conv.signature == parse_command("conv -n 2")
    bnorm = parse_invocation("bnorm -n 2 -c 4 -H 3 -W 3 -s 1 -V 0 -w 1")
    assert bnorm.signature.save and bnorm.verify == 0 and bnorm.ignored_flags == ("-w",)
    ln = parse_invocation("layernorm --input 2x8 --verify 1")
    assert ln.verify == 1 and ln.ignored_flags == ()
    assert parse_invocation("gemm -V 1").verify == 1 and parse_invocation("gemm").verify is None


@pytest.mark.parametrize("line,message", [
    ("gemm -w 1", r"^gemm: unknown flag '-w'$"),            # MIOpen's gemm driver has no wall-clock flag
    ("bnorm --search 1", r"^bnorm: unknown flag '--search'$"),
    ("conv -V 2", r"^conv: -V expects 0 or 1, got 2$"),
    ("convbfp16 --verify x", r"^conv: --verify expects an integer, got 'x'$"),
    ("layernorm -w 2", r"^layernorm: -w expects 0 or 1, got 2$"),
    ("conv -w 3", r"^conv: -w expects 0 or 1 or 2, got 3$"),
    ("conv -S", r"^conv: -S expects a value$"),
    ("conv -G=1", r"^conv: unknown flag '-G=1'$"),
])
def test_miopen_driver_flag_errors_name_the_flag(line: str, message: str) -> None:
    with pytest.raises(CommandError, match=message):
        parse_invocation(line)


def test_bnorm_boo_sample_line_save_run_layout() -> None:
    """BOO's bnorm line: --save 1 and --run 1 are MIOpen's (save the batch mean / inverse std; keep running
    statistics), so the training kernel takes and returns what BOO's `_native_batch_norm_legit_functional` does,
    in its order; --layout NHWC is the memory order of x (BOO: a channels_last tensor)."""
    sig = parse_command("bnormbfp16 --batchsize 8 --in_channels 64 --in_h 56 --in_w 56 -t 1 --iter 100 --save 1 "
                        "--run 1 --layout NHWC")
    assert sig.mode == "forward_training" and sig.layout == "NHWC" and sig.input_shape == (8, 56, 56, 64)
    assert sig.arg_names() == ["x", "scale", "bias", "running_mean", "running_var"]
    assert len(sig.output_shapes()) == 5   # y, saved mean, saved inverse std, new running mean and variance
    no_save = parse_command("bnorm -n 8 -c 4 -H 5 -W 5 --run 1")
    assert len(no_save.output_shapes()) == 3 and "running_mean" in no_save.arg_names()
    assert len(parse_command("bnorm -n 8 -c 4 -H 5 -W 5 --save 1").output_shapes()) == 3


def test_gemm_flags_and_defaults() -> None:
    sig = parse_command("gemm")
    assert isinstance(sig, GemmSignature)
    assert (sig.m, sig.k, sig.n, sig.trans_a, sig.trans_b, sig.mode) == (256, 256, 256, False, False, "forward")
    assert parse_command("gemm --a_w 3 --a_h 4 --b_w 5 --transA 1 --transB 1 --forw 2") == parse_command(
        "gemm -k 3 -m 4 -n 5 -u 1 -v 1 -F 2")
    sig = parse_command("gemm -k 3 -m 4 -n 5 -u 1")
    assert sig.input_shapes() == [(4, 3), (4, 5)] and sig.output_shapes() == [(3, 5)]


def test_bnorm_flags_and_defaults() -> None:
    from boo_engine.ops.bnorm import BatchNormSignature

    sig = parse_command("bnorm")
    assert isinstance(sig, BatchNormSignature)
    assert (sig.input_shape, sig.layout, sig.spatial, sig.mode, sig.run, sig.save) == (
        (32, 3, 32, 32), "NCHW", False, "forward_training", False, False)
    long = parse_command("bnormbfp16 --batchsize 2 --in_channels 4 --in_d 3 --in_h 5 --in_w 6 --alpha 1 --beta 0 "
                         "--forw 2 --back 0 --mode 1 --run 1 --save 1 --layout NDHWC")
    short = parse_command("bnormbfp16 -n 2 -c 4 -D 3 -H 5 -W 6 -A 1 -B 0 -F 2 -b 0 -m 1 -r 1 -s 1 -L NDHWC")
    assert long == short
    assert (short.input_shape, short.mode, short.param_shape) == ((2, 3, 5, 6, 4), "forward_inference", (4,))
    assert parse_command("bnorm -F 0 -b 1").mode == "backward"
    assert parse_command("bnorm -n 2 -c 3 -H 4 -W 5 -L NHWC -m 0").param_shape == (4, 5, 3)
    assert parse_command("bnormfp16 -n 2 -c 3 -H 4 -W 5 -L nhwc -m 1 -r 1 -s 1").func_name == (
        "bnorm_2d_float16_forward_training_2x4x5x3_nhwc_spatial_run_save")


def test_timing_args_are_stripped_and_kept() -> None:
    inv = parse_invocation("conv -n 2 -t 1 -c 8 --iter 7 -k 4")
    assert isinstance(inv, Command)
    assert (inv.iters, inv.time) == (7, 1)
    assert inv.text == "conv -n 2 -c 8 -k 4"
    assert inv.tokens == ("conv", "-n", "2", "-c", "8", "-k", "4")
    assert inv.signature == parse_command("conv -n 2 -c 8 -k 4")
    default = parse_invocation(["gemm"])
    assert (default.iters, default.time) == (100, 1)
    assert parse_invocation("gemm --iter=5 --time=0 --iter 9").iters == 9
    assert parse_invocation("gemm --time=0").time == 0
    # a leading MIOpenDriver (as in MIOpen's logs) is accepted and dropped
    assert parse_invocation("/opt/rocm/bin/MIOpenDriver gemm -k 8").text == "gemm -k 8"


def test_last_occurrence_wins() -> None:
    assert parse_command("conv -n 2 -n 3").batch == 3
    assert parse_command("conv --batchsize 2 -n 5").batch == 5


def test_negative_value_is_a_value_not_a_flag() -> None:
    with pytest.raises(CommandError, match=r"^conv: -p must be at least 0, got -1$"):
        parse_command("conv -p -1")


BAD = [
    ("convx -n 2", r"^unknown op 'convx'"),
    ("", r"^empty command$"),
    ("conv --foo 3", r"^conv: unknown flag '--foo'$"),
    ("conv -Z 3", r"^conv: unknown flag '-Z'$"),
    ("conv -nx 3", r"^conv: unknown flag '-nx'$"),
    ("conv 17", r"^conv: unexpected argument '17'$"),
    ("conv -n abc", r"^conv: -n expects an integer, got 'abc'$"),
    ("conv -n 2.5", r"^conv: -n expects an integer, got '2.5'$"),
    ("conv --batchsize=", r"^conv: --batchsize expects an integer, got ''$"),
    ("conv -n", r"^conv: -n expects a value$"),
    ("conv -n 0", r"^conv: -n must be positive, got 0$"),
    ("conv -k -4", r"^conv: -k must be positive, got -4$"),
    ("conv -H 3 -W 3 -y 5 -x 5", r"^conv: filter 5x5 larger than padded input 3x3$"),
    ("conv -H 7 -W 7 -y 3 -x 3 -l 4", r"^conv: dilated filter 9x3 larger than padded input 7x7$"),
    ("conv -c 6 -g 4", r"^conv: -c 6 not divisible by -g 4$"),
    ("conv -c 8 -k 6 -g 4", r"^conv: -k 6 not divisible by -g 4$"),
    ("conv -F 3", r"^conv: unsupported -F 3 \(forward mixed with backward\)$"),
    ("conv -F 0", r"^conv: unsupported -F 0 \(forward mixed with backward\)$"),
    ("conv -F 5", r"^conv: unsupported -F 5 \(forward mixed with backward\)$"),
    ("conv -F 11", r"^conv: unsupported -F 11 \(expected one of 1, 2, 4, 6, 7, 8, 9, 10\)$"),
    ("conv -I NCHW -f NCDHW", r"^conv: layouts disagree on the number of spatial dims"),
    ("conv -I NHHC", r"^conv: --in_layout 'NHHC' is not a 2-D layout"),
    ("conv -I NCDW", r"^conv: --in_layout 'NCDW' is not a 2-D layout"),
    ("conv -_ 1 -I NCW", r"^conv: --in_layout 'NCW' is not a 1-D layout"),
    ("conv -I NC", r"^conv: -I 'NC' is not a 1-D, 2-D or 3-D layout"),
    ("conv -_ 4", r"^conv: --spatial_dim 4 not supported"),
    ("conv -b 2", r"^conv: -b expects 0 or 1, got 2$"),
    ("conv -m fft", r"^conv: -m expects 'conv' or 'trans', got 'fft'$"),
    ("conv -Y 1", r"^conv: output padding \(-Y/-X\) only applies to a transposed conv"),
    ("conv -m trans -Y 1", r"^conv: -Y 1 must be smaller than the stride \(1\)$"),
    ("conv -m trans -Y 1 -l 2", r"^conv: -Y 1 must be smaller than the stride \(1\)$"),
    ("conv -m trans -H 2 -W 2 -y 1 -x 1 -p 3", r"^conv: transposed conv output"),
    ("conv -n 99999999999", r"^conv: -n 99999999999 is too large"),
    ("conv -n 9999999999999999999999", r"^conv: -n expects an integer"),
    ("layernorm --input 4x0x3", r"^layernorm: --input dimension must be positive, got 0$"),
    ("layernorm --input 4xx3", r"^layernorm: --input expects a shape like 16x128x768, got '4xx3'$"),
    ("layernorm -X ''", r"^layernorm: -X expects a shape"),
    ("layernorm --input 2x3 -o 2", r"^layernorm: --normalized_dim 2 out of range for a 2-D input \(expected 0..1\)$"),
    ("layernorm --input 2x3 -o -1", r"^layernorm: --normalized_dim -1 out of range"),
    ("layernorm -e abc", r"^layernorm: -e expects a number, got 'abc'$"),
    ("layernorm -e nan", r"^layernorm: -e expects a finite number, got 'nan'$"),
    ("layernorm -e -1", r"^layernorm: --eps must be a finite number >= 0"),
    ("layernorm -m 2", r"^layernorm: -m expects 0 or 1, got 2$"),
    ("layernorm -X 2x3x4 --input-permutation 0 2", r"^layernorm: --input-permutation 0 2 is not a permutation of 0..2"),
    ("layernorm -X 2x3x4 --input-permutation 0 1 3", r"^layernorm: --input-permutation 0 1 3 is not a permutation"),
    ("layernorm -X 2x3x4 --input-permutation=0,a", r"^layernorm: --input-permutation expects dims like 0 2 1 3, got 'a'$"),
    ("layernorm -X 2x3x4 --input-permutation 0 1 2 x", r"^layernorm: unexpected argument 'x'$"),
    ("layernorm --use-aten maybe", r"^layernorm: --use-aten expects 0, 1, true or false, got 'maybe'$"),
    ("layernorm --use-aten", r"^layernorm: --use-aten expects a value$"),
    ("layernorm -F 3", r"^layernorm: unsupported -F 3"),
    ("gemm -k 0", r"^gemm: --a_w must be positive, got 0$"),
    ("gemm -u 2", r"^gemm: -u expects 0 or 1, got 2$"),
    ("gemm -F 4", r"^gemm: unsupported -F 4"),
    ("gemm --iter 0", r"^gemm: --iter must be at least 1, got 0$"),
    ("gemm -t 5", r"^gemm: -t must be 0 or 1, got 5$"),
    ("gemm --iter", r"^gemm: --iter expects a value$"),
    ("gemm --iter x", r"^gemm: --iter expects an integer, got 'x'$"),
    ("--iter 5", r"^command has no op"),
    ("bnorm -F 1 -b 1", r"^bnorm: -F 1 with -b 1 runs forward and backward together"),
    ("bnorm -F 0", r"^bnorm: -F 0 -b 0 runs nothing"),
    ("bnorm -F 3", r"^bnorm: -F expects 0 \(off\), 1 \(train\) or 2 \(inference\), got 3$"),
    ("bnorm -A 2", r"^bnorm: only alpha=1 and beta=0 are supported, got -A 2 -B 0$"),
    ("bnorm -m 2", r"^bnorm: -m expects 0 or 1, got 2$"),
    ("bnorm -L NCDHW", r"^bnorm: -L 'NCDHW' does not fit a 2-D input"),
    ("bnorm -L NCXW", r"^bnorm: --layout 'NCXW' is not a 2-D or 3-D layout"),
    ("bnorm -n 0", r"^bnorm: input dim N must be positive, got 0$"),
    ("bnorm -D -1", r"^bnorm: -D must be at least 0"),
    ("bnorm -n 1 -c 2 -H 1 -W 1 -m 1 -r 1", r"^bnorm: updating running statistics \(-r 1\) needs more than one"),
    ("--iter x", r"^command: --iter expects an integer"),
    ("conv -I 'NCHW", r"^cannot split command"),
]


@pytest.mark.parametrize("cmd,pattern", BAD)
def test_bad_commands_raise_one_line_command_errors(cmd: str, pattern: str) -> None:
    with pytest.raises(CommandError, match=pattern) as info:
        parse_command(cmd)
    assert "\n" not in str(info.value)
    assert isinstance(info.value, ValueError)


def test_sample_commands_file_parses_entirely() -> None:
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "sample_commands.txt"
    commands = read_commands_file(path)
    assert len(commands) >= 10
    assert {c.signature.op for c in commands} >= {"conv", "layernorm", "gemm"}
    collected = read_commands_file(path, errors="collect")
    assert all(line.ok for line in collected) and len(collected) == len(commands)


def test_txt_commands_file(tmp_path) -> None:
    path = tmp_path / "cmds.txt"
    path.write_text(
        "# a comment\n"
        "\n"
        "conv -n 2 -c 8 -k 4 --iter 3\n"
        "   # indented comment\n"
        "gemm --a_w 8 -t 0\n"
        "layernorm --input '4x8' -m 1\n"
    )
    cmds = read_commands_file(path)
    assert [c.signature.op for c in cmds] == ["conv", "gemm", "layernorm"]
    assert [c.iters for c in cmds] == [3, 100, 100]
    assert cmds[1].time == 0
    # extra args are appended to every line: a CLI --iter overrides the file's
    cmds = read_commands_file(path, extra_args=["--iter", "5"])
    assert [c.iters for c in cmds] == [5, 5, 5]
    assert cmds[0].text == "conv -n 2 -c 8 -k 4"


def test_tsv_commands_file(tmp_path) -> None:
    path = tmp_path / "cmds.tsv"
    path.write_text("# op\tflags\nconv\t-n\t2\t-c\t8\t--in_layout\tNHWC\n\ngemmfp16\t--a_w\t32\t\t--iter\t4\n")
    cmds = read_commands_file(path)
    assert cmds[0].signature == parse_command("conv -n 2 -c 8 --in_layout NHWC")
    assert cmds[1].signature.func_name == "gemm_float16_forward_32x256x256"
    assert cmds[1].iters == 4


def test_commands_file_errors_name_file_and_line(tmp_path) -> None:
    path = tmp_path / "bad.txt"
    path.write_text("conv -n 2\n# fine\nconv -n zero\ngemm -k 0\nconvx\n")
    with pytest.raises(CommandError, match=rf"^{path}:3: conv: -n expects an integer, got 'zero'$"):
        read_commands_file(path)
    lines = read_commands_file(path, errors="collect")
    assert all(isinstance(line, CommandLine) for line in lines)
    assert [line.source for line in lines] == [f"{path}:1", f"{path}:3", f"{path}:4", f"{path}:5"]
    assert [line.ok for line in lines] == [True, False, False, False]
    assert lines[0].command is not None and lines[0].error is None
    assert lines[2].command is None and lines[2].error == "gemm: --a_w must be positive, got 0"
    assert lines[3].error.startswith("unknown op 'convx'")
    assert lines[1].text == "conv -n zero"


def test_commands_file_unreadable(tmp_path) -> None:
    with pytest.raises(CommandError, match="commands file not found: .*nope.txt"):
        read_commands_file(tmp_path / "nope.txt")
    with pytest.raises(CommandError, match="commands file not found"):
        read_commands_file(tmp_path / "nope.txt", errors="collect")
    with pytest.raises(CommandError, match="is a directory"):
        read_commands_file(tmp_path)
    binary = tmp_path / "bin.txt"
    binary.write_bytes(b"\xff\xfe\x00conv")
    with pytest.raises(CommandError, match="not UTF-8"):
        read_commands_file(binary)
    quote = tmp_path / "q.txt"
    quote.write_text("conv -I 'NCHW\n")
    with pytest.raises(CommandError, match=rf"^{quote}:1: cannot split line"):
        read_commands_file(quote)
