"""How a conv kernel is written for export: its formulations (see ConvSignature.formulations).

* "default": `aten.convolution`, `aten.convolution_backward` (the reference; a transposed conv's gradients are
  ordinary convolutions, see `gradients`).
* "fwdconv": gradients and transposed convolutions written as FORWARD convolutions. IREE 3.13 lowers
  `aten.convolution_backward` and transposed convolutions to generic linalg ops that its im2col + matmul path
  does not apply to (on a Zen 3 CPU 15-30x slower than torch); a forward `aten.convolution` (plus pads, slices,
  permutes and a flip, which IREE fuses or does cheaply) lowers to a named conv op that
  `--iree-global-opt-use-im2col-for-convs` turns into a matmul.
* "matmul": every convolution written as an explicit im2col (one strided slice of the padded input per filter
  tap, stacked) and a (batched, per group) matmul. Needs no compiler flag, and suits the shapes IREE's own
  im2col handles badly: a weight gradient (IREE's im2col of its forward-conv form makes a batch of skinny
  (k*k) x N*O matmuls), grouped convs (which IREE lowers to grouped linalg convs, not im2col'd) and 16-bit
  convs (IREE 3.13's im2col does not compile them). A strided conv's data gradient is a matmul and a fold
  (`fold_data_grad`, col2im): the im2col of the dilated dLdy would multiply the zeros the stride inserts.
* "mixed" (gradients only): the data gradient as "fwdconv" writes it (one forward conv, which IREE lowers as its
  own conv), the weight gradient as "matmul" writes it. With AVX-512 IREE's own conv computed small and strided
  data gradients faster than the explicit im2col (which multiplies the zeros a stride inserts), where the weight
  gradient as a conv (N as the reduction) is slow in every build.

Every tensor here is in torch's N C <spatial> order; `stride`, `padding`, `dilation` are those of the ORIGINAL
forward convolution y = conv(x, w) with x (N, C, X...), w (K, C/g, k...), y (N, K, O...).

* data gradient: dLdx = conv(dilate(dLdy, stride) padded by dilation*(k-1)-padding, w with its channels swapped
  per group and flipped spatially; stride 1, the same dilation and groups). The high side is padded (or
  cropped) so the result has exactly X elements (input rows the strided conv never read get 0).
* weight gradient: dLdw = conv(x with batch and channels swapped, dLdy with batch and channels swapped as the
  filter; stride = the dilation, dilation = the stride), cropped to k. Groups move into the channel dim:
  x (N, g*Cg) becomes (Cg, g*N), so group i of the filter (dLdy's channels of group i) reads batch block i.

Dtype-generic and traceable by torch.export, like every reference: only shape arithmetic in Python.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from boo_engine.ops._common import numel
from boo_engine.ops._lazy import torch

if TYPE_CHECKING:
    import torch


#: the formulation writing every convolution of a kernel as a forward, non-transposed one
FWDCONV = "fwdconv"
#: the formulation writing every convolution of a kernel as an explicit im2col + matmul
MATMUL = "matmul"
#: the formulation writing a data gradient as FWDCONV does and a weight gradient as MATMUL does
MIXED = "mixed"


def dilate(t: torch.Tensor, stride: Sequence[int]) -> torch.Tensor:
    """`t` with stride-1 zeros inserted between neighbours along every spatial dim: O -> (O-1)*s+1. Written as
    concat with zeros + reshape + slice (no scatter), which IREE folds into the conv's input."""
    for i, s in enumerate(stride):
        if s == 1:
            continue
        d = 2 + i
        t = t.unsqueeze(d + 1)
        zeros_shape = list(t.shape)
        zeros_shape[d + 1] = s - 1
        t = torch.cat([t, t.new_zeros(zeros_shape)], dim=d + 1)
        merged = list(t.shape)
        merged[d:d + 2] = [merged[d] * s]
        t = t.reshape(merged)
        t = t.narrow(d, 0, t.shape[d] - (s - 1))
    return t


