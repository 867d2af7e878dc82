"""The `best` column: each kernel in the best known configuration for this machine, from (in this order) a
finished tune's winner measured here, the per-machine `tune --defaults` table, the built-in rules; and a run
that measures it beside BOO's build, recording what chose it. Real tables, a real results database, real
compiles and kernels."""
from __future__ import annotations

import json

import pytest
from best_support import boo_beside_best

from boo_engine.commands import parse_command
from boo_engine.config import SessionConfig
from boo_engine.cpu_defaults.machine import host_cpu
from boo_engine.cpu_defaults.rules import op_class
from boo_engine.cpu_defaults.table import machine_key, store_machine
from boo_engine.locations import DEFAULTS_TABLE_ENV
from boo_engine.results import DONE, IREE
from boo_engine.session import Session
from boo_engine.store import Store
from boo_engine.store.tuned import TunedLookup, this_machine, tuned_winners
from boo_engine.targets import Target
from boo_engine.tune.records import IMPROVED, Tried, TunedKernel, TuneRecords
from boo_engine.variants import BASELINE, BEST
from boo_engine.variants.best import best_variant

CPU = Target("cpu")
BWD_DATA = "conv -n 2 -c 8 -H 10 -W 10 -k 8 -y 3 -x 3 -p 1 -q 1 -F 2"
GEMM = "gemm -k 32 -m 32 -n 32"
REASSOCIATE_FLAG = "--iree-llvmcpu-reassociate-fp-reductions=true"


def formulation(variant) -> str | None:
    forms = dict(variant.kernel_formulations)
    return next(iter(forms.values()), None)


@pytest.mark.parametrize("command, cls, form", [
    (BWD_DATA, "conv:float32:nchw:kxk:backward:data", "matmul"),
    ("conv -n 2 -c 8 -H 10 -W 10 -k 8 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -F 2",
     "conv:float32:nchw:kxk:backward:data-strided", "matmul"),   # (a matmul and a fold: conv_forms)
    ("conv -n 2 -c 8 -H 10 -W 10 -k 8 -y 3 -x 3 -p 1 -q 1 -F 4", "conv:float32:nchw:kxk:backward:weight", "matmul"),
    ("conv -n 2 -c 8 -H 10 -W 10 -k 8 -y 3 -x 3 -p 1 -q 1 -g 4", "conv:float32:nchw:kxk:forward:grouped", "matmul"),
    ("conv -n 2 -c 8 -H 10 -W 10 -k 8 -y 3 -x 3 -p 1 -q 1", "conv:float32:nchw:kxk:forward", None),
    ("conv -n 2 -c 8 -H 10 -W 10 -k 8 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2", "conv:float32:nchw:kxk:forward:strided", None),
    ("conv -n 2 -c 8 -H 10 -W 10 -k 8 -y 3 -x 3 -p 1 -q 1 --in_layout NHWC --out_layout NHWC --fil_layout NHWC",
     "conv:float32:nhwc:kxk:forward", "matmul"),
    (GEMM, "gemm:float32:-:-:forward", None),
])
def test_rules_choose_the_formulation_by_class(command, cls, form):
    sig = parse_command(command)
    assert str(op_class(sig)) == cls
    v = best_variant(sig, CPU)
    assert (v.name, v.base, v.best) == ("best", "ours", "rules")
    assert formulation(v) == form


def test_a_layer_norm_forward_is_boos_own_by_rule_its_backward_ours():
    """BOO exports a layer norm forward as one dispatch (ours is four): the best column takes BOO's build."""
    fwd = best_variant(parse_command("layernorm --input 4x8x32 --normalized_dim 2 --mode 1"), CPU)
    assert (fwd.name, fwd.base, fwd.best, fwd.kernel_formulations) == ("best", "boo", "rules", ())
    assert best_variant(parse_command("layernorm --input 4x8x32 --normalized_dim 2 -F 2"), CPU).base == "ours"


