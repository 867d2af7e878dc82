"""boo_conv / boo_layer_norm / boo_linear on real IREE kernels against torch: forward results and the gradients
our backward kernels give, the in-memory launchable cache, and the one-line errors. Shapes are tiny and the set
of distinct kernels small (each compiles in ~1-3 s)."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from nn_support import close, private_kernel_cache

from boo_engine.nn import BooNNError, boo_conv, boo_layer_norm, boo_linear, kernels, record_calls


@pytest.fixture(scope="module", autouse=True)
def _kernel_cache(tmp_path_factory):
    with private_kernel_cache(tmp_path_factory.getbasetemp() / "nn-kernels"):
        yield


def _leaves(*shapes, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=g, dtype=torch.float32).to(dtype).requires_grad_() for s in shapes]


def _grads(y, inputs, seed=1):
    dy = torch.randn(y.shape, generator=torch.Generator().manual_seed(seed))
    return torch.autograd.grad(y, inputs, dy)


def _modes(log):
    """(op, forw) of every kernel call a record_calls block saw."""
    return sorted((t.sig.op, t.sig.forw) for t in log.tallies.values())


# ---- convolution --------------------------------------------------------------------------------------------

GEOMETRY = {"stride": (1, 2), "padding": (1, 0), "dilation": (2, 1)}


def test_conv2d_forward_and_all_grads_match_torch():
    x, w, b = _leaves((2, 4, 7, 6), (6, 4, 3, 2), (6,))
    with record_calls() as log:
        y = boo_conv(x, w, b, **GEOMETRY)
        got = _grads(y, (x, w, b))
    ref_y = F.conv2d(x, w, b, **GEOMETRY)
    close(y, ref_y)
    for g, r in zip(got, _grads(ref_y, (x, w, b))):
        close(g, r)
    # one forward kernel, then ONE backward kernel giving dx, dw and db (-F 10): torch's backward never ran
    assert _modes(log) == [("conv", 1), ("conv", 10)]


def test_conv_backward_asks_only_for_the_grads_needed():
    x, w, b = _leaves((2, 4, 7, 6), (6, 4, 3, 2), (6,))
    w.requires_grad_(False)
    b.requires_grad_(False)
    with record_calls() as log:
        (gx,) = _grads(boo_conv(x, w, b, **GEOMETRY), (x,))
    close(gx, _grads(F.conv2d(x, w, b, **GEOMETRY), (x,))[0])
    assert _modes(log) == [("conv", 1), ("conv", 2)]


def test_groups_no_bias():
    x, w = _leaves((1, 4, 6, 6), (4, 2, 3, 3))
    y = boo_conv(x, w, groups=2, padding=1)
    ref = F.conv2d(x, w, groups=2, padding=1)
    close(y, ref)
    for g, r in zip(_grads(y, (x, w)), _grads(ref, (x, w))):
        close(g, r)


def test_channels_last_layouts_take_and_return_layout_shaped_tensors():
    x, w, b = _leaves((2, 5, 5, 3), (4, 3, 3, 3), (4,))   # x is N H W C; w stays K C H W
    y = boo_conv(x, w, b, padding=1, input_layout="NHWC", output_layout="NHWC")
    assert y.shape == (2, 5, 5, 4)
    ref = F.conv2d(x.permute(0, 3, 1, 2), w, b, padding=1).permute(0, 2, 3, 1)
    close(y, ref)
    for g, r in zip(_grads(y, (x, w, b)), _grads(ref, (x, w, b))):
        close(g, r)


def test_conv1d_and_conv3d_forward():
    x1, w1 = _leaves((2, 3, 9), (4, 3, 3))
    y1 = boo_conv(x1, w1, stride=2)
    close(y1, F.conv1d(x1, w1, stride=2))
    (g1,) = _grads(y1, (x1,))
    close(g1, _grads(F.conv1d(x1, w1, stride=2), (x1,))[0])
    with torch.no_grad():
        x3, w3 = _leaves((1, 2, 4, 4, 4), (3, 2, 2, 2, 2))
        close(boo_conv(x3, w3, padding=(0, 1, 0)), F.conv3d(x3, w3, padding=(0, 1, 0)))


@pytest.mark.filterwarnings("ignore:Using padding='same':UserWarning")   # torch's own, about its copy
def test_same_padding_with_an_odd_total_pads_right_as_torch():
    x, w = _leaves((1, 4, 6, 6), (4, 2, 3, 3))
    w2 = w.detach()[:, :, :2, :2].contiguous()   # 2x2: total padding 1 per dim, the extra on the right
    with torch.no_grad():
        close(boo_conv(x, w, groups=2, padding="same"), F.conv2d(x, w, groups=2, padding="same"))
        close(boo_conv(x, w2, groups=2, padding="same"), F.conv2d(x, w2, groups=2, padding="same"))


def test_bfloat16_forward():
    x, w, b = _leaves((2, 4, 7, 6), (6, 4, 3, 2), (6,), dtype=torch.bfloat16)
    with torch.no_grad():
        y = boo_conv(x, w, b, **GEOMETRY)
        ref = F.conv2d(x.float(), w.float(), b.float(), **GEOMETRY)
    assert y.dtype == torch.bfloat16
    torch.testing.assert_close(y.float(), ref, rtol=2e-2, atol=5e-2)


def test_second_call_reuses_the_loaded_kernel():
    x, w, b = _leaves((2, 4, 7, 6), (6, 4, 3, 2), (6,))
    with torch.no_grad():
        boo_conv(x, w, b, **GEOMETRY)
        held = kernels.cached_launchables()
        for _ in range(3):
            boo_conv(x * 2, w, b, **GEOMETRY)
    assert kernels.cached_launchables() == held


def test_variant_applies_to_forward_and_backward_kernels():
    x, w, b = _leaves((2, 4, 7, 6), (6, 4, 3, 2), (6,))
    with record_calls() as log:
        y = boo_conv(x, w, b, **GEOMETRY, variant="mm=formulation=matmul")
        got = _grads(y, (x, w, b))
    ref = F.conv2d(x, w, b, **GEOMETRY)
    close(y, ref)
    for g, r in zip(got, _grads(ref, (x, w, b))):
        close(g, r)
    assert sorted((t.sig.forw, t.variant) for t in log.tallies.values()) == [(1, "mm"), (10, "mm")]


# ---- layer norm and linear ----------------------------------------------------------------------------------

@pytest.mark.parametrize("affine", ["both", "weight", "none"])
def test_layer_norm_forward_and_grads(affine):
    x, weight, bias = _leaves((3, 4, 8), (4, 8), (4, 8))
    w_arg = weight if affine in ("both", "weight") else None
    b_arg = bias if affine == "both" else None
    inputs = tuple(t for t in (x, w_arg, b_arg) if t is not None)
    with record_calls() as log:
        y = boo_layer_norm(x, (4, 8), w_arg, b_arg, eps=1e-5)
        got = _grads(y, inputs)
    ref = F.layer_norm(x, (4, 8), w_arg, b_arg, eps=1e-5)
    close(y, ref)
    for g, r in zip(got, _grads(ref, inputs)):
        close(g, r)
    assert _modes(log) == [("layernorm", 1), ("layernorm", {"both": 14, "weight": 6, "none": 2}[affine])]


def test_linear_forward_and_grads_on_a_3d_input():
    x, weight, bias = _leaves((2, 3, 8), (5, 8), (5,))
    with record_calls() as log:
        y = boo_linear(x, weight, bias)
        got = _grads(y, (x, weight, bias))
    ref = F.linear(x, weight, bias)
    assert y.shape == (2, 3, 5)
    close(y, ref)
    for g, r in zip(got, _grads(ref, (x, weight, bias))):
        close(g, r)
    assert _modes(log) == [("gemm", 1), ("gemm", 2), ("gemm", 3)]


# ---- errors -------------------------------------------------------------------------------------------------

X, W = torch.zeros(1, 4, 6, 6), torch.zeros(4, 2, 3, 3)


@pytest.mark.parametrize("call, words", [
    (lambda: boo_conv(X.double(), W.double(), groups=2), "dtype float64"),
    (lambda: boo_conv(X.int(), W.int(), groups=2), "dtype int32"),
    (lambda: boo_conv(X, W.half(), groups=2), "one dtype"),
    (lambda: boo_conv(X, W, groups=3), "groups 3"),
    (lambda: boo_conv(X, W), "4 channels"),
    (lambda: boo_conv(X[0], W, groups=2), "x has 3 dims"),
    (lambda: boo_conv(X, W[0, 0], groups=2), "w has 2 dims"),
    (lambda: boo_conv(X, W, groups=2, input_layout="NHCX"), "input_layout 'NHCX'"),
    (lambda: boo_conv(X, W, groups=2, shared_layout="NCH"), "shared_layout 'NCH'"),
    (lambda: boo_conv(X, W, groups=2, stride=(1, 1, 1)), "stride [1, 1, 1]"),
    (lambda: boo_conv(X, W, groups=2, padding=-1), "padding -1"),
    (lambda: boo_conv(X, W, torch.zeros(3), groups=2), "b has shape [3]"),
    (lambda: boo_conv(X[:, :, :2, :2], W, groups=2), "larger than padded input"),
    (lambda: boo_conv(X, W, groups=2, padding="same", stride=2), "stride 1"),
    (lambda: boo_layer_norm(X, (5,)), "normalized_shape [5]"),
    (lambda: boo_layer_norm(X, 6, torch.zeros(5)), "weight has shape [5]"),
    (lambda: boo_layer_norm(X.to(torch.float64), 6), "dtype float64"),
    (lambda: boo_linear(X, torch.zeros(3, 5)), "in_features 5"),
    (lambda: boo_linear(X, torch.zeros(3))[0], "weight has 1 dims"),
    (lambda: boo_linear(X, torch.zeros(3, 6), "b"), "bias must be a torch.Tensor"),
])
def test_bad_calls_are_one_line_boo_nn_errors(call, words):
    with pytest.raises(BooNNError) as e:
        call()
    msg = str(e.value)
    assert words in msg and "\n" not in msg, msg
    assert isinstance(e.value, ValueError)
