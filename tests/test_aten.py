"""`aten::` lines (BOO's trace format, any aten op): parsing, the strided views, bad input, and real kernels:
every aten example of BOO's sample file plus our own corners (non-contiguous and broadcast strides, an absent
optional tensor, string / bool / list constants, a TensorList, integer and bool tensors) compiled with IREE, run
on this CPU and checked against the float64 reference."""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from boo_engine.commands import parse_command, parse_invocation, read_commands_file
from boo_engine.errors import CommandError
from boo_engine.numerics import check_numerics
from boo_engine.ops.aten import AtenSignature, apply_view, view_plan

# BOO's sample file's aten lines, verbatim
BOO_SAMPLE = [
    """aten::mm "[[3840, 4352], [4352, 3840]]" "['c10::BFloat16', 'c10::BFloat16']" "[[1, 3840], [3840, 1]]" "['', '']\"""",
    """aten::bmm "[[128, 3, 3], [128, 3, 1152]]" "['float', 'float']" "[[9, 3, 1], [3456, 1152, 1]]" "['', '']\"""",
    """aten::bmm "[[128, 3, 3], [128, 3, 1152]]" "['double', 'double']" "[[9, 3, 1], [3456, 1152, 1]]" "['', '']\"""",
    """aten::addmm "[[512], [24576, 512], [512, 512], [], []]" "['c10::BFloat16', 'c10::BFloat16', 'c10::BFloat16', 'Scalar', 'Scalar']" "[[1], [512, 1], [1, 512], [], []]" "['', '', '', '1', '1']\"""",
    """aten::scaled_dot_product_attention "[[32, 8, 128, 64], [32, 8, 128, 64], [32, 8, 128, 64], [], [], [], [], []]" "['c10::BFloat16', 'c10::BFloat16', 'c10::BFloat16', '', 'Scalar', 'Scalar', 'Scalar', 'Scalar']" "[[65536, 8192, 64, 1], [65536, 8192, 64, 1], [65536, 8192, 64, 1], [], [], [], [], []]" "['', '', '', 'None', '0.0', 'True', 'None', 'False']\"""",
    """aten::argmax "[[4, 8, 16], [], []]" "['float', 'Scalar', 'Scalar']" "[[128, 16, 1], [], []]" "['', '1', 'False']\"""",
    """aten::argmin "[[4, 8, 16], [], []]" "['float', 'Scalar', 'Scalar']" "[[128, 16, 1], [], []]" "['', '1', 'False']\"""",
]

# our own corners, as a torch-profiler trace of torch 2.13 records them
OWN = [
    # conv2d with no bias: the absent optional tensor is '' / ''; lists of ints as constants
    """aten::conv2d "[[2, 3, 8, 8], [8, 3, 3, 3], [], [], [], [], []]" "['float', 'float', '', 'ScalarList', 'ScalarList', 'ScalarList', 'Scalar']" "[[192, 64, 8, 1], [27, 9, 3, 1], [], [], [], [], []]" "['', '', '', '[2, 2]', '[1, 1]', '[1, 1]', '1']\"""",
    # a channels-last input (strides of NHWC memory) and a bias
    """aten::conv2d "[[2, 4, 6, 6], [8, 4, 3, 3], [8], [], [], [], []]" "['float', 'float', 'float', 'ScalarList', 'ScalarList', 'ScalarList', 'Scalar']" "[[144, 1, 24, 4], [36, 9, 3, 1], [1], [], [], [], []]" "['', '', '', '[1, 1]', '[1, 1]', '[1, 1]', '1']\"""",
    # a transposed operand and a sliced one (every other column of a wider buffer)
    """aten::add "[[64, 32], [64, 32], []]" "['float', 'float', 'Scalar']" "[[1, 64], [64, 2], []]" "['', '', '2']\"""",
    # a broadcast (stride 0) gradient, a bool list constant, several outputs
    """aten::native_layer_norm_backward "[[2, 10], [2, 10], [], [2, 1], [2, 1], [10], [10], []]" "['float', 'float', 'ScalarList', 'float', 'float', 'float', 'float', 'ScalarList']" "[[0, 0], [10, 1], [], [1, 1], [1, 1], [1], [1], []]" "['', '', '[10]', '', '', '', '', '[True, True, True]']\"""",
    # a string constant (not recorded by traces: written by hand)
    """aten::div "[[16, 8], [16, 8], []]" "['float', 'float', '']" "[[8, 1], [8, 1], []]" "['', '', 'floor']\"""",
    # a bool constant that changes the result's shape
    """aten::argmax "[[4, 8, 16], [], []]" "['float', 'Scalar', 'Scalar']" "[[128, 16, 1], [], []]" "['', '2', 'True']\"""",
    # a TensorList
    """aten::cat "[[[2, 3], [2, 5]], []]" "['TensorList', 'Scalar']" "[[[3, 1], [5, 1]], []]" "['', '1']\"""",
    # integer indices and a bool mask
    """aten::embedding "[[10, 4], [6], [], [], []]" "['float', 'long int', 'Scalar', 'Scalar', 'Scalar']" "[[4, 1], [1], [], [], []]" "['', '', '-1', 'False', 'False']\"""",
    """aten::where "[[2, 3], [2, 3], [2, 3]]" "['bool', 'float', 'float']" "[[3, 1], [3, 1], [3, 1]]" "['', '', '']\"""",
    # an eval-mode batch norm's backward (as BatchNorm1d records it): save_mean / save_invstd are empty tensors
    """aten::native_batch_norm_backward "[[2, 16, 64], [2, 16, 64], [16], [16], [16], [0], [0], [], [], []]" "['float', 'float', 'float', 'float', 'float', 'float', 'float', 'Scalar', 'Scalar', 'ScalarList']" "[[1024, 64, 1], [1024, 64, 1], [1], [1], [1], [1], [1], [], [], []]" "['', '', '', '', '', '', '', 'False', '1.0000000000000001e-05', '[True, True, True]']\"""",
    # fp16 softmax over a non-last dim, an unrecorded optional (half_to_float) left to its default
    """aten::_softmax "[[4, 32], [], []]" "['c10::Half', 'Scalar', 'Scalar']" "[[32, 1], [], []]" "['', '0', 'False']\"""",
]