def test_reductions_get_reassociated_sums_in_either_build_convs_and_gemms_do_not():
    """Without --iree-llvmcpu-reassociate-fp-reductions a row's sum is one chain of dependent adds: the layer norm
    forward (BOO's build in the best column) takes the flag as a variant flag, a backward layer norm and a batch
    norm (ours) as their per-op defaults; a conv and a gemm get none."""
    from boo_engine.cpu_defaults.machine import per_op_default_flags
    from boo_engine.cpu_defaults.rules import REASSOCIATE

    fwd = best_variant(parse_command("layernorm --input 4x8x32 --normalized_dim 2 --mode 1"), CPU)
    assert fwd.base == "boo" and fwd.flags == (REASSOCIATE,)
    for command in ("layernorm --input 4x8x32 --normalized_dim 2 -F 2", "bnorm -n 2 -c 8 -H 6 -W 6 -m 1 -F 1",
                    "bnormbfp16 -n 2 -c 8 -H 6 -W 6 -m 1 -F 2"):
        sig = parse_command(command)
        assert best_variant(sig, CPU).base == "ours" and REASSOCIATE in per_op_default_flags(sig, CPU), command
    for command in (GEMM, BWD_DATA, "conv -n 2 -c 8 -H 10 -W 10 -k 8 -y 3 -x 3 -p 1 -q 1"):
        sig = parse_command(command)
        assert REASSOCIATE not in per_op_default_flags(sig, CPU) + list(best_variant(sig, CPU).flags), command
    assert best_variant(parse_command("layernorm --input 4x8x32 --normalized_dim 2 --mode 1"),
                        Target("cuda", "sm_80")).flags == ()   # (a CPU rule)


def test_reassociated_reductions_pass_numerics_in_16_bits(tmp_path):
    """Reordered sums change the rounding: a bf16 layer norm and a bf16 batch norm, BOO's build and the best
    column side by side, both pass the numerics check against torch."""
    jobs = boo_beside_best(tmp_path, "layernormbfp16 --input 8x16x384 --eps 1e-5 --mode 0 --normalized_dim 2 -F 1",
                           "bnormbfp16 -n 4 -c 16 -H 14 -W 14 -m 1 -F 1")
    assert all(REASSOCIATE_FLAG in r.compile.command for r in jobs if r.variant == "best")


DT, MM = ("--iree-opt-data-tiling",), ()


