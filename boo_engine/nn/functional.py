"""BOO's functional API on our kernels: `boo_conv`, `boo_layer_norm`, `boo_linear`.

Each is differentiable through a `torch.autograd.Function` whose backward calls OUR backward kernels (one kernel
per backward, selecting exactly the gradients autograd asks for), never torch's. Kernels are called through
`kernels.run`, so the variant in force, the per-device target, the in-memory launchable cache and `record_calls`
apply. Without autograd (no grad mode, or no input requiring grad) the forward kernel is called directly: the
Function's bookkeeping costs ~10 us per call, as much as the call itself on a small conv.

Arguments are checked before any kernel is built; anything our kernels do not take (float64, integers, mixed
dtypes or devices, wrong ranks, channels not divisible by groups, a bad layout) is one `BooNNError` line.
"""
from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol, TypeVar

import torch
import torch.nn.functional as F

from ..errors import BooError
from ..ops.conv import CONV_BACKWARD_MASKS, DEFAULT_LAYOUTS, SPATIAL_LETTERS, ConvSignature
from ..ops.gemm import GemmSignature
from ..ops.layernorm import LayerNormSignature
from ..variants import Variant
from . import kernels
from ._args import check_rank, check_tensors, int_tuple, shape_tuple
from .kernels import BooNNError

__all__ = ["boo_conv", "boo_layer_norm", "boo_linear"]

_MASK_TO_FORW = {mask: forw for forw, mask in CONV_BACKWARD_MASKS.items()}