COMMANDS = BOO_SAMPLE + OWN


# ---- parsing ---------------------------------------------------------------------------------------------------
def test_every_boo_aten_line_parses_to_distinct_deterministic_names():
    sigs = [parse_command(c) for c in COMMANDS]
    names = [s.func_name for s in sigs]
    assert len(set(names)) == len(names)
    # the name is a digest of the call, not of the process: pinned
    assert names[0] == "aten_mm_bfloat16_3840x4352_4352x3840_14e34db2"
    assert all(n.replace("_", "").isalnum() for n in names)
    # float and double bmm are different kernels with different argument types
    assert sigs[1].input_dtype_names() == ["float32", "float32"] and sigs[2].input_dtype_names() == ["float64"] * 2
    assert sigs[2].required_compile_flags() == ["--iree-input-demote-f64-to-f32=false"]


def test_text_is_boos_spelling_and_parses_back_to_the_same_kernel():
    for line in COMMANDS:
        cmd = parse_invocation(line + " --iter 7")
        assert cmd.iters == 7
        assert cmd.text == line
        assert parse_command(cmd.text) == cmd.signature


def test_shapes_flops_and_outputs():
    mm = parse_command(BOO_SAMPLE[0])
    # A is recorded [3840, 4352] with strides [1, 3840]: a transposed view of a [4352, 3840] buffer
    assert mm.input_shapes() == [(4352, 3840), (4352, 3840)]
    assert mm.output_shapes() == [(3840, 3840)] and mm.output_dtype_names() == ["bfloat16"]
    assert mm.flops == 2 * 3840 * 4352 * 3840
    assert "ᵗ" in mm.shape_label
    sdpa = parse_command(BOO_SAMPLE[4])
    assert sdpa.flops == 2 * 32 * 8 * 128 * 128 * (64 + 64) // 2   # causal: half
    argmax = parse_command(BOO_SAMPLE[5])
    assert argmax.output_shapes() == [(4, 16)] and argmax.output_dtype_names() == ["int64"]
    assert argmax.flops == 0 and argmax.bytes == 4 * 8 * 16 * 4 + 4 * 16 * 8
    conv = parse_command(OWN[0])   # stride 2, padding 1: 4x4 out of 8x8
    assert conv.output_shapes() == [(2, 8, 4, 4)] and conv.flops == 2 * (2 * 8 * 4 * 4) * 27
    lnb = parse_command(OWN[3])
    assert lnb.input_shapes()[0] == ()   # the broadcast gradient is one element
    assert lnb.returns_tuple and len(lnb.output_shapes()) == 3