@pytest.mark.parametrize("command, expected", [
    ("conv -n 2 -c 64 -H 28 -W 28 -k 64 -y 3 -x 3 -p 1 -q 1", MM),              # 576 long, 784 = 49 x 16
    ("conv -n 1 -c 128 -H 14 -W 14 -k 128 -y 3 -x 3 -p 1 -q 1", DT),            # 196 positions: data tiles
    ("conv -n 2 -c 256 -H 7 -W 7 -k 256 -y 3 -x 3 -p 1 -q 1", MM),              # 49: channels innermost
    ("conv -n 1 -c 512 -H 7 -W 7 -k 512 -y 3 -x 3 -p 1 -q 1", DT),              # 512 channels: data tiles
    ("conv -n 2 -c 32 -H 28 -W 28 -k 32 -y 3 -x 3 -p 1 -q 1 --in_layout NHWC --out_layout NHWC --fil_layout NHWC",
     MM),
    ("conv -n 2 -c 16 -H 56 -W 56 -k 32 -y 3 -x 3 -p 1 -q 1", MM),              # 144: packing does not pay
    ("conv -n 1 -c 24 -H 48 -W 32 -k 24 -y 3 -x 3 -p 1 -q 1", MM),              # 216: IREE's conv 2.6x slower
    ("conv -n 8 -c 8 -H 32 -W 32 -k 8 -y 3 -x 3 -p 1 -q 1", None),              # 72: IREE's own conv
    ("conv -n 8 -c 3 -H 32 -W 32 -k 8 -y 3 -x 3 -p 1 -q 1", None),
    ("conv -n 1 -c 64 -H 38 -W 38 -k 64 -y 3 -x 1 -p 1 -q 0", DT),              # not 3x3: 192 is long enough
    ("conv -n 1 -c 64 -H 38 -W 38 -k 64 -y 1 -x 3 -p 0 -q 1", DT),
    ("conv -n 1 -c 48 -H 48 -W 32 -k 48 -y 1 -x 3 -p 0 -q 1", MM),              # 144: the plain matmul
    ("conv -n 1 -c 96 -H 48 -W 32 -k 96 -y 3 -x 1 -p 1 -q 0", MM),              # 288, but 1,536 = 96 x 16
    ("conv -n 2 -c 8 -H 32 -W 32 -k 8 -y 3 -x 1 -p 1 -q 0", MM),                # never IREE's conv (14x slower)
    ("conv -n 2 -c 8 -H 38 -W 38 -k 16 -y 5 -x 5 -p 2 -q 2", DT),               # 5x5: 200
    ("conv -n 2 -c 64 -H 28 -W 28 -k 64 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2", None),  # strided: im2col
    ("conv -n 2 -c 64 -H 14 -W 14 -k 64 -y 3 -x 3 -p 1 -q 1 -g 4", None),       # grouped: the plain matmul
    ("conv -n 2 -c 64 -H 28 -W 28 -k 64 -y 1 -x 1", None),                      # 1x1
    ("conv -n 2 -c 64 -H 28 -W 28 -k 64 -y 3 -x 3 -p 1 -q 1 -F 2", None),       # a gradient
    ("convbfp16 -n 2 -c 64 -H 28 -W 28 -k 64 -y 3 -x 3 -p 1 -q 1", None),
    ("conv -n 1 -c 32 --in_d 8 -H 8 -W 8 -k 32 --fil_d 3 -y 3 -x 3 -p 1 -q 1 --pad_d 1 --spatial_dim 3", None),  # 3-D
])
def test_a_plain_kxk_conv_with_avx512_is_our_matmul_unless_iree_conv_is_known_faster(command, expected):
    """A plain kxk f32 forward conv on an AVX-512 CPU: the matmul formulation, data-tiled for long dot products
    (C x taps >= 256, or >= 192 for a filter other than 3x3) unless its output positions are whole vector tiles
    (aligned workgroup tiles do better there), except a 3x3 one with short dot products (< 128),
    which stays IREE's own conv; never without AVX-512; on this machine the best column says so exactly then."""
    from boo_engine.cpu_defaults.rules import rule_conv_matmul

    sig = parse_command(command)
    zen5 = {"avx", "avx2", "fma", "f16c", "avx512f", "avx512bw"}
    assert rule_conv_matmul(op_class(sig), sig, zen5) == expected
    assert rule_conv_matmul(op_class(sig), sig, {"avx", "avx2", "fma", "f16c"}) is None
    v = best_variant(sig, CPU)
    if expected is not None and host_cpu().has("avx512f"):
        assert formulation(v) == "matmul" and v.base == "ours" and v.flags == expected
    else:
        assert "--iree-opt-data-tiling" not in v.flags


@pytest.mark.parametrize("command, expected", [
    ("conv -n 2 -c 8 -H 10 -W 10 -k 8 -y 3 -x 3 -p 1 -q 1 -F 4", True),           # weight gradient
    ("conv -n 2 -c 8 -H 10 -W 10 -k 8 -y 1 -x 1 -F 10 -b 1", True),               # all three
    ("conv -n 2 -c 8 -H 10 -W 10 -k 8 -y 3 -x 3 -p 1 -q 1 -F 9 -b 1", True),       # weight and bias
    ("conv -n 2 -c 8 -H 10 -W 10 -k 8 -y 3 -x 3 -p 1 -q 1 -F 2", False),          # data gradient: no sum over images
    ("conv -n 2 -c 8 -H 10 -W 10 -k 8 -y 3 -x 3 -p 1 -q 1", False),               # forward
    (GEMM, False),
])
def test_a_convs_weight_and_bias_gradients_are_summed_reassociated_in_the_best_column(command, expected):
    """The sums over every image and position of a weight or bias gradient: reassociated in the best column (the
    boo column keeps BOO's flags exactly)."""
    from boo_engine.cpu_defaults.rules import REASSOCIATE, rule_reassociated_gradients

    sig = parse_command(command)
    assert rule_reassociated_gradients(op_class(sig)) is expected
    assert (REASSOCIATE in best_variant(sig, CPU).flags) is expected


