"""Which aten nodes of a graph our kernels replace: one `Match` per node (or conv + activation pair).

Shapes, strides and dtypes come from each node's `meta["val"]` (the fake tensor aot_autograd traced), so a
signature is static: the backend is for `dynamic=False` graphs. A node whose signature our kernels cannot take
(dtype, layout, a transposed conv, a scaled addmm, ...) is a `Skip` naming why: the nested backend keeps it.

What matches (forward and backward graphs alike):
- `aten.convolution` (not transposed) -> a forward ConvSignature, with the single consumer `relu` / `sigmoid`
  fused in when the conv output has no other user;
- `aten.convolution_backward` (not transposed) -> the backward ConvSignature of its output mask;
- `aten.native_layer_norm` (input contiguous: the normalized dims are the trailing ones in memory) and
  `aten.native_layer_norm_backward` -> LayerNormSignature forward / backward;
- `aten.mm`, `aten.addmm` (beta = alpha = 1), `aten.bmm` -> an AtenSignature of the call with its operands'
  strides (a transposed weight is read in place, as the kernel's view of its dense buffer);
- batch norm (`_native_batch_norm_legit_functional` in training, `_native_batch_norm_legit_no_training` in eval,
  `native_batch_norm_backward`) -> BatchNormSignature, where ours computes what torch does: NC(D)HW contiguous
  data, float32 parameters and statistics, eps 1e-5 and momentum 0.1 (BOO's, fixed in our kernels).
"""
from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx
from torch._ops import OpOverload
from torch.fx.node import Argument

from ..errors import BooError
from ..ops.aten import AtenSignature, view_plan
from ..ops.base import OpSignature
from ..ops.bnorm import BNORM_EPS, BNORM_MOMENTUM, BatchNormSignature
from ..ops.conv import CONV_BACKWARD_MASKS, ConvSignature
from ..ops.layernorm import LayerNormSignature

aten = torch.ops.aten

#: dtypes our kernels take from a graph
FLOAT_DTYPES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}
_MASK_TO_FORW: dict[tuple[bool, ...], int] = {mask: forw for forw, mask in CONV_BACKWARD_MASKS.items()}
_ACTIVATIONS = {aten.relu.default: "relu", aten.sigmoid.default: "sigmoid"}


@dataclass
class Ones:
    """A kernel argument the graph does not have: all ones of `shape` (a non-affine layer norm's weight)."""

    shape: tuple[int, ...]
    like: fx.Node


@dataclass
class Match:
    """`node` (and `fused`, an activation consuming it) computed by `sig`'s kernel on `inputs`.

    `perms[i]`: the permutation that turns input i into its kernel buffer (a transposed operand read in place),
    or None. `outputs`: for an aten op returning a tuple, aten's output index -> the kernel's; None when the node
    returns one tensor."""

    aten: str
    sig: OpSignature
    node: fx.Node
    inputs: list[fx.Node | Ones]
    perms: list[tuple[int, ...] | None] = field(default_factory=list)
    outputs: dict[int, int] | None = None
    fused: fx.Node | None = None

    @property
    def replaced(self) -> fx.Node:
        """The node whose value the kernel's result stands for."""
        return self.fused if self.fused is not None else self.node


@dataclass(frozen=True)
class Skip:
    """A node our kernels leave to the nested backend, and why (one line)."""

    aten: str
    reason: str


def _val(n: Argument) -> torch.Tensor:
    v = n.meta.get("val") if isinstance(n, fx.Node) else None
    if not isinstance(v, torch.Tensor):
        raise _Unsupported("no static tensor metadata on an operand")
    # A symbolic size (torch.compile with dynamic=True, or Dynamo's automatic dynamic shapes after a recompile):
    # our kernels are built for one shape, and the bound call skips the launchable's shape checks, so a kernel
    # must never stand in a graph whose shapes can change.
    if not all(type(d) is int for d in (*v.shape, *v.stride())):
        raise _Unsupported("dynamic shapes (our kernels are built per shape: torch.compile(..., dynamic=False))")
    return v


class _Unsupported(Exception):
    pass