def test_syntax_only_parse_never_resolves():
    """check=False (what the dashboard's UI thread uses) accepts an op torch lacks: syntax only."""
    line = BOO_SAMPLE[5].replace("aten::argmax", "aten::no_such_op_xyz")
    assert parse_command(line, check=False).func_name.startswith("aten_no_such_op_xyz_")
    with pytest.raises(CommandError, match=r"^aten::no_such_op_xyz: torch .* has no op aten::no_such_op_xyz$"):
        parse_command(line)


@pytest.mark.parametrize("line, message", [
    ("""aten::mm "[[2, 3], [3, 4]]" "['float', 'float']" "[[3, 1], [4, 1]]\"""",
     r"^aten::mm: expects 4 quoted lists \(Input Dims, Input type, Input Strides, Concrete Inputs\), got 3"),
    ("""aten::mm "[[2, 3], [3, 4]" "['float', 'float']" "[[3, 1], [4, 1]]" "['', '']\"""",
     r"^aten::mm: Input Dims is not a Python list literal: "),
    ("""aten::mm "[[2, 3], [3, 4]]" "['float']" "[[3, 1], [4, 1]]" "['', '']\"""",
     r"^aten::mm: the four lists differ in length \(Input Dims 2, Input type 1, Input Strides 2, Concrete Inputs 2\)"),
    ("""aten::mm "[[2, 3], [3, 4]]" "['c10::complex<float>', 'float']" "[[3, 1], [4, 1]]" "['', '']\"""",
     r"^aten::mm: argument 0 has type 'c10::complex<float>', which cannot be built"),
    ("""aten::mm "[[2, 3], [3, 4]]" "['float', 'float']" "[[3, 1], [4]]" "['', '']\"""",
     r"^aten::mm: argument 1 has 2 dims but 1 strides"),
    ("""aten::mm "[[2, 3], [4, 5]]" "['float', 'float']" "[[3, 1], [5, 1]]" "['', '']\"""",
     r"^aten::mm: no overload takes these 2 arguments \(default: .*"),
    ("""aten::neg "[[2, -1]]" "['float']" "[[1, 1]]" "['']\"""",
     r"^aten::neg: argument 0 has a dimension of size -1 \(a size is 0 or more\)$"),
    ("""aten::add "[[], []]" "['Scalar', 'Scalar']" "[[], []]" "['1', '2']\"""",
     r"^aten::add: no tensor argument"),
    ("""aten::gelu "[[2, 3], []]" "['float', '']" "[[3, 1], []]" "['', 'tanh']" junk""",
     r"^aten::gelu: expects 4 quoted lists"),
    ("""aten:: "[]" "[]" "[]" "[]\"""", r"^aten:: without an op name"),
])
def test_bad_aten_lines_are_one_line_errors(line, message):
    with pytest.raises(CommandError, match=message) as info:
        parse_command(line)
    assert "\n" not in str(info.value)


def test_a_bad_aten_line_in_a_file_is_a_failed_row_naming_file_and_line(tmp_path):
    path = tmp_path / "cmds.txt"
    path.write_text("# aten\n" + BOO_SAMPLE[5] + "\n" + BOO_SAMPLE[5].replace("argmax", "argmaxx") + "\n")
    rows = read_commands_file(path, errors="collect")
    assert [r.ok for r in rows] == [True, False]
    assert rows[1].message.startswith(f"{path}:3: aten::argmaxx: torch ")


def test_the_cli_refuses_an_unknown_aten_op_with_exit_2(tmp_path):
    line = BOO_SAMPLE[5].replace("argmax", "argmaxx")
    proc = subprocess.run([sys.executable, "-m", "boo_tui", line, "--headless", "--db", str(tmp_path / "r.db")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "aten::argmaxx: torch" in proc.stderr and "Traceback" not in proc.stderr


# ---- strided views ---------------------------------------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=0, max_size=4).flatmap(
    lambda shape: st.tuples(st.just(shape), st.permutations(range(len(shape))),
                            st.lists(st.integers(0, 2), min_size=len(shape), max_size=len(shape)),
                            st.lists(st.booleans(), min_size=len(shape), max_size=len(shape)))))