NHWC_1X1 = "-y 1 -x 1 --in_layout NHWC --out_layout NHWC --fil_layout NHWC"


@pytest.mark.parametrize("command, expected", [
    (f"conv -n 8 -c 128 -H 24 -W 48 -k 384 {NHWC_1X1}", True),      # the filter (F, C) read transposed
    (f"conv -n 4 -c 35 -H 48 -W 32 -k 35 {NHWC_1X1}", True),
    (f"conv -n 4 -c 16 -H 32 -W 32 -k 16 {NHWC_1X1}", False),       # 16 channels: packing costs more
    (f"conv -n 2 -c 64 -H 28 -W 28 -k 128 -u 2 -v 2 {NHWC_1X1}", False),   # strided: no gain
    ("conv -n 4 -c 35 -H 48 -W 32 -k 35 -y 1 -x 1", False),            # channels-first
    (f"convbfp16 -n 4 -c 35 -H 48 -W 32 -k 35 {NHWC_1X1}", False),     # 16-bit: the per-op rule's
    (f"conv -n 4 -c 35 -H 48 -W 32 -k 35 {NHWC_1X1} -F 2", False),     # a gradient
])
def test_a_channels_last_pointwise_f32_conv_is_data_tiled_by_rule(command, expected):
    """A channels-last 1x1 f32 forward conv with 32 or more input channels on an AVX-512 CPU is data-tiled in the
    best column (only there: never in the per-op flags); on this machine the best column says so exactly then."""
    from boo_engine.cpu_defaults.machine import per_op_default_flags
    from boo_engine.cpu_defaults.rules import DATA_TILING, rule_data_tiled_pointwise

    sig = parse_command(command)
    zen4 = {"avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512bf16"}
    assert rule_data_tiled_pointwise(op_class(sig), sig, zen4) is expected
    assert not rule_data_tiled_pointwise(op_class(sig), sig, {"avx", "avx2", "fma", "f16c"})
    if sig.dtype_name == "float32":
        assert DATA_TILING not in per_op_default_flags(sig, CPU)
        assert (DATA_TILING in best_variant(sig, CPU).flags) is (expected and host_cpu().has("avx512f"))


LINEAR_STRIDES = "\"[[1], [64, 1], [1, 64], [], []]\""