def _args(node: fx.Node) -> tuple[Any, ...]:
    """The node's positional arguments, untyped (fx types them as a union no matcher can unpack)."""
    return tuple(node.args)


def _dtype(*nodes: Argument) -> str:
    vals = [_val(n) for n in nodes if n is not None]
    name = FLOAT_DTYPES.get(vals[0].dtype)
    if name is None:
        raise _Unsupported(f"dtype {vals[0].dtype} (our kernels take float32, float16, bfloat16)")
    if any(v.dtype != vals[0].dtype for v in vals):
        raise _Unsupported("operands of mixed dtypes")
    if any(v.device.type != "cpu" and v.device.type != "cuda" for v in vals):
        raise _Unsupported(f"device {vals[0].device}")
    return name


def _spatial(seq: Sequence[int], nd: int) -> tuple[int, ...]:
    ints = [int(s) for s in seq]
    return tuple(ints * nd) if len(ints) == 1 else tuple(ints)


def _conv(node: fx.Node) -> Match:
    x, w, b, stride, padding, dilation, transposed, _opad, groups = _args(node)[:9]
    if transposed:
        raise _Unsupported("transposed convolution")
    dtype = _dtype(x, w, b)
    xv, wv = _val(x), _val(w)
    nd = xv.dim() - 2
    users = list(node.users)
    fused = users[0] if len(users) == 1 and users[0].target in _ACTIVATIONS else None
    sig = ConvSignature(dtype, int(xv.shape[0]), int(xv.shape[1]), int(wv.shape[0]), tuple(xv.shape[2:]),
                        tuple(wv.shape[2:]), _spatial(stride, nd), _spatial(padding, nd), _spatial(dilation, nd),
                        int(groups), bias=b is not None,
                        activation=_ACTIVATIONS[fused.target] if fused is not None else "")  # type: ignore[index]
    return Match("aten.convolution", sig, node, [x, w] + ([b] if b is not None else []), fused=fused)


def _conv_backward(node: fx.Node) -> Match:
    dy, x, w, _bias_sizes, stride, padding, dilation, transposed, _opad, groups, mask = _args(node)[:11]
    if transposed:
        raise _Unsupported("transposed convolution")
    forw = _MASK_TO_FORW.get(tuple(bool(m) for m in mask))
    if forw is None:
        raise _Unsupported("no gradient asked for")
    dtype = _dtype(dy, x, w)
    xv, wv = _val(x), _val(w)
    nd = xv.dim() - 2
    sig = ConvSignature(dtype, int(xv.shape[0]), int(xv.shape[1]), int(wv.shape[0]), tuple(xv.shape[2:]),
                        tuple(wv.shape[2:]), _spatial(stride, nd), _spatial(padding, nd), _spatial(dilation, nd),
                        int(groups), forw=forw)
    selected = [i for i, on in enumerate(sig.grad_mask) if on]
    return Match("aten.convolution_backward", sig, node, [dy, x, w], outputs={i: j for j, i in enumerate(selected)})


def _layer_norm(node: fx.Node) -> Match:
    x, shape, weight, bias, eps = _args(node)[:5]
    if (weight is None) != (bias is None):
        raise _Unsupported("weight without bias (or bias without weight)")
    dtype = _dtype(x, weight, bias)
    xv = _val(x)
    if not xv.is_contiguous():
        raise _Unsupported("input not contiguous (the normalized dims are not the trailing ones in memory)")
    stats = [v for v in node.meta.get("val", ())[1:]] if isinstance(node.meta.get("val"), (tuple, list)) else []
    if any(s.dtype != xv.dtype for s in stats):
        raise _Unsupported("mean/rstd in another dtype than the input")
    sig = LayerNormSignature(dtype, tuple(xv.shape), xv.dim() - len(shape), float(eps), affine=weight is not None)
    inputs = [x] + ([weight, bias] if weight is not None else [])
    return Match("aten.native_layer_norm", sig, node, inputs, outputs={0: 0, 1: 1, 2: 2})


