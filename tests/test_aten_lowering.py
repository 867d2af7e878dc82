"""General lowering (compile/lowering.py): an aten op IREE's torch input cannot lower is decomposed by torch, the
decompositions chosen by the frontend itself (no op list) and kept in the kernel's cache key, MLIR and meta; an op
neither can lower fails in one line naming it. Real exports, real IREE compiles, kernels run on this CPU."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from boo_engine.commands import parse_command
from boo_engine.compile.build import compile_signature
from boo_engine.compile.flags import as_target, key_flags
from boo_engine.compile.lowering import HEADER, decompositions_in
from boo_engine.errors import CompileError
from boo_engine.numerics import check_numerics, noise_pattern
from boo_engine.variants import BASELINE

BATCH_NORM_EVAL = """aten::batch_norm "[[2, 8, 6, 6], [8], [8], [8], [8], [], [], [], []]" "['float', 'float', 'float', 'float', 'float', 'Scalar', 'Scalar', 'Scalar', 'Scalar']" "[[288, 36, 6, 1], [1], [1], [1], [1], [], [], [], []]" "['', '', '', '', '', 'False', '0.1', '1e-05', 'True']\""""
# a training-mode batch norm as BatchNorm1d records it (3-D input): it writes its running statistics in place
BATCH_NORM_TRAIN = """aten::batch_norm "[[2, 16, 64], [16], [16], [16], [16], [], [], [], []]" "['float', 'float', 'float', 'float', 'float', 'Scalar', 'Scalar', 'Scalar', 'Scalar']" "[[1024, 64, 1], [1], [1], [1], [1], [], [], [], []]" "['', '', '', '', '', 'True', '0.10000000000000001', '1.0000000000000001e-05', 'True']\""""
# SiLU's gradient (a LLaMA MLP's, a UNet's): an op with a CompositeImplicitAutograd kernel beside its CPU kernel
SILU_BACKWARD = """aten::silu_backward "[[2, 16, 64], [2, 16, 64]]" "['c10::BFloat16', 'c10::BFloat16']" "[[1024, 64, 1], [1024, 64, 1]]" "['', '']\""""
# a ConvTranspose2d's backward whose output gradient is a slice (a UNet's concatenation): torch has no
# decomposition of convolution_backward and IREE 3.13 lowers no transposed one
CONV_T_BACKWARD = """aten::convolution_backward "[[1, 4, 8, 8], [1, 8, 4, 4], [8, 4, 2, 2], [], [], [], [], [], [], [], []]" "['float', 'float', 'float', 'ScalarList', 'ScalarList', 'ScalarList', 'ScalarList', 'Scalar', 'ScalarList', 'Scalar', 'ScalarList']" "[[512, 64, 8, 1], [128, 16, 4, 1], [16, 4, 2, 1], [], [], [], [], [], [], [], []]" "['', '', '', '[4]', '[2, 2]', '[0, 0]', '[1, 1]', 'True', '[0, 0]', '1', '[True, True, True]']\""""
# a 3-D max pool's backward (the zoo's Conv3d stack): no decomposition in torch, none in IREE
MAX_POOL3D_BACKWARD = """aten::max_pool3d_with_indices_backward "[[1, 2, 2, 2, 2], [1, 2, 4, 4, 4], [], [], [], [], [], [1, 2, 2, 2, 2]]" "['float', 'float', 'ScalarList', 'ScalarList', 'ScalarList', 'ScalarList', 'Scalar', 'long int']" "[[16, 8, 4, 2, 1], [128, 64, 16, 4, 1], [], [], [], [], [], [16, 8, 4, 2, 1]]" "['', '', '[2, 2, 2]', '[2, 2, 2]', '[0, 0, 0]', '[1, 1, 1]', 'False', '']\""""
# a causal attention's backward in bfloat16 as the CPU records it (the zoo's LLaMA block): the same
SDPA_BACKWARD = """aten::_scaled_dot_product_flash_attention_for_cpu_backward "[[2, 4, 16, 8], [2, 4, 16, 8], [2, 4, 16, 8], [2, 4, 16, 8], [2, 4, 16, 8], [2, 4, 16], [], [], [], []]" "['c10::BFloat16', 'c10::BFloat16', 'c10::BFloat16', 'c10::BFloat16', 'c10::BFloat16', 'float', 'Scalar', 'Scalar', '', '']" "[[512, 8, 32, 1], [512, 8, 32, 1], [512, 128, 8, 1], [512, 128, 8, 1], [512, 8, 32, 1], [64, 1, 4], [], [], [], []]" "['', '', '', '', '', '', '0.0', 'True', '', '']\""""
# 16-bit calls: a Linear's bias gradient in bfloat16 (computed in float32 by default: in bfloat16 IREE accumulates
# in 16 bits, 4.2x torch's error); a bfloat16 layer norm (torch's decomposition, float32: IREE's own 1.4x torch's)
BF16_SUM = """aten::sum "[[32, 32], [], [], []]" "['c10::BFloat16', 'ScalarList', 'Scalar', '']" "[[32, 1], [], [], []]" "['', '[0]', 'True', '']\""""
BF16_LAYER_NORM = """aten::layer_norm "[[8, 16, 256], [], [256], [256], [], []]" "['c10::BFloat16', 'ScalarList', 'c10::BFloat16', 'c10::BFloat16', 'Scalar', 'Scalar']" "[[4096, 256, 1], [], [1], [1], [], []]" "['', '[256]', '', '', '1e-05', 'True']\""""
# the hidden-style lines, small shapes
PASSING = [
    BATCH_NORM_EVAL,
    BATCH_NORM_TRAIN,
    SILU_BACKWARD,
    CONV_T_BACKWARD,
    MAX_POOL3D_BACKWARD,
    SDPA_BACKWARD,
    BF16_SUM,
    BF16_LAYER_NORM,
    # layer_norm of a transposed view (strides of a [16, 4, 32] buffer)
    """aten::layer_norm "[[4, 16, 32], [], [32], [32], [], []]" "['float', 'ScalarList', 'float', 'float', 'Scalar', 'Scalar']" "[[32, 128, 1], [], [1], [1], [], []]" "['', '[32]', '', '', '1e-05', 'True']\"""",
    """aten::scaled_dot_product_attention "[[2, 4, 32, 16], [2, 4, 32, 16], [2, 4, 32, 16], [], [], [], [], []]" "['c10::BFloat16', 'c10::BFloat16', 'c10::BFloat16', '', 'Scalar', 'Scalar', 'Scalar', 'Scalar']" "[[2048, 512, 16, 1], [2048, 512, 16, 1], [2048, 512, 16, 1], [], [], [], [], []]" "['', '', '', 'None', '0.0', 'True', 'None', 'False']\"""",
    """aten::argmax "[[4, 8, 16], [], []]" "['float', 'Scalar', 'Scalar']" "[[128, 16, 1], [], []]" "['', '1', 'False']\"""",
    """aten::bmm "[[8, 32, 48], [8, 48, 64]]" "['c10::BFloat16', 'c10::BFloat16']" "[[1536, 48, 1], [3072, 64, 1]]" "['', '']\"""",
]
FP16_ADDMM = """aten::addmm "[[64], [128, 96], [96, 64], [], []]" "['c10::Half', 'c10::Half', 'c10::Half', 'Scalar', 'Scalar']" "[[1], [96, 1], [64, 1], [], []]" "['', '', '', '1', '1']\""""
COMMANDS = PASSING + [FP16_ADDMM]   # compiled once by conftest's `compiled`