@pytest.mark.parametrize("command, expected", [
    ("gemm --a_w 256 --a_h 512 --b_w 512 --transB 1", True),            # B read across its rows
    ("gemm --a_w 256 --a_h 512 --b_w 512 --transA 1 --transB 1", True),
    ("gemmfp16 --a_w 256 --a_h 512 --b_w 512 --transB 1", True),
    ("gemm --a_w 256 --a_h 512 --b_w 512", False),                      # in order already: packing costs 1-3%
    ("gemm --a_w 256 --a_h 512 --b_w 512 --transA 1", False),
    ("gemmfp16 --a_w 128 --a_h 256 --b_w 256", False),
    ("gemmbfp16 --a_w 256 --a_h 512 --b_w 512", "bf16"),                # native bf16 dot products' tiles
    ("gemmbfp16 --a_w 256 --a_h 512 --b_w 512 --transA 1", "bf16"),
    # a linear layer: addmm(bias, x, weight.t()), linear(x, weight, bias)
    ('aten::addmm "[[192], [256, 64], [64, 192], [], []]" "[\'float\', \'float\', \'float\', \'Scalar\', '
     '\'Scalar\']" ' + LINEAR_STRIDES + ' "[\'\', \'\', \'\', \'1\', \'1\']"', True),
    ('aten::addmm "[[192], [256, 64], [64, 192], [], []]" "[\'float\', \'float\', \'float\', \'Scalar\', '
     '\'Scalar\']" "[[1], [64, 1], [192, 1], [], []]" "[\'\', \'\', \'\', \'1\', \'1\']"', False),
    ('aten::linear "[[256, 64], [192, 64], [192]]" "[\'float\', \'float\', \'float\']" '
     '"[[64, 1], [64, 1], [1]]" "[\'\', \'\', \'\']"', True),
    ('aten::mm "[[256, 192], [192, 64]]" "[\'float\', \'float\']" "[[192, 1], [64, 1]]" "[\'\', \'\']"', False),
    ('aten::mm "[[256, 192], [192, 64]]" "[\'float\', \'float\']" "[[192, 1], [1, 192]]" "[\'\', \'\']"', True),
    # a batched matmul (attention's q @ k^T) lost 12%: none
    ('aten::bmm "[[16, 64, 16], [16, 16, 64]]" "[\'float\', \'float\']" "[[1024, 16, 1], [1024, 1, 16]]" '
     '"[\'\', \'\']"', False),
    ("conv -n 2 -c 8 -H 10 -W 10 -k 8 -y 1 -x 1", False),
])
def test_a_transposed_or_bf16_matmul_is_data_tiled_by_rule(command, expected):
    """A 2-D matmul whose right-hand operand is read transposed (f32, f16) on an AVX-512 CPU, or any bf16 one on a
    CPU with native bf16 dot products, is data-tiled in the best column; the per-op flags (what a tuning spec is
    compiled with) never are; on this machine the best column says so exactly then."""
    from boo_engine.cpu_defaults.machine import per_op_default_flags
    from boo_engine.cpu_defaults.rules import DATA_TILING, rule_data_tiled_gemm

    sig = parse_command(command)
    zen4 = {"avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512bf16"}
    avx512_only = zen4 - {"avx512bf16"}
    assert rule_data_tiled_gemm(sig, zen4) is bool(expected)
    assert rule_data_tiled_gemm(sig, avx512_only) is (expected is True)
    assert not rule_data_tiled_gemm(sig, {"avx", "avx2", "fma", "f16c"})
    here = rule_data_tiled_gemm(sig, host_cpu().features)
    v = best_variant(sig, CPU)
    assert (DATA_TILING in v.flags) is here and v.kernel_formulations == ()
    assert DATA_TILING not in per_op_default_flags(sig, CPU)
    assert DATA_TILING not in best_variant(sig, Target("cuda", "sm_80")).flags


def test_a_data_tiled_gemm_runs_and_passes_numerics(tmp_path):
    """The rule's kernels are real: a transposed f32 gemm and a bf16 one, BOO's build and the best column side by
    side, compile, run and pass the numerics check against torch (data-tiling on this machine where it has the
    CPU features for it)."""
    from boo_engine.cpu_defaults.rules import DATA_TILING, rule_data_tiled_gemm

    jobs = boo_beside_best(tmp_path, "gemm --a_w 96 --a_h 64 --b_w 80 --transB 1", "gemmbfp16 --a_w 96 --a_h 64 --b_w 80")
    for r in jobs:
        if r.variant == "best":
            tiled = rule_data_tiled_gemm(parse_command(r.command), host_cpu().features)
            assert (DATA_TILING in r.compile.command) is tiled, r.command