def _layer_norm_backward(node: fx.Node) -> Match:
    dy, x, shape, mean, rstd, weight, bias, mask = _args(node)[:8]
    on = tuple(bool(m) for m in mask)
    forw = 2 * on[0] + 4 * on[1] + 8 * on[2]
    if not forw:
        raise _Unsupported("no gradient asked for")
    dtype = _dtype(dy, x, mean, rstd, weight)
    xv = _val(x)
    if not xv.is_contiguous():
        raise _Unsupported("input not contiguous")
    affine = weight is not None and bias is not None
    if forw == 14 and not affine:
        raise _Unsupported("all gradients without both weight and bias")
    sig = LayerNormSignature(dtype, tuple(xv.shape), xv.dim() - len(shape), 1e-5, affine=affine, forw=forw)
    by_role: dict[str, fx.Node | Ones | None] = {"dLdy": dy, "x": x, "weight": weight, "bias": bias, "mean": mean,
                                                 "rstd": rstd}
    if weight is None:
        by_role["weight"] = Ones(tuple(int(d) for d in shape), x)
    inputs = [by_role[r] for r in sig.arg_names()]
    if any(i is None for i in inputs):
        raise _Unsupported("an argument the kernel needs is absent")
    selected = [i for i, o in enumerate(on) if o]
    return Match("aten.native_layer_norm_backward", sig, node, inputs,  # type: ignore[arg-type]
                 outputs={i: j for j, i in enumerate(selected)})


def _matmul(node: fx.Node) -> Match:
    name = node.target.__name__.split(".")[0]   # type: ignore[union-attr]
    tensors = [a for a in _args(node) if isinstance(a, fx.Node)]
    kwargs: dict[str, Any] = dict(node.kwargs)
    if len(tensors) != len(node.args) or any(float(v) != 1.0 for v in kwargs.values()):
        raise _Unsupported("scaled (beta/alpha != 1)")
    dtype = _dtype(*tensors)
    vals = [_val(t) for t in tensors]
    perms: list[tuple[int, ...] | None] = []
    for v in vals:
        plan = view_plan(tuple(v.shape), tuple(v.stride()))
        if plan.kind == "dense":
            perms.append(None)
            continue
        order = [0] * len(plan.perm)
        for i, p in enumerate(plan.perm):
            order[p] = i
        if (plan.kind != "view" or len(plan.kept) != v.dim() or None in plan.slices
                or tuple(plan.base) != tuple(int(v.shape[d]) for d in order)):
            raise _Unsupported(f"operand layout {tuple(v.shape)} strides {tuple(v.stride())}")
        perms.append(tuple(order))
    sig = AtenSignature(name=name, dims=tuple(tuple(int(d) for d in v.shape) for v in vals),
                        types=(dtype,) * len(vals), strides=tuple(tuple(int(s) for s in v.stride()) for v in vals),
                        concrete=("",) * len(vals))
    sig.check()
    return Match(f"aten.{name}", sig, node, list(tensors), perms=perms)


def _bnorm_common(node: fx.Node, x: Argument, params: list[Argument], eps: float,
                  momentum: float = 0.1) -> tuple[str, tuple[int, ...]]:
    """What every batch-norm kernel of ours needs: NC(D)HW contiguous data in one of our dtypes, float32
    weight / bias / statistics all present, and BOO's fixed epsilon 1e-5 and momentum 0.1."""
    if any(p is None for p in params):
        raise _Unsupported("batch norm without weight, bias or running statistics")
    data = _dtype(x)
    xv = _val(x)
    if xv.dim() not in (4, 5) or not xv.is_contiguous():
        raise _Unsupported("batch norm input not 4-D/5-D NC(D)HW contiguous")
    if any(_val(p).dtype != torch.float32 for p in params):
        raise _Unsupported("batch norm parameters not float32")
    if abs(float(eps) - BNORM_EPS) > 1e-12 or abs(float(momentum) - BNORM_MOMENTUM) > 1e-12:
        raise _Unsupported(f"batch norm eps {float(eps):g} / momentum {float(momentum):g} (ours: 1e-5 / 0.1)")
    return data, tuple(int(d) for d in xv.shape)


def _only_outputs_used(node: fx.Node, allowed: set[int]) -> None:
    for u in node.users:
        if u.target is not operator.getitem or u.args[1] not in allowed:
            raise _Unsupported("an output our kernel does not compute is used")