def _unary(op: str) -> str:
    return f"""aten::{op} "[[4, 8]]" "['float']" "[[8, 1]]" "['']\""""


@pytest.mark.parametrize("command", PASSING, ids=[c.split()[0] for c in PASSING])
def test_hidden_style_lines_compile_run_and_pass_numerics(command, cache, compiled):
    sig = parse_command(command)
    assert compiled[sig.func_name].num_dispatches >= 1
    info = check_numerics(sig, "cpu", cache=cache)
    assert info.verdict == "pass", info.stats.get("reason")


def test_batch_norm_eval_is_decomposed_by_rule_and_says_so(compiled):
    """torch.export leaves _native_batch_norm_legit_no_training, which IREE's importer can only write as a
    generic torch.operator; torch's decomposition of it calls _native_batch_norm_legit (in-place statistics),
    decomposed in turn. Both are named in the MLIR's first line, the entry's meta and its key."""
    art = compiled[parse_command(BATCH_NORM_EVAL).func_name]
    expected = ("aten._native_batch_norm_legit.default", "aten._native_batch_norm_legit_no_training.default")
    assert art.meta["decompositions"] == list(expected)
    assert art.to_compile_info().decompositions == list(expected)   # the dashboard's compile detail
    text = Path(art.mlir_path).read_text()
    assert text.startswith(HEADER) and decompositions_in(text) == expected
    assert "torch.operator" not in text
    # ops IREE lowers itself need nothing: no header, an empty list
    bmm = compiled[parse_command(next(c for c in PASSING if c.startswith("aten::bmm "))).func_name]
    assert bmm.meta["decompositions"] == []