def test_a_kernel_without_the_rules_formulation_keeps_its_own():
    """A bias gradient alone has no conv to rewrite: the rule's matmul does not exist for it."""
    sig = parse_command("conv -n 2 -c 8 -H 10 -W 10 -k 8 -y 3 -x 3 -p 1 -q 1 -F 7")
    assert str(op_class(sig)) == "conv:float32:nchw:kxk:backward:bias"
    v = best_variant(sig, CPU)
    assert v.best == "rules" and v.kernel_formulations == ()


def test_this_machines_table_beats_the_rules(tmp_path, monkeypatch):
    table = tmp_path / "defaults.json"
    cpu = host_cpu()
    sig = parse_command(BWD_DATA)
    store_machine(machine_key(cpu.machine_key, cpu.compiler_version),
                  {"classes": {str(op_class(sig)): {"flags": [], "formulation": "fwdconv"}}}, table)
    monkeypatch.setenv(DEFAULTS_TABLE_ENV, str(table))
    v = best_variant(sig, CPU)
    assert v.best == "table" and formulation(v) == "fwdconv"
    # where BOO's own build measured fastest here, the table says so and best takes it
    store_machine(machine_key(cpu.machine_key, cpu.compiler_version),
                  {"classes": {str(op_class(sig)): {"flags": [], "formulation": "fwdconv", "build": "boo"}}}, table)
    assert (best_variant(sig, CPU).base, best_variant(sig, CPU).best) == ("boo", "table")
    # a reduction's class in the table keeps the reduction rule's flag unless the table names it itself
    from boo_engine.cpu_defaults.machine import per_op_default_flags
    from boo_engine.cpu_defaults.rules import REASSOCIATE

    norm = parse_command("layernorm --input 4x8x32 --normalized_dim 2 -F 2")
    store_machine(machine_key(cpu.machine_key, cpu.compiler_version),
                  {"classes": {str(op_class(norm)): {"flags": ["--iree-opt-level=O2"]}}}, table)
    assert per_op_default_flags(norm, CPU) == ["--iree-opt-level=O2", REASSOCIATE]
    off = "--iree-llvmcpu-reassociate-fp-reductions=false"
    store_machine(machine_key(cpu.machine_key, cpu.compiler_version),
                  {"classes": {str(op_class(norm)): {"flags": [off]}}}, table)
    assert per_op_default_flags(norm, CPU) == [off]
    # another machine's entry (a Zen 5 measured it) is not used here
    other = tmp_path / "other.json"
    store_machine(machine_key("znver5+0123456789ab", cpu.compiler_version),
                  {"classes": {str(op_class(sig)): {"flags": [], "formulation": "fwdconv"}}}, other)
    monkeypatch.setenv(DEFAULTS_TABLE_ENV, str(other))
    assert best_variant(sig, CPU).best == "rules"


def _tuned(store: Store, func: str, command: str, environment: dict, flags: list[str]) -> int:
    rec = TuneRecords(store)
    tid = rec.start(command_line="boo-tui tune", target="cpu", out_dir="tuned", settings={},
                    environment=environment)
    rec.save_candidate(Tried(func_name=func, key="k1", params={"flags": flags, "formulation": None},
                             variant="t-k1", ratio=0.5))
    rec.save_kernel(TunedKernel(func_name=func, command=command, status=IMPROVED, best_key="k1", ratio=0.5))
    rec.finish("done")
    store.flush()
    return tid


def test_a_tune_measured_here_wins_one_from_another_cpu_does_not(tmp_path):
    sig = parse_command(GEMM)
    here = this_machine()
    with Store(tmp_path / "r.db") as store:
        theirs = _tuned(store, sig.func_name, GEMM, {**here, "cpu_name": "znver5"}, ["--iree-opt-data-tiling=true"])
        assert theirs and tuned_winners_of(store) == {}
        tid = _tuned(store, sig.func_name, GEMM, here, ["--iree-llvmcpu-enable-ukernels=all"])
        v = best_variant(sig, CPU, TunedLookup(store=store))
    assert v.best == f"tune {tid}" and v.flags_for(sig.func_name) == ["--iree-llvmcpu-enable-ukernels=all"]


