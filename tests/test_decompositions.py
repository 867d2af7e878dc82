"""Our decompositions (ops/decompositions.py, conv_forms.convolution_backward): each computes what torch's own CPU
kernel computes from the same arguments, over the argument corners the kernels have (causal or not, a scale, an
additive mask; padding, ceil mode, count_include_pad, a divisor; align_corners, given scales; 1-, 2-
and 3-D pools; transposed and grouped convs). float64, eager: no compile (test_aten_lowering.py compiles them)."""
from __future__ import annotations

import pytest
import torch

from boo_engine.compile.lowering import ours
from boo_engine.ops import conv_forms
from boo_engine.ops import decompositions as d

aten = torch.ops.aten
F64 = torch.float64


def close(ours_out, torch_out):
    ours_out = ours_out if isinstance(ours_out, tuple) else (ours_out,)
    torch_out = torch_out if isinstance(torch_out, tuple) else (torch_out,)
    assert len(ours_out) == len(torch_out)
    for a, b in zip(ours_out, torch_out):
        if b is None:
            assert a is None
            continue
        assert a.shape == b.shape
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-9)


def test_the_rule_knows_each_of_them():
    table = ours()
    assert table[aten._scaled_dot_product_flash_attention_for_cpu_backward.default] is d.flash_attention_backward
    assert table[aten.max_pool3d_with_indices_backward.default] is d.max_pool_backward
    assert table[aten.avg_pool2d_backward.default] is d.avg_pool2d_backward
    assert table[aten.upsample_bilinear2d_backward.default] is d.upsample_bilinear2d_backward
    assert table[aten.convolution_backward.default] is conv_forms.convolution_backward


@pytest.mark.parametrize("causal, scale, mask", [(False, None, None), (True, None, None), (False, 0.3, None),
                                                 (False, None, "float")])
def test_flash_attention_backward(causal, scale, mask):
    g = torch.Generator().manual_seed(0)
    q, k, v, dout = (torch.randn(2, 3, 5, 4, generator=g, dtype=F64) for _ in range(4))
    attn_mask = torch.randn(5, 5, generator=g, dtype=F64) if mask else None   # the CPU kernel takes float masks
    out, lse = aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal, attn_mask=attn_mask,
                                                                 scale=scale)
    expected = aten._scaled_dot_product_flash_attention_for_cpu_backward(dout, q, k, v, out, lse, 0.0, causal,
                                                                         attn_mask=attn_mask, scale=scale)
    close(d.flash_attention_backward(dout, q, k, v, out, lse, 0.0, causal, attn_mask=attn_mask, scale=scale),
          expected)


def test_flash_attention_backward_refuses_dropout():
    q = torch.zeros(1, 1, 2, 2)
    with pytest.raises(NotImplementedError, match="dropout 0.1"):
        d.flash_attention_backward(q, q, q, q, q, q[..., 0], 0.1, False)


@pytest.mark.parametrize("dims, kernel, stride, padding, dilation, ceil", [
    (3, [2, 2, 2], [2, 2, 2], [0, 0, 0], [1, 1, 1], False),
    (3, [3, 3, 2], [2, 1, 2], [1, 1, 0], [1, 1, 1], True),
    (2, [3, 3], [2, 2], [1, 1], [2, 1], False),
])
def test_max_pool_backward(dims, kernel, stride, padding, dilation, ceil):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 3, *([7] * dims), generator=g, dtype=F64)
    fwd = aten.max_pool3d_with_indices if dims == 3 else aten.max_pool2d_with_indices
    bwd = aten.max_pool3d_with_indices_backward if dims == 3 else aten.max_pool2d_with_indices_backward
    out, idx = fwd(x, kernel, stride, padding, dilation, ceil)
    dout = torch.randn(out.shape, generator=g, dtype=F64)
    close(d.max_pool_backward(dout, x, kernel, stride, padding, dilation, ceil, idx),
          bwd(dout, x, kernel, stride, padding, dilation, ceil, idx))


@pytest.mark.parametrize("kernel, stride, padding, ceil, include_pad, divisor", [
    ([2, 2], [], [0, 0], False, True, None),
    ([3, 3], [2, 2], [1, 1], False, True, None),
    ([3, 2], [2, 1], [1, 0], True, False, None),
    ([3, 3], [2, 2], [1, 1], True, True, None),
    ([2, 3], [2, 2], [0, 1], False, True, 5),
    ([3], [3], [1], False, False, None),
])
def test_avg_pool2d_backward(kernel, stride, padding, ceil, include_pad, divisor):
    g = torch.Generator().manual_seed(2)
    x = torch.randn(2, 3, 9, 8, generator=g, dtype=F64)
    out = aten.avg_pool2d(x, kernel, stride, padding, ceil, include_pad, divisor)
    dout = torch.randn(out.shape, generator=g, dtype=F64)
    close(d.avg_pool2d_backward(dout, x, kernel, stride, padding, ceil, include_pad, divisor),
          aten.avg_pool2d_backward(dout, x, kernel, stride, padding, ceil, include_pad, divisor))


@pytest.mark.parametrize("size_in, size_out, align, scales", [
    ((5, 6), (10, 12), False, (2.0, 2.0)),
    ((5, 6), (10, 12), False, (None, None)),
    ((5, 6), (7, 13), True, (None, None)),
    ((8, 8), (5, 3), False, (None, None)),
    ((4, 4), (1, 9), True, (None, None)),
])
def test_upsample_bilinear2d_backward(size_in, size_out, align, scales):
    g = torch.Generator().manual_seed(3)
    dout = torch.randn(2, 3, *size_out, generator=g, dtype=F64)
    in_size = [2, 3, *size_in]
    close(d.upsample_bilinear2d_backward(dout, list(size_out), in_size, align, *scales),
          aten.upsample_bilinear2d_backward(dout, list(size_out), in_size, align, *scales))


@pytest.mark.parametrize("transposed, groups, mask", [(True, 1, [True, True, True]), (True, 2, [True, False, True]),
                                                      (False, 2, [True, True, False]), (False, 1, [False, True, True])])
def test_convolution_backward(transposed, groups, mask):
    g = torch.Generator().manual_seed(4)
    x = torch.randn(2, 4, 6, 5, generator=g, dtype=F64)
    w = torch.randn((4, 6 // groups, 3, 3) if transposed else (6, 4 // groups, 3, 3), generator=g, dtype=F64)
    stride, padding, dilation, opad = [2, 1], [1, 1], [1, 1], [1, 0] if transposed else [0, 0]
    y = aten.convolution(x, w, None, stride, padding, dilation, transposed, opad, groups)
    dy = torch.randn(y.shape, generator=g, dtype=F64)
    args = (dy, x, w, [y.shape[1]], stride, padding, dilation, transposed, opad, groups, mask)
    close(conv_forms.convolution_backward(*args), aten.convolution_backward(*args))