def test_a_call_writing_into_its_inputs_returns_what_the_op_returns(compiled):
    """torch.export functionalizes the running statistics' in-place update into two extra outputs placed before
    the result: the kernel returned 3 tensors to the reference's 1, and every such line failed numerics."""
    art = compiled[parse_command(BATCH_NORM_TRAIN).func_name]
    (ret,) = [ln for ln in Path(art.mlir_path).read_text().splitlines() if ln.strip().startswith("return ")]
    assert ret.strip().startswith("return %") and "," not in ret.split(":")[0], ret


def test_an_op_whose_decomposition_export_ignores_is_decomposed_all_the_same(compiled):
    """run_decompositions leaves aten.silu_backward as it is even with its decomposition in the table (the op has a
    CompositeImplicitAutograd kernel beside its CPU one): the rule traces it with make_fx instead."""
    art = compiled[parse_command(SILU_BACKWARD).func_name]
    assert art.meta["decompositions"] == ["aten.silu_backward.default"]
    assert "silu_backward" not in Path(art.mlir_path).read_text().split("\n", 1)[1]


@pytest.mark.parametrize("command, op", [(CONV_T_BACKWARD, "convolution_backward"),
                                         (MAX_POOL3D_BACKWARD, "max_pool3d_with_indices_backward"),
                                         (SDPA_BACKWARD, "_scaled_dot_product_flash_attention_for_cpu_backward")])
def test_an_op_torch_cannot_decompose_takes_ours(command, op, compiled):
    """Ours (lowering.ours(): conv_forms, ops/decompositions.py), named in the decompositions like torch's own."""
    art = compiled[parse_command(command).func_name]
    assert art.meta["decompositions"] == [f"aten.{op}.default"]
    assert op not in Path(art.mlir_path).read_text().split("\n", 1)[1]


def test_16_bit_calls_compute_in_float32_and_say_so(cache, compiled):
    """The default formulation of a 16-bit call of an op IREE does not lower itself widens it to float32 (its
    numerics pass, above); `in_dtype` keeps bfloat16, and BOO's criterion fails it: the difference is real. A
    16-bit layer norm is no op IREE lowers itself: it goes through torch's decomposition, in float32."""
    from boo_engine.ops.aten import IN_DTYPE
    from boo_engine.variants import Variant

    sig = parse_command(BF16_SUM)
    assert sig.formulations() == ("default", IN_DTYPE) and sig.computes_in_float32
    assert "f32" in Path(compiled[sig.func_name].mlir_path).read_text()
    info = check_numerics(sig, "cpu", Variant(name="bf16", formulation=IN_DTYPE), cache=cache)
    assert info.verdict == "fail" and "noisy" in info.stats["reason"], info.stats
    ln = parse_command(BF16_LAYER_NORM)
    assert ln.decompose_for_export and ln.computes_in_float32
    assert parse_command(FP16_ADDMM).formulations() == ("default",), "a matmul stays IREE's own, in 16 bits"


@pytest.mark.parametrize("target", ["hip:gfx942", "cuda:sm_80"])
def test_batch_norm_eval_cross_compiles_for_gpus(target, cache):
    art = compile_signature(parse_command(BATCH_NORM_EVAL), target, cache=cache)
    assert art.num_dispatches >= 1 and len(art.meta["decompositions"]) == 2


def test_fp16_addmm_fails_boos_criterion_and_says_what_the_error_suggests(cache, compiled):
    """IREE rounds the f16 product before adding the bias (torch rounds once): error std ~sqrt(2)x torch's,
    over BOO's 1.2x. The criterion stays; the reason says what the pattern suggests."""
    info = check_numerics(parse_command(FP16_ADDMM), "cpu", cache=cache)
    assert info.verdict == "fail"
    reason = info.stats["reason"]
    assert "noisy: std err" in reason and "1.2*torch std" in reason
    assert "about sqrt(2): consistent with an intermediate rounded to float16" in reason, reason


def test_noise_pattern_reads_sqrt2_only_in_16_bit_dtypes():
    assert "about sqrt(2)" in noise_pattern(1.40, 1.0, "bfloat16")
    assert noise_pattern(1.40, 1.0, "float32") == " (1.40x torch's)"
    assert noise_pattern(2.5, 1.0, "float16") == " (2.50x torch's)"
    assert noise_pattern(1.0, 0.0, "float16") == ""


