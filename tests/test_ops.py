"""Op signatures: shapes, deterministic sample args, references checked against torch autograd (float64) for
every mode, and torch.export of every op and mode (what the MLIR exporter builds on)."""
from __future__ import annotations

import json

import pytest
import torch

from boo_engine.commands import parse_command
from boo_engine.ops.base import OpSignature

# one small command per op and mode (and the layout / group / stride / 1-D / 3-D / transposed corners)
CONV_BASE = "conv -n 2 -c 4 -H 7 -W 6 -k 6 -y 3 -x 2 -p 1 -q 0 -u 2 -v 1 -l 1 -j 2 -g 2"
CONV_VARIANTS = [
    CONV_BASE,
    CONV_BASE + " -I NHWC -f NHWC -O NHWC",
    CONV_BASE + " -I CHWN -f HWCN -O NWHC",
    "conv -_ 1 -n 2 -c 3 -H 9 -k 4 -y 3 -p 1 -u 2",
    "conv -_ 3 -n 1 -c 2 -! 4 -H 5 -W 4 -k 3 -@ 2 -y 3 -x 1 -$ 1 -^ 2 -I NDHWC -O NDHWC",
    "conv -n 2 -c 4 -H 5 -W 5 -k 6 -y 3 -x 3 -u 2 -v 2 -p 1 -q 1 -m trans -g 2 -Y 1 -X 0",
]
CONV_FORWS = [1, 2, 4, 6, 7, 8, 9, 10]
LN_VARIANTS = ["layernorm -X 3x4x5 -m 1", "layernorm -X 3x4x5 -m 1 -o 1", "layernorm -X 3x4x5 -m 1 -o 0",
               "layernorm -X 6 -m 1", "layernorm -X 2x3x4x5 -m 0 -e 1e-3", "layernorm -X 3x4x5 -m 0",
               # BOO's --input-permutation: x stored in another memory order, in both modes
               "layernorm -X 3x4x5 -m 1 --input-permutation 2 0 1", "layernorm -X 3x4x5 -m 0 -o 1 --input-permutation 1 2 0"]
LN_FORWS = [1, 2, 4, 6, 8, 10, 12, 14]
BNORM_VARIANTS = ["bnorm -n 3 -c 4 -H 3 -W 2 -m 1", "bnorm -n 3 -c 4 -H 3 -W 2 -m 1 -L NHWC",
                  "bnorm -n 3 -c 2 -H 2 -W 3 -m 0", "bnorm -n 2 -c 3 -D 2 -H 2 -W 3 -m 1 -L NDHWC",
                  "bnorm -n 4 -c 2 -H 2 -W 2 -m 0 -L HWNC"]
BNORM_MODES = ["-F 1", "-F 1 -r 1", "-F 1 -s 1", "-F 1 -r 1 -s 1", "-F 2", "-F 0 -b 1", "-F 0 -b 1 -s 1"]
GEMM_VARIANTS = ["gemm -k 5 -m 4 -n 3", "gemm -k 5 -m 4 -n 3 -u 1", "gemm -k 5 -m 4 -n 3 -v 1",
                 "gemm -k 5 -m 4 -n 3 -u 1 -v 1"]


def _all_commands() -> list[str]:
    cmds = []
    for base in CONV_VARIANTS:
        cmds += [f"{base} -F {f}" for f in CONV_FORWS]
        cmds.append(f"{base} -F 1 -b 1")
    for base in LN_VARIANTS:
        cmds += [f"{base} -F {f}" for f in LN_FORWS]  # every -F in both modes, as BOO accepts them
    for base in GEMM_VARIANTS:
        cmds += [f"{base} -F {f}" for f in (1, 2, 3)]
    for base in BNORM_VARIANTS:
        cmds += [f"{base} {m}" for m in BNORM_MODES]
    cmds += [c.replace("bnorm ", "bnormbfp16 ") for c in cmds if c.startswith("bnorm -n 3 -c 4 -H 3 -W 2 -m 1 -L")]
    return cmds


ALL = _all_commands()


def _tuple(r) -> tuple[torch.Tensor, ...]:
    return tuple(r) if isinstance(r, (tuple, list)) else (r,)


def _f64(args) -> tuple[torch.Tensor, ...]:
    return tuple(a.to(torch.float64) for a in args)