def _bnorm_inference(node: fx.Node) -> Match:
    x, weight, bias, rmean, rvar, momentum, eps = _args(node)[:7]
    dtype, shape = _bnorm_common(node, x, [weight, bias, rmean, rvar], eps)
    _only_outputs_used(node, {0})
    sig = BatchNormSignature(dtype, shape, "NCHW" if len(shape) == 4 else "NCDHW", bnorm_mode="forward_inference")
    return Match("aten._native_batch_norm_legit_no_training", sig, node, [x, weight, bias, rmean, rvar],
                 outputs={0: 0})


def _bnorm_training(node: fx.Node) -> Match:
    x, weight, bias, rmean, rvar, training, momentum, eps = _args(node)[:8]
    if not training:
        raise _Unsupported("functional batch norm not in training mode")
    dtype, shape = _bnorm_common(node, x, [weight, bias, rmean, rvar], eps, momentum)
    sig = BatchNormSignature(dtype, shape, "NCHW" if len(shape) == 4 else "NCDHW", bnorm_mode="forward_training",
                             run=True, save=True)
    return Match("aten._native_batch_norm_legit_functional", sig, node, [x, weight, bias, rmean, rvar],
                 outputs={i: i for i in range(5)})


def _bnorm_backward(node: fx.Node) -> Match:
    dy, x, weight, _rmean, _rvar, save_mean, save_invstd, train, eps, mask = _args(node)[:10]
    if not train:
        raise _Unsupported("batch norm backward of an inference pass")
    dtype, shape = _bnorm_common(node, x, [weight, save_mean, save_invstd], eps)
    if _dtype(dy) != dtype:
        raise _Unsupported("operands of mixed dtypes")
    sig = BatchNormSignature(dtype, shape, "NCHW" if len(shape) == 4 else "NCDHW", bnorm_mode="backward", save=True)
    selected = [i for i, on in enumerate(mask) if on]
    return Match("aten.native_batch_norm_backward", sig, node, [dy, x, weight, save_mean, save_invstd],
                 outputs={i: i for i in selected})


MATCHERS: dict[OpOverload, Callable[[fx.Node], Match]] = {
    aten.convolution.default: _conv,
    aten.convolution_backward.default: _conv_backward,
    aten.native_layer_norm.default: _layer_norm,
    aten.native_layer_norm_backward.default: _layer_norm_backward,
    aten.mm.default: _matmul,
    aten.addmm.default: _matmul,
    aten.bmm.default: _matmul,
    aten._native_batch_norm_legit_no_training.default: _bnorm_inference,
    aten._native_batch_norm_legit_functional.default: _bnorm_training,
    aten.native_batch_norm_backward.default: _bnorm_backward,
}

#: the aten ops the backend takes over (inductor must not decompose them before we see them)
FUSED_OPS = tuple(MATCHERS)


def find_matches(gm: fx.GraphModule) -> tuple[list[Match], list[Skip]]:
    """Every node our kernels take, in graph order, and every candidate node they leave (with why)."""
    matches: list[Match] = []
    skips: list[Skip] = []
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        matcher = MATCHERS.get(node.target)
        if matcher is None:
            continue
        try:
            matches.append(matcher(node))
        except (_Unsupported, BooError) as e:
            skips.append(Skip(_op_name(node), str(e).splitlines()[0] if str(e) else type(e).__name__))
    return matches, skips


def _op_name(node: fx.Node) -> str:
    return "aten." + str(getattr(node.target, "__name__", node.target)).split(".")[0]


def unfused_ops(gm: fx.GraphModule) -> list[str]:
    """The aten ops of `gm` that none of the matchers handles (for the log and `fallbacks`): convolution-like,
    norm-like and matmul-like ops only, not every elementwise op."""
    heavy = ("conv", "norm", "mm", "matmul", "linear", "pool", "gelu", "softmax", "attention")
    out = []
    for node in gm.graph.nodes:
        if (node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload)
                and node.target.namespace == "aten" and node.target not in MATCHERS):
            name = _op_name(node)
            if any(h in name for h in heavy) and name not in out:
                out.append(name)
    return out