def test_view_plans_rebuild_any_permuted_padded_or_broadcast_layout(case):
    """A tensor made by permuting, slicing (padding) and expanding a buffer is rebuilt with the same strides."""
    shape, order, pads, bcast = case
    # build a real strided tensor: a buffer whose dims are padded, permuted into `shape`, some dims broadcast
    padded = [shape[d] + pads[d] for d in order]
    buf = torch.arange(max(1, torch.Size(padded).numel()), dtype=torch.float32)[: torch.Size(padded).numel()]
    t = buf.reshape(padded)[tuple(slice(0, shape[d]) for d in order)]
    t = t.permute([order.index(d) for d in range(len(shape))])
    for d, b in enumerate(bcast):
        if b:
            t = t.narrow(d, 0, 1).expand(*t.shape[:d], shape[d], *t.shape[d + 1:])
    assert tuple(t.shape) == tuple(shape)
    plan = view_plan(t.shape, t.stride())
    rebuilt = apply_view(plan, torch.randn(plan.base))
    assert tuple(rebuilt.shape) == tuple(shape)
    for d in range(len(shape)):
        if shape[d] > 1:
            assert rebuilt.stride(d) == t.stride(d), (shape, t.stride(), rebuilt.stride(), plan)
    assert plan.kind in ("dense", "view")


def test_interleaved_strides_fall_back_to_as_strided():
    plan = view_plan((3, 4), (1, 2))   # overlapping: element (2, 0) and (0, 1) share an address
    assert plan.kind == "as_strided" and plan.base == (1 + 2 * 1 + 3 * 2,)
    t = apply_view(plan, torch.arange(9.0))
    assert t.stride() == (1, 2) and float(t[2, 1]) == 4.0


# ---- real kernels ----------------------------------------------------------------------------------------------
# `cache` and `compiled` (every COMMANDS kernel compiled once, in parallel through the pool) come from conftest.py.


@pytest.mark.parametrize("command", COMMANDS, ids=[f"{c.split()[0]}-{i}" for i, c in enumerate(COMMANDS)])
def test_aten_kernel_compiles_runs_and_passes_numerics(command, cache, compiled):
    sig = parse_command(command)
    assert isinstance(sig, AtenSignature)
    assert compiled[sig.func_name].num_dispatches >= 1
    info = check_numerics(sig, "cpu", cache=cache)
    assert info.verdict == "pass", info.stats.get("reason")


# ---- the outputs of common calls by rule (ops/aten_shapes.py) against torch's meta kernel --------------------------
def _meta_outputs(name: str, tensors, constants):
    """What torch's meta kernel says `name` returns (the spec tuple), or the exception type it raises."""
    from boo_engine.ops.base import DTYPES

    base, _, overload_name = name.partition(".")
    overload = getattr(getattr(torch.ops.aten, base), overload_name)
    args = [torch.empty(shape, dtype=DTYPES[dtype], device="meta") for shape, dtype in tensors]
    if base == "linear" and "bias" in constants:
        args.append(constants.pop("bias"))
    try:
        out = overload(*args, **constants)
    except Exception as e:  # noqa: BLE001 - torch refuses these: the rule must not answer
        return type(e)
    return ((tuple(out.shape), str(out.dtype).replace("torch.", "")),)


def _random_case(rng, name: str):
    """Random tensors and constants for `name`: often valid, sometimes not (sizes that disagree, mixed dtypes,
    ranks the op does not take, arguments the rules do not know)."""
    dim = lambda: rng.choice([1, 2, 3, 5, 8, 16])
    dtype = rng.choice(["float32", "bfloat16", "float16", "float64", "int64"])
    other = dtype if rng.random() < 0.85 else rng.choice(["float32", "bfloat16", "int32"])
    constants: dict = {}
    if name == "addmm.default":
        m, k, n = dim(), dim(), dim()
        bias = rng.choice([(n,), (m, n), (1, n), (m, 1), (), (dim(),), (m, n, 1)])
        tensors = [(bias, dtype), ((m, k), dtype), ((k if rng.random() < 0.9 else dim(), n), other)]
        if rng.random() < 0.5:
            constants = {"beta": rng.choice([1, 0.5, 2]), "alpha": rng.choice([1, 0.25, True])}
    elif name in ("mm.default", "bmm.default"):
        batch = (dim(),) if name == "bmm.default" else ()
        m, k, n = dim(), dim(), dim()
        a = batch + (m, k) if rng.random() < 0.9 else tuple(dim() for _ in range(rng.choice([1, 2, 3])))
        b = (batch if rng.random() < 0.9 else (dim(),) * len(batch)) + (k if rng.random() < 0.9 else dim(), n)
        tensors = [(a, dtype), (b, other)]
    elif name == "linear.default":
        x = tuple(dim() for _ in range(rng.choice([1, 2, 3])))
        out = dim()
        tensors = [(x, dtype), ((out, x[-1] if rng.random() < 0.9 else dim()), other)]
        if rng.random() < 0.5:
            tensors.append(((out if rng.random() < 0.9 else dim(),), dtype))
        elif rng.random() < 0.5:
            constants = {"bias": None}
    elif name.endswith(".Tensor"):
        a = tuple(dim() for _ in range(rng.choice([0, 1, 2, 3])))
        b = tuple(rng.choice([d, 1, dim()]) for d in a[rng.choice([0, 1]):])
        tensors = [(a, dtype), (b, other)]
        if name in ("add.Tensor", "sub.Tensor") and rng.random() < 0.4:
            constants = {"alpha": rng.choice([1, 2.5, -1])}
    else:
        tensors = [(tuple(dim() for _ in range(rng.choice([0, 1, 2, 4]))), dtype)]
        if name == "gelu.default" and rng.random() < 0.5:
            constants = {"approximate": rng.choice(["none", "tanh", "erf"])}
    return tensors, constants