# ---- torch autograd as the independent check of each reference -------------------------------------------
def _conv_autograd(sig, args):
    """Forward conv in torch layout via torch.nn.functional, gradients via autograd."""
    from boo_engine.ops.conv import DEFAULT_LAYOUTS

    tl = DEFAULT_LAYOUTS[sig.num_spatial_dims]
    to_t = lambda t, lay: t.permute([lay.index(c) for c in tl])
    from_t = lambda t, lay: t.permute([tl.index(c) for c in lay])
    nd = sig.num_spatial_dims
    F = torch.nn.functional
    if sig.transposed:
        fn = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[nd]
        call = lambda x, w, b: fn(x, w, b, sig.stride, sig.padding, sig.output_padding, sig.groups, sig.dilation)
    else:
        fn = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[nd]
        call = lambda x, w, b: fn(x, w, b, sig.stride, sig.padding, sig.dilation, sig.groups)
    if sig.is_forward:
        x, w, *b = args
        y = call(to_t(x, sig.in_layout), to_t(w, sig.fil_layout), b[0] if b else None)
        return (from_t(y, sig.out_layout),)
    dy, x, w = (a.clone().requires_grad_(True) for a in args)
    b = torch.zeros(sig.out_channels, dtype=x.dtype, requires_grad=True)
    y = call(to_t(x, sig.in_layout), to_t(w, sig.fil_layout), b)
    gx, gw, gb = torch.autograd.grad(y, (x, w, b), to_t(dy, sig.out_layout))
    return tuple(g for g, on in zip((gx, gw, gb), sig.grad_mask) if on)


def _layernorm_autograd(sig, args):
    """torch.nn.functional.layer_norm on the input in its own dims; gradients via autograd. In mode 0
    (MIOPEN_ELEMENTWISE_AFFINE) weight = 1 and bias = 0, and their gradients are still asked for."""
    roles = dict(zip(sig.arg_names(), args))
    shape = sig.normalized_shape
    perm = sig.input_permutation or tuple(range(len(sig.input_shape)))
    inverse = [perm.index(d) for d in range(len(perm))]
    if sig.is_forward:
        x = roles["x"].permute(inverse)
        y = torch.nn.functional.layer_norm(x, shape, roles.get("weight"), roles.get("bias"), sig.eps)
        dims = list(range(sig.normalized_dim, x.dim()))
        mean = x.mean(dim=dims, keepdim=True)
        rstd = torch.rsqrt(x.var(dim=dims, keepdim=True, unbiased=False) + sig.eps)
        return (y, mean, rstd)
    # the backward kernels take mean/rstd from the forward: autograd recomputes them from x, which is the same
    # thing because the sample args carry the real statistics of x
    dy = roles["dLdy"]
    x = roles["x"].permute(inverse) if "x" in roles else torch.randn(sig.input_shape, dtype=dy.dtype)
    x = x.clone().requires_grad_(True)
    if "weight" in roles:
        w = roles["weight"]
    else:
        w = torch.randn(shape, dtype=dy.dtype) if sig.affine else torch.ones(shape, dtype=dy.dtype)
    w = w.clone().requires_grad_(True)
    b = torch.zeros(shape, dtype=dy.dtype, requires_grad=True)
    y = torch.nn.functional.layer_norm(x, shape, w, b, sig.eps)
    grads = torch.autograd.grad(y, (x, w, b), dy)
    return tuple(g for g, on in zip(grads, sig.grad_mask) if on)


def _gemm_autograd(sig, args):
    if sig.forw == 1:
        a, b = args
        return ((a.t() if sig.trans_a else a) @ (b.t() if sig.trans_b else b),)
    dc, other = args
    a = torch.randn(sig.a_shape, dtype=dc.dtype, requires_grad=True)
    b = torch.randn(sig.b_shape, dtype=dc.dtype, requires_grad=True)
    if sig.forw == 2:
        b = other.clone().requires_grad_(True)
    else:
        a = other.clone().requires_grad_(True)
    c = (a.t() if sig.trans_a else a) @ (b.t() if sig.trans_b else b)
    ga, gb = torch.autograd.grad(c, (a, b), dc)
    return (ga,) if sig.forw == 2 else (gb,)


