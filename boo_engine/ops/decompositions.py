"""Our decompositions of backward ops torch has no decomposition of and IREE 3.13's torch input cannot lower (the
lowering rule, compile/lowering.py, takes them where torch has none: `lowering.ours()`), each written with ops
IREE lowers (matmuls, convolutions, scatter_add, elementwise) and computing what torch's CPU kernel computes from
the same arguments, so numerics judge them against it. Found by the model zoo's training captures.

Dtype-generic and traceable by torch.export, like every reference: only shape arithmetic in Python.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from boo_engine.ops._lazy import torch
from boo_engine.ops.conv_forms import pad_or_crop

if TYPE_CHECKING:
    import torch


def flash_attention_backward(grad_out: torch.Tensor, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                             out: torch.Tensor, logsumexp: torch.Tensor, dropout_p: float, is_causal: bool, *,
                             attn_mask: torch.Tensor | None = None,
                             scale: float | None = None) -> tuple[torch.Tensor, ...]:
    """`_scaled_dot_product_flash_attention_for_cpu_backward` (what autograd records for SDPA on the CPU): the
    attention weights rebuilt from the forward's logsumexp, P = exp(q k^T * scale - lse), and D = rowsum(dO * O),
    as the flash kernel does; dV = P^T dO, dS = P (dO V^T - D), dQ = dS K * scale, dK = dS^T Q * scale."""
    if dropout_p:
        raise NotImplementedError(f"attention backward with dropout {dropout_p}: a random mask has no kernel here")
    s = scale if scale is not None else 1.0 / math.sqrt(query.shape[-1])
    scores = torch.matmul(query, key.transpose(-2, -1)) * s
    if attn_mask is not None:   # additive: the CPU kernel takes no boolean mask (SDPA converts one first)
        scores = scores + attn_mask
    if is_causal:
        rows, cols = scores.shape[-2], scores.shape[-1]
        keep = torch.ones(rows, cols, dtype=torch.bool, device=scores.device).tril()
        scores = scores.masked_fill(keep.logical_not(), float("-inf"))
    p = torch.exp(scores - logsumexp.unsqueeze(-1).to(scores.dtype))
    d = (grad_out * out).sum(dim=-1, keepdim=True)
    ds = p * (torch.matmul(grad_out, value.transpose(-2, -1)) - d)
    return (torch.matmul(ds, key) * s, torch.matmul(ds.transpose(-2, -1), query) * s,
            torch.matmul(p.transpose(-2, -1), grad_out))


def max_pool_backward(grad_output: torch.Tensor, x: torch.Tensor, kernel_size: Sequence[int],
                      stride: Sequence[int], padding: Sequence[int], dilation: Sequence[int], ceil_mode: bool,
                      indices: torch.Tensor) -> torch.Tensor:
    """`max_pool{1,2,3}d_with_indices_backward`: each output's gradient added at its argmax, `indices` being flat
    positions in the input's spatial dims (per batch and channel), as torch's kernels record them."""
    spatial = len(kernel_size)
    lead = list(x.shape[:-spatial])
    flat = torch.zeros([*lead, math.prod(x.shape[-spatial:])], dtype=grad_output.dtype, device=grad_output.device)
    # a positive dim: torch-mlir's scatter_add lowering ran out of memory on dim=-1 (IREE 3.13)
    return flat.scatter_add(len(lead), indices.reshape([*lead, -1]), grad_output.reshape([*lead, -1])).reshape(x.shape)


def avg_pool2d_backward(grad_output: torch.Tensor, x: torch.Tensor, kernel_size: Sequence[int],
                        stride: Sequence[int], padding: Sequence[int], ceil_mode: bool, count_include_pad: bool,
                        divisor_override: int | None) -> torch.Tensor:
    """`avg_pool2d_backward`: each output's gradient divided by its window's divisor (as torch's kernel counts
    it: the window clipped to the padded input, or to the input without `count_include_pad`, or
    `divisor_override`), then spread over the window by a transposed conv with a ones filter and cropped to the
    input (the padding removed, windows past it dropped)."""
    kernel = list(kernel_size) * (2 // len(kernel_size))
    step = list(stride or kernel) * (2 // len(stride or kernel))
    pad = list(padding) * (2 // len(padding))
    size = list(x.shape[-2:])
    out = list(grad_output.shape[-2:])
    g = grad_output.reshape(-1, 1, *out)
    if divisor_override:
        g = g / divisor_override
    else:
        rows, cols = (_window_sizes(n, o, k, s, p, count_include_pad, g)
                      for n, o, k, s, p in zip(size, out, kernel, step, pad))
        g = g / (rows[:, None] * cols[None, :])
    ones = torch.ones(1, 1, *kernel, dtype=g.dtype, device=g.device)
    spread = torch.nn.functional.conv_transpose2d(g, ones, stride=step)
    full = [o * s + k - s for o, k, s in zip(out, kernel, step)]   # (o-1)*s + k: the padded extent covered
    grad = pad_or_crop(spread, [-p for p in pad], [n + p - f for n, p, f in zip(size, pad, full)])
    return grad.reshape(x.shape)


def _window_sizes(n: int, out: int, k: int, s: int, p: int, count_include_pad: bool,
                  like: torch.Tensor) -> torch.Tensor:
    """Per output position along one dim: how many elements torch's avg_pool divides by (the window clipped to
    the padded input; to the input itself without count_include_pad)."""
    start = torch.arange(out, device=like.device) * s - p
    end = (start + k).clamp(max=n + p)
    if not count_include_pad:
        start, end = start.clamp(min=0), end.clamp(max=n)
    return (end - start).clamp(min=1).to(like.dtype)


def upsample_bilinear2d_backward(grad_output: torch.Tensor, output_size: Sequence[int], input_size: Sequence[int],
                                 align_corners: bool, scales_h: float | None = None,
                                 scales_w: float | None = None) -> torch.Tensor:
    """`upsample_bilinear2d_backward`: bilinear upsampling is separable, out = A_h x A_w^T with A the (out, in)
    interpolation matrices torch's kernel's source indices and weights make, so the gradient is
    A_h^T dOut A_w (two matmuls; quadratic in the image side, where the kernel touches 4 taps an output)."""
    a_h = _interpolation(input_size[2], output_size[0], align_corners, scales_h, grad_output)
    a_w = _interpolation(input_size[3], output_size[1], align_corners, scales_w, grad_output)
    return torch.matmul(torch.matmul(a_h.transpose(0, 1), grad_output), a_w)


def _interpolation(n_in: int, n_out: int, align_corners: bool, scale: float | None,
                   like: torch.Tensor) -> torch.Tensor:
    """(n_out, n_in): row o holds the weights output o takes from each input (torch's
    area_pixel_compute_source_index, then the two neighbours' linear weights)."""
    if align_corners:
        ratio = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    else:
        ratio = 1.0 / scale if scale is not None and scale > 0 else n_in / n_out
    acc = torch.float64 if like.dtype == torch.float64 else torch.float32   # torch's kernel: its accscalar_t
    dst = torch.arange(n_out, dtype=acc, device=like.device)
    src = dst * ratio if align_corners else ((dst + 0.5) * ratio - 0.5).clamp(min=0.0)
    low = src.floor().clamp(max=n_in - 1)
    high = (low + 1).clamp(max=n_in - 1)
    w_high = src - low
    cols = torch.arange(n_in, dtype=acc, device=like.device)
    matrix = ((1.0 - w_high)[:, None] * (low[:, None] == cols[None, :])
              + w_high[:, None] * (high[:, None] == cols[None, :]))
    return matrix.to(like.dtype)