def _needs_autograd(*tensors: torch.Tensor | None) -> bool:
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def _as_tuple(out: torch.Tensor | tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    return out if isinstance(out, tuple) else (out,)


def _one(out: torch.Tensor | tuple[torch.Tensor, ...]) -> torch.Tensor:
    """A single-result kernel's result (a launchable returns one result bare, several as a tuple)."""
    assert isinstance(out, torch.Tensor), "a single-result kernel returned a tuple"
    return out


S = TypeVar("S", ConvSignature, LayerNormSignature, GemmSignature)


class _Ctx(Protocol[S]):
    """An autograd Function's ctx as ours use it: torch's bookkeeping, plus the call's signature and variant
    (set in forward, read in backward)."""

    saved_tensors: tuple[torch.Tensor, ...]
    needs_input_grad: tuple[bool, ...]
    sig: S
    variant: Variant | str | None

    def save_for_backward(self, *tensors: torch.Tensor | None) -> None: ...


class _LayerNormCtx(_Ctx[LayerNormSignature], Protocol):
    has: tuple[bool, bool]     # (weight given, bias given)


# ---- convolution --------------------------------------------------------------------------------------------

def _layout(name: str, value: str | None, shared: str | None, nd: int) -> str:
    layout = shared or value or DEFAULT_LAYOUTS[nd]
    if not isinstance(layout, str) or sorted(layout.upper()) != sorted("NC" + SPATIAL_LETTERS[nd]):
        which = "shared_layout" if shared else name
        raise BooNNError(f"boo_conv: {which} {layout!r} is not a {nd}-D layout "
                         f"(expected a permutation of {DEFAULT_LAYOUTS[nd]})")
    return layout.upper()


def _same_padding(nd: int, fil: tuple[int, ...], dilation: tuple[int, ...],
                  stride: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """torch's padding="same": d*(k-1) split evenly, the odd element on the right (returned as extra)."""
    if any(s != 1 for s in stride):
        raise BooNNError("boo_conv: padding='same' needs stride 1 (as torch's conv)")
    total = [d * (k - 1) for k, d in zip(fil, dilation)]
    return tuple(t // 2 for t in total), tuple(t - t // 2 - t // 2 for t in total)


def _pad_right(x: torch.Tensor, layout: str, extra: tuple[int, ...], nd: int) -> torch.Tensor:
    """x with `extra[i]` zeros after the end of spatial dim i (in x's own layout)."""
    pads = [0] * (2 * x.dim())
    for letter, e in zip(SPATIAL_LETTERS[nd], extra):
        pads[2 * (x.dim() - 1 - layout.index(letter)) + 1] = e
    return F.pad(x, pads)


@functools.lru_cache(maxsize=1024)
def _conv_sig(dtype: str, x_shape: tuple[int, ...], w_shape: tuple[int, ...], bias: bool, stride: tuple[int, ...],
              padding: tuple[int, ...], dilation: tuple[int, ...], groups: int,
              layouts: tuple[str, str, str]) -> ConvSignature:
    """The forward signature of a call (cached: validation costs ~20 us, a whole small-conv call ~40 us)."""
    il, kl, ol = layouts
    nd = len(x_shape) - 2
    letters = SPATIAL_LETTERS[nd]
    n, c = x_shape[il.index("N")], x_shape[il.index("C")]
    k, cg = w_shape[kl.index("N")], w_shape[kl.index("C")]
    if cg * groups != c:
        raise BooNNError(f"boo_conv: input has {c} channels, weight expects {cg} x groups {groups} = {cg * groups}")
    if k % groups:
        raise BooNNError(f"boo_conv: {k} output channels not divisible by groups {groups}")
    try:
        return ConvSignature(dtype, n, c, k, tuple(x_shape[il.index(ch)] for ch in letters),
                             tuple(w_shape[kl.index(ch)] for ch in letters), stride, padding, dilation,
                             groups=groups, bias=bias, in_layout=il, fil_layout=kl, out_layout=ol)
    except BooError as e:  # e.g. a filter larger than the padded input: the signature's own line, re-labelled
        raise BooNNError(f"boo_conv: {str(e).removeprefix('conv: ')}") from None


class _BooConvFn(torch.autograd.Function):
    """y = conv(x, w, b); backward: one backward-conv kernel for the gradients autograd asks for."""

    @staticmethod
    def forward(ctx: _Ctx[ConvSignature], x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, sig: ConvSignature,
                variant: Variant | str | None) -> torch.Tensor:
        ctx.save_for_backward(x, w)
        ctx.sig, ctx.variant = sig, variant
        args = (x, w) if b is None else (x, w, b)
        return _one(kernels.run(sig, *args, variant=variant))

    @staticmethod
    def backward(ctx: _Ctx[ConvSignature], dy: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, w = ctx.saved_tensors
        sig = ctx.sig
        mask = (ctx.needs_input_grad[0], ctx.needs_input_grad[1], sig.bias and ctx.needs_input_grad[2])
        grads: list[torch.Tensor | None] = [None, None, None]
        if any(mask):
            bwd = replace(sig, forw=_MASK_TO_FORW[mask], bias=False)
            out = iter(_as_tuple(kernels.run(bwd, dy.contiguous(), x, w, variant=ctx.variant)))
            grads = [next(out) if on else None for on in mask]
        return grads[0], grads[1], grads[2], None, None


def boo_conv(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None, stride: int | Sequence[int] = 1,
             padding: int | Sequence[int] | str = 0, dilation: int | Sequence[int] = 1, groups: int = 1,
             shared_layout: str | None = None, input_layout: str | None = None,
             kernel_layout: str | None = None, output_layout: str | None = None, *,
             variant: Variant | str | None = None) -> torch.Tensor:
    """A differentiable 1-D, 2-D or 3-D convolution (the rank comes from `w`), as iree-turbine BOO's `boo_conv`.

    stride, padding, dilation: an int or one int per spatial dim (padding also "valid" or "same", as torch's);
    groups: an int dividing both channel counts. Layouts are permutations of "NCH", "NCHW" or "NCDHW" (BOO's
    meaning: each tensor is passed and returned in its layout's shape, so an "NHWC" input is an (N, H, W, C)
    tensor; the kernel layout's N is the output channels); `shared_layout` sets all three. The bias is (K,).
    `variant` (a Variant or a `--variant` string) picks the kernels' variant, else the one in force.
    Backward runs our backward-conv kernel for exactly the gradients asked for (dx, dw, db)."""
    op = "boo_conv"
    dtype = check_tensors(op, (("x", x), ("w", w), ("b", b)))
    check_rank(op, "w", w, (3, 4, 5), "3, 4 or 5 (a 1-D, 2-D or 3-D convolution's weight)")
    nd = w.dim() - 2
    check_rank(op, "x", x, (w.dim(),), f"{w.dim()} (as the {nd}-D convolution's weight)")
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise BooNNError(f"{op}: groups must be an int >= 1, got {groups!r}")
    layouts = (_layout("input_layout", input_layout, shared_layout, nd),
               _layout("kernel_layout", kernel_layout, shared_layout, nd),
               _layout("output_layout", output_layout, shared_layout, nd))
    k = w.shape[layouts[1].index("N")]
    if b is not None and tuple(b.shape) != (k,):
        raise BooNNError(f"{op}: b has shape {list(b.shape)}, expected [{k}] (one per output channel)")
    stride_t = int_tuple(op, "stride", stride, nd, 1)
    dilation_t = int_tuple(op, "dilation", dilation, nd, 1)
    if padding == "valid":
        padding_t = (0,) * nd
    elif padding == "same":
        fil = tuple(w.shape[layouts[1].index(ch)] for ch in SPATIAL_LETTERS[nd])
        padding_t, extra = _same_padding(nd, fil, dilation_t, stride_t)
        if any(extra):
            x = _pad_right(x, layouts[0], extra, nd)
    else:
        padding_t = int_tuple(op, "padding", padding, nd, 0)
    sig = _conv_sig(dtype, tuple(x.shape), tuple(w.shape), b is not None, stride_t, padding_t, dilation_t, groups,
                    layouts)
    x, w = x.contiguous(), w.contiguous()
    b = None if b is None else b.contiguous()
    if _needs_autograd(x, w, b):
        return _BooConvFn.apply(x, w, b, sig, variant)
    return _one(kernels.run(sig, x, w, *(() if b is None else (b,)), variant=variant))


# ---- layer norm ---------------------------------------------------------------------------------------------

class _BooLayerNormFn(torch.autograd.Function):
    """(y, mean, rstd) = layer_norm(x[, weight, bias]); backward: one backward kernel for the grads asked for."""

    @staticmethod
    def forward(ctx: _LayerNormCtx, x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None,
                sig: LayerNormSignature, variant: Variant | str | None) -> torch.Tensor:
        w_arg, b_arg = _affine_args(x, weight, bias, sig)
        y, mean, rstd = kernels.run(sig, x, *w_arg, *b_arg, variant=variant)
        ones = torch.ones(sig.normalized_shape, dtype=x.dtype, device=x.device) if weight is None else None
        ctx.save_for_backward(x, weight if weight is not None else ones, mean, rstd)
        ctx.sig, ctx.variant, ctx.has = sig, variant, (weight is not None, bias is not None)
        return y

    @staticmethod
    def backward(ctx: _LayerNormCtx, dy: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, weight, mean, rstd = ctx.saved_tensors
        sig = ctx.sig
        mask = (ctx.needs_input_grad[0], ctx.has[0] and ctx.needs_input_grad[1],
                ctx.has[1] and ctx.needs_input_grad[2])
        grads: list[torch.Tensor | None] = [None, None, None]
        if any(mask):
            forw = 2 * mask[0] + 4 * mask[1] + 8 * mask[2]
            # the full backward (-F 14) takes weight and bias only in the affine mode; every other mode takes the
            # weight (when dx is asked for) in both, so the plain mode serves them and saves a kernel per shape
            bwd = replace(sig, forw=forw, affine=sig.affine and forw == 14)
            zeros = torch.zeros_like(weight)
            by_role = {"dLdy": dy.contiguous(), "x": x, "weight": weight, "bias": zeros, "mean": mean, "rstd": rstd}
            out = iter(_as_tuple(kernels.run(bwd, *(by_role[r] for r in bwd.arg_names()), variant=ctx.variant)))
            grads = [next(out) if on else None for on in mask]
        return grads[0], grads[1], grads[2], None, None


def _affine_args(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None,
                 sig: LayerNormSignature) -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
    """The affine kernel takes both: a missing weight is ones, a missing bias zeros."""
    if not sig.affine:
        return (), ()
    shape = sig.normalized_shape
    w = weight if weight is not None else torch.ones(shape, dtype=x.dtype, device=x.device)
    b = bias if bias is not None else torch.zeros(shape, dtype=x.dtype, device=x.device)
    return (w,), (b,)


def boo_layer_norm(x: torch.Tensor, normalized_shape: int | Sequence[int], weight: torch.Tensor | None = None,
                   bias: torch.Tensor | None = None, eps: float = 1e-5, *,
                   variant: Variant | str | None = None) -> torch.Tensor:
    """`torch.nn.functional.layer_norm` on our kernels: normalize over the trailing `normalized_shape` dims.

    Forward: our layer-norm kernel (y, mean, rstd); backward: our layer-norm backward kernel for the gradients
    asked for. A weight without a bias runs the affine kernel with a zero bias (and no bias gradient), a bias
    without a weight the same with a weight of ones."""
    op = "boo_layer_norm"
    dtype = check_tensors(op, (("x", x), ("weight", weight), ("bias", bias)))
    shape = shape_tuple(op, "normalized_shape", normalized_shape)
    if not shape or x.dim() < len(shape) or tuple(x.shape[x.dim() - len(shape):]) != shape:
        raise BooNNError(f"{op}: normalized_shape {list(shape)} is not the trailing dims of x {list(x.shape)}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != shape:
            raise BooNNError(f"{op}: {name} has shape {list(t.shape)}, expected normalized_shape {list(shape)}")
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps >= 0:
        raise BooNNError(f"{op}: eps must be a number >= 0, got {eps!r}")
    x = x.contiguous()
    weight = None if weight is None else weight.contiguous()
    bias = None if bias is None else bias.contiguous()
    try:
        sig = LayerNormSignature(dtype, tuple(x.shape), x.dim() - len(shape), float(eps),
                                 affine=weight is not None or bias is not None)
    except BooError as e:
        raise BooNNError(f"{op}: {str(e).removeprefix('layernorm: ')}") from None
    if _needs_autograd(x, weight, bias):
        return _BooLayerNormFn.apply(x, weight, bias, sig, variant)
    w_arg, b_arg = _affine_args(x, weight, bias, sig)
    return kernels.run(sig, x, *w_arg, *b_arg, variant=variant)[0]


# ---- linear -------------------------------------------------------------------------------------------------

class _BooLinearFn(torch.autograd.Function):
    """y2 = x2 @ W^T (+ b) on (M, K) x (N, K); dX and dW by our GEMM backward kernels, db by torch's sum."""

    @staticmethod
    def forward(ctx: _Ctx[GemmSignature], x2: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                sig: GemmSignature, variant: Variant | str | None) -> torch.Tensor:
        ctx.save_for_backward(x2, weight)
        ctx.sig, ctx.variant = sig, variant
        return _linear_forward(x2, weight, bias, sig, variant)

    @staticmethod
    def backward(ctx: _Ctx[GemmSignature], dy: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x2, weight = ctx.saved_tensors
        sig = ctx.sig
        dy = dy.contiguous()
        need_dx, need_dw = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        dx = _one(kernels.run(replace(sig, forw=2), dy, weight, variant=ctx.variant)) if need_dx else None
        dw = _one(kernels.run(replace(sig, forw=3), dy, x2, variant=ctx.variant)) if need_dw else None
        db = dy.sum(0) if ctx.needs_input_grad[2] else None
        return dx, dw, db, None, None


def _linear_forward(x2: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, sig: GemmSignature,
                    variant: Variant | str | None) -> torch.Tensor:
    y = _one(kernels.run(sig, x2, weight, variant=variant))
    return y if bias is None else y + bias


def boo_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, *,
               variant: Variant | str | None = None) -> torch.Tensor:
    """`torch.nn.functional.linear` on our GEMM kernels: y = x @ weight^T (+ bias), x of any rank >= 1 (its
    leading dims flattened to M rows), weight (N, K) stored as nn.Linear keeps it (the GEMM's transposed B).

    Forward, dX (`-F 2`) and dW (`-F 3`) are our GEMM kernels; the bias add and its gradient (a sum over the
    rows) are plain torch."""
    op = "boo_linear"
    check_tensors(op, (("x", x), ("weight", weight), ("bias", bias)))
    check_rank(op, "weight", weight, (2,), "2 (out_features, in_features)")
    if x.dim() < 1:
        raise BooNNError(f"{op}: x is a 0-dim tensor; expected at least 1 dim")
    n, k = weight.shape
    if x.shape[-1] != k:
        raise BooNNError(f"{op}: x's last dim is {x.shape[-1]}, weight takes in_features {k}")
    if bias is not None and tuple(bias.shape) != (n,):
        raise BooNNError(f"{op}: bias has shape {list(bias.shape)}, expected [{n}]")
    lead = tuple(x.shape[:-1])
    x2 = x.reshape(-1, k).contiguous()
    if x2.shape[0] == 0 or k == 0 or n == 0:
        raise BooNNError(f"{op}: empty operand (x {list(x.shape)}, weight {list(weight.shape)})")
    sig = GemmSignature(check_tensors(op, (("x", x),)), x2.shape[0], k, n, trans_b=True)
    weight = weight.contiguous()
    if _needs_autograd(x2, weight, bias):
        y = _BooLinearFn.apply(x2, weight, bias, sig, variant)
    else:
        y = _linear_forward(x2, weight, bias, sig, variant)
    return y.reshape(*lead, n)