@pytest.mark.parametrize("name", ["addmm.default", "mm.default", "bmm.default", "linear.default", "add.Tensor", "sub.Tensor", "mul.Tensor",
                                  "div.Tensor", "relu.default", "gelu.default", "silu.default", "sigmoid.default",
                                  "tanh.default"])
def test_outputs_by_rule_are_what_torch_says(name):
    """Where a rule answers, it answers what torch's meta kernel does; where torch refuses, no rule answers; and
    the rules answer the usual valid call (they are used at all)."""
    import random

    from boo_engine.ops.aten_shapes import known_outputs

    rng = random.Random(name)
    answered = 0
    for _ in range(300):
        tensors, constants = _random_case(rng, name)
        by_rule = known_outputs(name, tensors, dict(constants))
        by_torch = _meta_outputs(name, tensors, dict(constants))
        if by_rule is not None:
            answered += 1
            assert by_rule == by_torch, (tensors, constants)
    assert answered > 100


def test_a_call_resolved_by_rule_is_the_call_torch_makes():
    """An addmm line resolved by rule: the same outputs, and the same call, as the meta kernel finds."""
    from boo_engine.ops import aten_call

    line = ('aten::addmm "[[256], [7, 512], [512, 256], [], []]" "[\'c10::BFloat16\', \'c10::BFloat16\', '
            '\'c10::BFloat16\', \'Scalar\', \'Scalar\']" "[[1], [512, 1], [1, 512], [], []]" "[\'\', \'\', \'\', '
            '\'1\', \'1\']"')
    sig = parse_invocation(line).signature
    assert sig.output_shapes() == [(7, 256)] and sig.output_dtype_names() == ["bfloat16"]
    res = aten_call.resolve(sig)
    assert aten_call._known_outputs(sig, res.overload, res.positional, res.keywords) == res.outputs
    args = sig.get_sample_args(0)
    out = sig.reference(*args)
    assert tuple(out.shape) == (7, 256) and out.dtype == torch.bfloat16


@pytest.mark.parametrize("value", ["{[]: 1}", "[" * 2000 + "]" * 2000, "{1: {2: [{}]}}"])
def test_a_recorded_value_python_cannot_take_is_a_one_line_error(value):
    """A trace's concrete value that is not a literal the op can take (an unhashable dict key, a nesting too deep
    for the parser) is the line's one-line error, never a TypeError or RecursionError out of the parser."""
    line = f'aten::sum "[[4, 4], []]" "[\'float\', \'ScalarList\']" "[[4, 1], []]" "[\'\', \'{value}\']"'
    with pytest.raises(CommandError, match="aten::sum"):
        parse_invocation(line)


def test_the_resolutions_remembered_are_bounded(monkeypatch):
    """A commands file of 200,000 lines held every aten signature it resolved (40,000 of them, to the end)."""
    from boo_engine.ops import aten_call

    monkeypatch.setattr(aten_call, "RESOLVED_KEPT", 2)
    monkeypatch.setattr(aten_call, "_RESOLVED", {})
    sigs = [parse_command(f"aten::mm \"[[{m}, 8], [8, 4]]\" \"['float', 'float']\" \"[[8, 1], [4, 1]]\" \"['', '']\"")
            for m in (1, 2, 3, 5, 7)]
    for sig in sigs + sigs:
        assert aten_call.resolve(sig).outputs == aten_call._resolve(sig).outputs
        assert len(aten_call._RESOLVED) <= 2