def _exact_stats(sig, args):
    """Layer-norm backward args carry mean / rstd computed in float32; recompute them in float64 from x so the
    comparison with autograd (which derives them from x) can be tight."""
    roles = sig.arg_names() if sig.op in ("layernorm", "bnorm") else []
    out = list(args)
    if "saved_mean" in roles:  # batch norm: statistics over N (and the spatial dims in spatial mode)
        x = sig._to_work(out[roles.index("x")])
        mean = x.mean(dim=(0, 2))
        var = x.var(dim=(0, 2), unbiased=False)
        out[roles.index("saved_mean")] = mean.reshape(sig.param_shape)
        out[roles.index("saved_invstd")] = torch.rsqrt(var + 1e-5).reshape(sig.param_shape)
        return tuple(out)
    if "mean" not in roles:
        return args
    x = sig._logical_x(out[roles.index("x")])
    dims = list(range(sig.normalized_dim, x.dim()))
    out[roles.index("mean")] = x.mean(dim=dims, keepdim=True)
    out[roles.index("rstd")] = torch.rsqrt(x.var(dim=dims, keepdim=True, unbiased=False) + sig.eps)
    return tuple(out)


def _bnorm_autograd(sig, args):
    """torch.nn.functional.batch_norm on the input laid out as N, C, <spatial> (spatial mode) or flattened to
    (N, everything else) in layout order (per-activation mode); gradients via autograd."""
    from boo_engine.ops.bnorm import BNORM_EPS, BNORM_MOMENTUM

    roles = dict(zip(sig.arg_names(), args))
    # torch order (N, C, then D, H, W) in spatial mode; N then the layout's other letters per-activation
    if sig.spatial:
        work = "NC" + "".join(ch for ch in "DHW" if ch in sig.layout)
    else:
        work = "N" + sig.layout.replace("N", "")
    perm = [sig.layout.index(ch) for ch in work]
    inv = [work.index(ch) for ch in sig.layout]
    work_shape = [sig.input_shape[i] for i in perm]

    def to_work(t):
        t = t.permute(perm)
        return t if sig.spatial else t.reshape(t.shape[0], -1)

    def from_work(t):
        return t.reshape(work_shape).permute(inv)

    flat = lambda t: t.reshape(-1)
    scale, bias = flat(roles["scale"]), flat(roles.get("bias", torch.zeros_like(roles["scale"])))
    F = torch.nn.functional
    if sig.mode == "forward_inference":
        y = F.batch_norm(to_work(roles["x"]), flat(roles["running_mean"]), flat(roles["running_var"]), scale, bias,
                         False, BNORM_MOMENTUM, BNORM_EPS)
        return (from_work(y),)
    if sig.mode == "forward_training":
        x = to_work(roles["x"])
        rm = flat(roles["running_mean"]).clone() if sig.run else None
        rv = flat(roles["running_var"]).clone() if sig.run else None
        y = F.batch_norm(x, rm, rv, scale, bias, True, BNORM_MOMENTUM, BNORM_EPS)
        out = [from_work(y)]
        if sig.save:
            dims = [0] + list(range(2, x.dim()))
            mean = x.mean(dim=dims)
            invstd = torch.rsqrt(x.var(dim=dims, unbiased=False) + BNORM_EPS)
            out += [mean.reshape(sig.param_shape), invstd.reshape(sig.param_shape)]
        if sig.run:
            out += [rm.reshape(sig.param_shape), rv.reshape(sig.param_shape)]
        return tuple(out)
    x = roles["x"].clone().requires_grad_(True)
    w = scale.clone().requires_grad_(True)
    b = torch.zeros_like(w, requires_grad=True)
    y = F.batch_norm(to_work(x), None, None, w, b, True, BNORM_MOMENTUM, BNORM_EPS)
    gx, gw, gb = torch.autograd.grad(y, (x, w, b), to_work(roles["dLdy"]))
    return (gx, gw.reshape(sig.param_shape), gb.reshape(sig.param_shape))


AUTOGRAD = {"conv": _conv_autograd, "layernorm": _layernorm_autograd, "gemm": _gemm_autograd,
            "bnorm": _bnorm_autograd}