@pytest.mark.parametrize("flag", ["--iree-llvmcpu-embedded-linker-path=/tmp/evil",
                                  "--iree-hal-dump-executable-files-to=/tmp/x", "--iree-opt-data-tiling=/x",
                                  "--mlir-pass-plugin=lib.so", "-o=/tmp/out"])
def test_a_stored_winner_that_names_a_program_or_a_path_is_never_compiled(tmp_path, flag):
    """A database may come from someone else (the default one is ./boo-results.db), and the best column compiles
    its tunes' winners unasked: a flag that makes iree-compile run a linker or write a file is not taken."""
    sig = parse_command(GEMM)
    with Store(tmp_path / "r.db") as store:
        _tuned(store, sig.func_name, GEMM, this_machine(), ["--iree-opt-data-tiling=true", flag])
        assert tuned_winners_of(store) == {}
        assert best_variant(sig, CPU, TunedLookup(store=store)).best == "rules"


def tuned_winners_of(store: Store) -> dict:
    with store._reader() as conn:
        return tuned_winners(conn, this_machine())


def test_a_run_measures_boo_and_best_side_by_side(tmp_path):
    """BOO's build as the baseline, `best` beside it: the backward conv in the matmul formulation (rules), the
    gemm as a tune measured here left it; both numerically right, each recording how it was built."""
    gemm = parse_command(GEMM)
    db = tmp_path / "r.db"
    with Store(db) as store:
        tid = _tuned(store, gemm.func_name, GEMM, this_machine(), ["--iree-llvmcpu-enable-ukernels=all"])
    cfg = SessionConfig(target="cpu", build="boo", variants=[BASELINE, BEST], backends=(IREE,), iters=5,
                        rounds=1, db_path=str(db), cache_dir=str(tmp_path / "cache"))
    with Session(cfg) as s:
        s.add_command(BWD_DATA)
        s.add_command(GEMM)
        s.start()
        s.wait()
        jobs = {(r.command, r.variant): r for r in s.jobs.values()}
    for r in jobs.values():
        assert r.status == DONE and r.numerics is not None and r.numerics.verdict == "pass", (r.variant, r.error)
    assert jobs[(BWD_DATA, "baseline")].compile.build.startswith("boo: iree-turbine")
    best = jobs[(BWD_DATA, "best")].compile
    assert best.build.startswith("ours: matmul formulation") and best.chosen_by == "rules"
    tuned = jobs[(GEMM, "best")].compile
    assert tuned.chosen_by == f"tune {tid}" and "--iree-llvmcpu-enable-ukernels=all" in tuned.command
    with Store(db) as store:   # what chose it is stored with the result
        (run,) = store.list_runs()
        stored = {(r.command, r.variant): r for r in store.load_results(run["id"])}
    assert stored[(GEMM, "best")].compile.chosen_by == f"tune {tid}"
    assert json.dumps(stored[(BWD_DATA, "baseline")].compile.build).count("iree-turbine") == 1


def test_a_run_stored_before_builds_resumes_with_the_build_it_had(tmp_path):
    """A run from before the boo column (no `build` in its config) built its baseline our way: resumed by a
    front end that asks for BOO's build, its remaining jobs still build ours; a new run keeps what it asked."""
    db = tmp_path / "r.db"
    with Store(db) as store:
        old = store.start_run(command_line="boo-tui old", target="cpu", config={"variants": [BASELINE.describe()]},
                              environment={})
        store.finish_run(old, "interrupted")
    with Session(SessionConfig(target="cpu", build="boo", db_path=str(db), resume=old)) as s:
        assert s.target.build == "ours" and s.compile_stage._target.build == "ours"
    with Session(SessionConfig(target="cpu", build="boo", db_path=str(db))) as s:
        assert s.target.build == "boo"