@pytest.mark.parametrize("op, message", [
    # torch-mlir has no torch.aten.median, and torch no decomposition of it
    ("median", r"^aten::median: IREE's torch input cannot lower torch\.aten\.median \(no decomposition in torch "
               r"either\)$"),
    # torch decomposes lgamma to prims.lgamma, which IREE cannot lower either
    ("lgamma", r"^aten::lgamma: IREE's torch input cannot lower torch\.aten\.lgamma \(torch's decomposition emits "
               r"torch\.prims\.lgamma, which IREE cannot lower either\)$"),
])
def test_an_op_nothing_can_lower_fails_in_one_line_naming_it(op, message, cache):
    with pytest.raises(CompileError, match=message):
        compile_signature(parse_command(_unary(op)), "cpu", cache=cache)



def test_an_op_whose_conversion_fails_on_its_constants_is_named():
    """IREE's conversion leaves aten.max_pool3d_with_indices_backward as it is and reports its first illegal op,
    the op's `torch.constant.int` argument: the rule saw no aten op, and the kernel failed in iree-compile naming
    a constant; the op the failed conversion left is named (and then decomposed: ours, below)."""
    import torch
    from iree.compiler import ir
    from iree.compiler.extras.fx_importer import FxImporter

    from boo_engine.compile.export import fake_sample_args
    from boo_engine.compile.lowering import unlowered

    sig = parse_command(MAX_POOL3D_BACKWARD)
    program = torch.export.export(sig.as_module(), fake_sample_args(sig), strict=False)
    importer = FxImporter(context=ir.Context())
    importer.import_frozen_program(program, func_name="main")
    assert unlowered(str(importer.module)) == ["torch.aten.max_pool3d_with_indices_backward"]


def test_the_cli_shows_the_one_line(tmp_path, cli_env):
    proc = subprocess.run([sys.executable, "-m", "boo_tui", _unary("median"), "--headless", "--backend", "iree",
                           "--rounds", "1", "--max-time", "0.05", "--db", str(tmp_path / "r.db")],
                          capture_output=True, text=True, timeout=300, env=cli_env)
    assert ("compile failed: aten::median: IREE's torch input cannot lower torch.aten.median (no decomposition in "
            "torch either)") in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr


def test_decompositions_are_part_of_the_cache_key(cache, compiled):
    """Two exports differing only in the decompositions applied never share an entry; a kernel that needed none
    keeps the key it had before decompositions were keyed."""
    flags, ident, vkey = ["--x"], "cpu:A", BASELINE.key_material()
    plain = cache.key_for("m", flags, ident, vkey)
    assert cache.key_for("m", flags, ident, vkey, ()) == plain
    one = cache.key_for("m", flags, ident, vkey, ("aten.a.default",))
    two = cache.key_for("m", flags, ident, vkey, ("aten.a.default", "aten.b.default"))
    assert len({plain, one, two}) == 3
    # the batch_norm entry's key is the one with its decompositions, not the one without
    sig = parse_command(BATCH_NORM_EVAL)
    art = compiled[sig.func_name]
    text = Path(art.mlir_path).read_text()
    kflags = key_flags(sig, as_target("cpu"), BASELINE)
    ident, vkey = as_target("cpu").identity(), BASELINE.key_material(sig.func_name)
    assert art.key == cache.key_for(text, kflags, ident, vkey, decompositions_in(text))
    assert art.key != cache.key_for(text, kflags, ident, vkey)


def test_the_detail_pane_names_the_decompositions(compiled):
    from rich.console import Console

    from boo_engine.results import JobResult
    from boo_tui.detail import render_detail
    from boo_tui.run_model import JobView

    art = compiled[parse_command(BATCH_NORM_EVAL).func_name]
    result = JobResult(job_id="j", command=BATCH_NORM_EVAL, func_name=art.func_name, op="aten", variant="baseline",
                       target="cpu", backend="iree", status="done", compile=art.to_compile_info())
    console = Console(width=300, record=True)
    console.print(render_detail(JobView(result)))
    (line,) = [ln for ln in console.export_text().splitlines() if ln.startswith("decomposed")]
    assert line.split(None, 1)[1].strip() == ("aten._native_batch_norm_legit.default, "
                                              "aten._native_batch_norm_legit_no_training.default")