def pad_or_crop(t: torch.Tensor, low: Sequence[int], high: Sequence[int]) -> torch.Tensor:
    """Pad the spatial dims with zeros (positive amounts) or crop them (negative amounts), per side."""
    pads: list[int] = []
    for i, (lo, hi) in enumerate(zip(low, high)):
        d = 2 + i
        if lo < 0:
            t = t.narrow(d, -lo, t.shape[d] + lo)
        if hi < 0:
            t = t.narrow(d, 0, t.shape[d] + hi)
        pads = [max(lo, 0), max(hi, 0)] + pads   # F.pad lists the LAST dim first
    return torch.nn.functional.pad(t, pads) if any(pads) else t


def conv(x: torch.Tensor, w: torch.Tensor, stride: Sequence[int], padding: Sequence[int],
         dilation: Sequence[int], groups: int) -> torch.Tensor:
    """A plain forward convolution (no bias, not transposed)."""
    zeros = [0] * len(stride)
    return torch.convolution(x, w, None, list(stride), list(padding), list(dilation), False, zeros, groups)


def unfold(x: torch.Tensor, fil_spatial: Sequence[int], stride: Sequence[int], padding: Sequence[int],
           dilation: Sequence[int]) -> torch.Tensor:
    """im2col: (N, C, prod(k), O...), entry [n, c, tap, o] = padded x[n, c, o*stride + tap*dilation]."""
    xp = pad_or_crop(x, padding, padding)
    out = [(n - d * (k - 1) - 1) // s + 1 for n, k, s, d in zip(xp.shape[2:], fil_spatial, stride, dilation)]
    taps = []
    for offsets in itertools.product(*(range(k) for k in fil_spatial)):
        t = xp
        for i, (o, s, d, n) in enumerate(zip(offsets, stride, dilation, out)):
            t = torch.ops.aten.slice.Tensor(t, 2 + i, o * d, o * d + s * (n - 1) + 1, s)
        taps.append(t)
    return torch.stack(taps, 2)


#: the elements of the vectors a CPU matmul's innermost output dimension is computed in: 16 floats in an AVX-512
#: register (two AVX2 ones). A dimension that is not a whole number of them leaves lanes idle in every row
VECTOR_ELEMS = 16


#: the fewest and most output channels per group for which `channels_innermost` measured faster
INNER_CHANNELS = (32, 256)


def channels_innermost(positions: int, channels_per_group: int, taps: Sequence[int]) -> bool:
    """Whether `mm_conv` puts the output channels innermost (cols^T @ w^T, then transposed back) rather than the
    output positions (w @ cols): for a 3x3 filter over a small image whose positions leave a fifth or more of
    the last vectors' lanes idle (VECTOR_ELEMS; 49 positions fill 64 lanes: a 7x7 image), where the channels per
    group are whole vectors, INNER_CHANNELS of them. On a 2-core Zen 4, one thread, us per call, positions ->
    channels innermost (torch): n2 c256 7x7 2,520 (data-tiled) -> 1,361 (1,002), NHWC 2,800 -> 1,484 (1,439), n4
    c64 7x7 342 -> 197, n2 c48 7x7 123 -> 61 (90). Not taken: n1 c512 7x7 4,127 -> 4,386 (slower), 14x14 images
    (196 positions, 6% idle: c32 154 -> 111 but c64 430 -> 470, c128 610 -> 596, c256 2,527 -> 2,683), one vector
    of channels per group (g4, 16 each: 117 -> 166, torch 123), other filters (c192 25x1 3x1 81 -> 183)."""
    lanes = -(-positions // VECTOR_ELEMS) * VECTOR_ELEMS
    low, high = INNER_CHANNELS
    return (list(taps) == [3, 3] and 5 * (lanes - positions) >= lanes and channels_per_group % VECTOR_ELEMS == 0
            and low <= channels_per_group <= high)


def mm_conv(x: torch.Tensor, w: torch.Tensor, stride: Sequence[int], padding: Sequence[int],
            dilation: Sequence[int], groups: int) -> torch.Tensor:
    """`conv` as im2col + matmul: per batch and group, w (Kg, Cg*taps) @ cols (Cg*taps, O), or its transpose
    cols^T @ w^T (O, Kg) where `channels_innermost` says so."""
    n, k_out = x.shape[0], w.shape[0]
    cols = unfold(x, w.shape[2:], stride, padding, dilation)
    out_spatial = list(cols.shape[3:])
    positions = numel(out_spatial)
    cols = cols.reshape(n, groups, -1, positions)
    wg = w.reshape(groups, k_out // groups, -1)
    if channels_innermost(positions, k_out // groups, w.shape[2:]):
        y = torch.matmul(cols.transpose(-1, -2), wg.transpose(-1, -2)).transpose(-1, -2)   # (N, g, O, Kg)^T
    else:
        y = torch.matmul(wg, cols)      # (N, g, Kg, O)
    return y.reshape(n, k_out, *out_spatial)


def data_grad(dy: torch.Tensor, w: torch.Tensor, in_spatial: Sequence[int], stride: Sequence[int],
              padding: Sequence[int], dilation: Sequence[int], groups: int,
              conv_fn: Callable[..., torch.Tensor] = conv) -> torch.Tensor:
    """dLdx (N, C, in_spatial) of y = conv(x, w) as one forward conv (`conv_fn`). Also a transposed conv of dy
    with w (whose output size is `in_spatial`, output padding included)."""
    k_out, c_per_group = w.shape[0], w.shape[1]
    ks = list(w.shape[2:])
    spatial = list(range(2, 2 + len(ks)))
    wt = (w.reshape(groups, k_out // groups, c_per_group, *ks).transpose(1, 2)
          .reshape(groups * c_per_group, k_out // groups, *ks).flip(spatial))
    z = dilate(dy, stride)
    low = [d * (k - 1) - p for k, p, d in zip(ks, padding, dilation)]
    # the result has z + low + high - d*(k-1) elements: make that the input size
    high = [x - (zs + lo - d * (k - 1)) for x, zs, lo, k, d in zip(in_spatial, z.shape[2:], low, ks, dilation)]
    z = pad_or_crop(z, low, high)
    return conv_fn(z, wt, [1] * len(ks), [0] * len(ks), dilation, groups)


def mm_data_grad(dy: torch.Tensor, w: torch.Tensor, in_spatial: Sequence[int], stride: Sequence[int],
                 padding: Sequence[int], dilation: Sequence[int], groups: int) -> torch.Tensor:
    """`data_grad` with its conv as im2col + matmul; for a strided conv, `fold_data_grad`."""
    if any(s > 1 for s in stride):
        return fold_data_grad(dy, w, in_spatial, stride, padding, dilation, groups)
    return data_grad(dy, w, in_spatial, stride, padding, dilation, groups, conv_fn=mm_conv)


def fold_data_grad(dy: torch.Tensor, w: torch.Tensor, in_spatial: Sequence[int], stride: Sequence[int],
                   padding: Sequence[int], dilation: Sequence[int], groups: int) -> torch.Tensor:
    """dLdx as a matmul and a fold (col2im): per batch and group, the columns (Cg*taps, O) = w^T (Cg*taps, Kg) @
    dy (Kg, O); then each tap's column is added into the padded input at its offset, `stride` apart, and the
    padding cut off. The data gradient as a forward conv of the dilated dy multiplies the zeros the stride inserts
    (s^2 times the multiply-adds of a 2-D conv); this does not. The fold is written per phase of the stride (the
    input positions with one remainder mod s): there a tap's column lands densely, shifted by whole blocks, so it
    is pads and adds; the phases are then interleaved by one reshape."""
    n, k_out = dy.shape[0], dy.shape[1]
    cg, ks = w.shape[1], list(w.shape[2:])
    out_spatial = list(dy.shape[2:])
    kg = k_out // groups
    wt = w.reshape(groups, kg, cg * numel(ks)).transpose(1, 2)                    # (g, Cg*taps, Kg)
    cols = torch.matmul(wt, dy.reshape(n, groups, kg, numel(out_spatial)))        # (N, g, Cg*taps, O)
    cols = cols.reshape(n, groups * cg, numel(ks), *out_spatial)
    blocks = [-(-(x + 2 * p) // s) for x, p, s in zip(in_spatial, padding, stride)]   # the padded input / s, up
    phases: dict[tuple[int, ...], torch.Tensor] = {}
    for tap, offsets in enumerate(itertools.product(*(range(k) for k in ks))):
        pos = [o * d for o, d in zip(offsets, dilation)]
        shift = [p // s for p, s in zip(pos, stride)]
        part = pad_or_crop(cols[:, :, tap], shift, [b - sh - o for b, sh, o in zip(blocks, shift, out_spatial)])
        phase = tuple(p % s for p, s in zip(pos, stride))
        phases[phase] = part + phases[phase] if phase in phases else part
    zeros = next(iter(phases.values())).new_zeros([n, groups * cg, *blocks])
    every = itertools.product(*(range(s) for s in stride))
    nd = len(stride)
    full = torch.stack([phases.get(ph, zeros) for ph in every], 2).reshape(n, groups * cg, *stride, *blocks)
    order = [0, 1, *itertools.chain.from_iterable((2 + nd + i, 2 + i) for i in range(nd))]
    full = full.permute(order).reshape(n, groups * cg, *(b * s for b, s in zip(blocks, stride)))
    high = [b * s - p - x for b, s, p, x in zip(blocks, stride, padding, in_spatial)]
    return pad_or_crop(full, [-p for p in padding], [-h for h in high])


def weight_grad(dy: torch.Tensor, x: torch.Tensor, fil_spatial: Sequence[int], stride: Sequence[int],
                padding: Sequence[int], dilation: Sequence[int], groups: int) -> torch.Tensor:
    """dLdw (K, C/g, fil_spatial) of y = conv(x, w) as one forward conv."""
    n, c = x.shape[0], x.shape[1]
    sp = list(x.shape[2:])
    cg = c // groups
    # (N, g, Cg, X...) -> (Cg, g, N, X...) -> (Cg, g*N, X...)
    xt = (x.reshape(n, groups, cg, *sp).permute(2, 1, 0, *range(3, 3 + len(sp)))
          .reshape(cg, groups * n, *sp))
    out = conv(xt, dy.transpose(0, 1), dilation, padding, stride, groups)   # (Cg, K, >= k...)
    for i, k in enumerate(fil_spatial):
        if out.shape[2 + i] != k:
            out = out.narrow(2 + i, 0, k)
    return out.transpose(0, 1)


#: the columns (input channels x filter taps) under which an ungrouped weight gradient is one matmul per image
PARTIAL_COLUMNS = 256


def mm_weight_grad(dy: torch.Tensor, x: torch.Tensor, fil_spatial: Sequence[int], stride: Sequence[int],
                   padding: Sequence[int], dilation: Sequence[int], groups: int) -> torch.Tensor:
    """dLdw as im2col + matmul: per group, dy (Kg, N*O) @ cols (N*O, Cg*taps). Ungrouped with short columns
    (Cg*taps < PARTIAL_COLUMNS), per image instead, summed: dy_n (K, O) @ cols_n (O, C*taps) for each n. On a 2-core
    Zen 4, one thread, us per call, one matmul -> per image (torch): n8 c3 32x32 3x3 with the bias 183 -> 143
    (159), n32 c3 -> k16 972 -> 587 (424), n4 c16 56x56 1,510 -> 866 (686), n8 c8 32x32 s2 all gradients 272 ->
    257, n8 c8 16x16 1x1 35 -> 25; but n16 c64 14x14 (576 long) 4,343 -> 4,848 and c128 -> k256 (1,152) 2,265 ->
    3,785; c32 28x28 (288) and c64 28x28 unchanged. Its sums are shorter chains too: the 1x1's weight gradient,
    5x torch's rounding noise as one matmul of 2,048-long dot products, passes the numerics check per image."""
    n, k_out = dy.shape[0], dy.shape[1]
    o = numel(dy.shape[2:])
    cols = unfold(x, fil_spatial, stride, padding, dilation)               # (N, C, taps, O...)
    if groups == 1 and cols.shape[1] * cols.shape[2] < PARTIAL_COLUMNS:
        per_image = torch.matmul(dy.reshape(n, k_out, o), cols.reshape(n, -1, o).transpose(1, 2))   # (N, K, C*taps)
        return per_image.sum(0).reshape(k_out, -1, *fil_spatial)
    cols = cols.reshape(n, groups, -1, o).permute(1, 0, 3, 2).reshape(groups, n * o, -1)
    dym = dy.reshape(n, groups, k_out // groups, o).permute(1, 2, 0, 3).reshape(groups, k_out // groups, n * o)
    dw = torch.matmul(dym[0], cols[0]) if groups == 1 else torch.matmul(dym, cols)
    return dw.reshape(k_out, -1, *fil_spatial)


#: formulation -> (forward conv, data gradient, weight gradient), each written its way
PRIMITIVES = {
    FWDCONV: (conv, data_grad, weight_grad),
    MATMUL: (mm_conv, mm_data_grad, mm_weight_grad),
    MIXED: (mm_conv, data_grad, mm_weight_grad),
}


def gradients(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor, mask: Sequence[bool], transposed: bool,
              in_spatial: Sequence[int], fil_spatial: Sequence[int], stride: Sequence[int], padding: Sequence[int],
              dilation: Sequence[int], groups: int, formulation: str) -> tuple[torch.Tensor | None, ...]:
    """(dLdx, dLdw, dLdb) of a conv kernel, each None unless `mask` selects it, written as `formulation`
    ("default": `aten.convolution_backward`; otherwise PRIMITIVES).

    A transposed conv's gradients are always written with ordinary convolutions: IREE cannot lower
    `convolution_backward` of a transposed conv, but the transposed conv is the adjoint of the ordinary conv
    z = conv(dy, w), so dLdx = conv(dy, w) and dLdw is that conv's weight gradient with x as its output
    gradient. (Needs output padding < stride, which validation enforces.)"""
    s, p, d, g = list(stride), list(padding), list(dilation), groups
    if formulation not in PRIMITIVES:
        return _default_gradients(dy, x, w, mask, transposed, s, p, d, g)
    fwd, dgrad, wgrad = PRIMITIVES[formulation]
    dx = dw = db = None
    if transposed:
        if mask[0]:
            dx = fwd(dy, w, s, p, d, g)
        if mask[1]:
            dw = wgrad(x, dy, fil_spatial, s, p, d, g)
    else:
        if mask[0]:
            dx = dgrad(dy, w, in_spatial, s, p, d, g)
        if mask[1]:
            dw = wgrad(dy, x, fil_spatial, s, p, d, g)
    if mask[2]:
        db = bias_grad(dy)
    return dx, dw, db


def convolution_backward(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor, bias_sizes: Sequence[int] | None,
                         stride: Sequence[int], padding: Sequence[int], dilation: Sequence[int], transposed: bool,
                         output_padding: Sequence[int], groups: int,
                         mask: Sequence[bool]) -> tuple[torch.Tensor | None, ...]:
    """`aten.convolution_backward` (its schema's arguments) written with forward convolutions (FWDCONV): the
    lowering rule's decomposition of it (compile/lowering.py), where torch has none and IREE cannot lower the op,
    as IREE 3.13 cannot for any transposed conv (an `aten::convolution_backward` line a model records when the
    gradient reaching a ConvTranspose2d is a slice, e.g. of a concatenation's gradient)."""
    return gradients(dy, x, w, mask, transposed, list(x.shape[2:]), list(w.shape[2:]), stride, padding, dilation,
                     groups, FWDCONV)


def bias_grad(dy: torch.Tensor) -> torch.Tensor:
    """dLdb: dy summed over batch and space, accumulated in float32 for a 16-bit dy (as torch does; a float16
    sum of ~10^3 terms fails BOO's numerics)."""
    dims = [0, *range(2, dy.dim())]
    if dy.dtype in (torch.float16, torch.bfloat16):
        return dy.sum(dim=dims, dtype=torch.float32).to(dy.dtype)
    return dy.sum(dim=dims)


def _default_gradients(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor, mask: Sequence[bool], transposed: bool,
                       s: list[int], p: list[int], d: list[int], g: int) -> tuple[torch.Tensor | None, ...]:
    zeros = [0] * len(s)
    if not transposed:
        bias_sizes = [dy.shape[1]] if mask[2] else None
        return tuple(torch.ops.aten.convolution_backward(dy, x, w, bias_sizes, s, p, d, False, zeros, g, list(mask)))
    dx = dw = db = None
    if mask[0]:
        dx = conv(dy, w, s, p, d, g)
    if mask[1]:
        dw = torch.ops.aten.convolution_backward(x, dy, w, None, s, p, d, False, zeros, g, [False, True, False])[1]
    if mask[2]:
        db = dy.sum(dim=[0, *range(2, dy.dim())])
    return dx, dw, db