@pytest.mark.parametrize("cmd", ALL)
def test_reference_matches_autograd_in_float64(cmd: str) -> None:
    sig = parse_command(cmd)
    args = _exact_stats(sig, _f64(sig.get_sample_args(seed=3)))
    got = _tuple(sig.reference(*args))
    want = AUTOGRAD[sig.op](sig, args)
    assert len(got) == len(want) == len(sig.output_shapes())
    assert sig.returns_tuple == (len(got) > 1)
    for g, w, shape in zip(got, want, sig.output_shapes()):
        assert tuple(g.shape) == tuple(shape)
        assert g.dtype == torch.float64
        torch.testing.assert_close(g, w, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("cmd", ALL)
def test_export_every_op_and_mode(cmd: str) -> None:
    sig = parse_command(cmd)
    args = sig.get_sample_args(seed=1)
    program = torch.export.export(sig.as_module(), args)
    got = _tuple(program.module()(*args))
    want = _tuple(sig.reference(*args))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert torch.equal(g, w)


@pytest.mark.parametrize("cmd", ALL)
def test_shapes_names_and_description(cmd: str) -> None:
    sig = parse_command(cmd)
    assert isinstance(sig, OpSignature)
    args = sig.get_sample_args()
    assert [tuple(a.shape) for a in args] == [tuple(s) for s in sig.input_shapes()]
    assert [a.dtype for a in args] == sig.input_dtypes()
    out = _tuple(sig.reference(*args))
    assert [tuple(o.shape) for o in out] == [tuple(s) for s in sig.output_shapes()]
    out_dtypes = sig.output_dtypes() if hasattr(sig, "output_dtypes") else [sig.dtype] * len(out)
    assert [o.dtype for o in out] == out_dtypes
    assert sig.flops > 0 and sig.bytes > 0
    desc = sig.describe()
    json.dumps(desc)
    assert desc["op"] == sig.op and desc["mode"] == sig.mode and desc["dtype"] == sig.dtype_name
    assert desc["input_shapes"] == [list(s) for s in sig.input_shapes()]
    assert desc["output_shapes"] == [list(s) for s in sig.output_shapes()]
    assert "/" not in sig.func_name and " " not in sig.func_name


def test_func_names_distinct_across_all_kernels() -> None:
    sigs = {parse_command(c) for c in ALL}
    assert len({s.func_name for s in sigs}) == len(sigs)


@pytest.mark.parametrize("cmd", ["convbfp16 -n 2 -c 4 -H 6 -W 6 -k 4 -F 1 -b 1 -I NHWC",
                                 "layernormfp16 -X 4x8 -m 1 -F 14", "gemmbfp16 -k 4 -m 8 -n 2 -F 2"])
def test_low_precision_reference(cmd: str) -> None:
    sig = parse_command(cmd)
    args = sig.get_sample_args()
    assert all(a.dtype == sig.dtype for a in args)
    low = _tuple(sig.reference(*args))
    high = _tuple(sig.reference(*_f64(args)))
    for lo, hi in zip(low, high):
        assert lo.dtype == sig.dtype
        torch.testing.assert_close(lo.double(), hi, rtol=0.05, atol=0.1)


def test_sample_args_deterministic_and_splat() -> None:
    sig = parse_command("conv -n 2 -c 4 -H 6 -W 6 -k 4 -F 10")
    a, b, c = sig.get_sample_args(seed=5), sig.get_sample_args(seed=5), sig.get_sample_args(seed=6)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not torch.equal(a[0], c[0])
    splat = sig.get_sample_args(splat_value=0.5)
    assert all(bool((t == 0.5).all()) for t in splat)
    ln = parse_command("layernorm -X 3x8 -m 1 -F 2")
    x1, x2 = ln.get_sample_args(seed=2), ln.get_sample_args(seed=2)
    assert all(torch.equal(p, q) for p, q in zip(x1, x2))
    # mean / rstd are the real statistics of x
    roles = dict(zip(ln.arg_names(), x1))
    torch.testing.assert_close(roles["mean"], roles["x"].mean(dim=-1, keepdim=True))


def test_conv_flops() -> None:
    sig = parse_command("conv -n 2 -c 8 -H 10 -W 10 -k 16 -y 3 -x 3 -g 2")  # out 8x8
    per_pass = 2 * 2 * 16 * 64 * 4 * 9
    assert sig.flops == per_pass
    assert parse_command("conv -n 2 -c 8 -H 10 -W 10 -k 16 -y 3 -x 3 -g 2 -b 1").flops == per_pass + 2 * 16 * 64
    assert parse_command("conv -n 2 -c 8 -H 10 -W 10 -k 16 -y 3 -x 3 -g 2 -F 6").flops == 2 * per_pass
    assert parse_command("conv -n 2 -c 8 -H 10 -W 10 -k 16 -y 3 -x 3 -g 2 -F 10").flops == 2 * per_pass + 2 * 16 * 64
    assert parse_command("gemm -k 3 -m 5 -n 7").flops == 2 * 3 * 5 * 7


def test_signatures_are_hashable_and_picklable() -> None:
    import pickle

    for cmd in ALL[::7]:
        sig = parse_command(cmd)
        assert pickle.loads(pickle.dumps(sig)) == sig
        assert hash(sig) == hash(parse_command(cmd))
