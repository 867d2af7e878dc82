"""Rounding noise of a computation, simulated: run it in float64 under `jitter_mode(u)` and the difference from the
plain float64 run is the error a correct run in a dtype of unit roundoff u (float32: 2^-24) can have.

Two sources are modelled at every aten op (forward and backward alike):

* results rounded to the dtype: every floating result multiplied by (1 + d), d uniform in [-u, u] (so the next
  op's operands are rounded; the inputs, exact in their dtype, are not). This is what leaves a value that is zero
  in exact arithmetic (a cancellation downstream) at rounding level instead of at zero;
* accumulation in sums of products (mm, addmm, bmm, convolution and its backward, sum, mean: MULTILINEAR): an
  error of std u * sqrt(n) * sum|terms| per output element of n terms, the probabilistic bound of Higham & Mary
  (2019), which holds whatever the summation order; u of float32 at most (half-precision kernels accumulate in
  float32). An op of the list, called on its arguments' absolute values,
  gives sum|terms|; on ones, n.

Used where a tensor is compared with a reference and its exact value can be zero (boo_engine/numerics.py, the model
check of modelbench/judge.py): the result says how far from exact a correct kernel's output may be.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeGuard

if TYPE_CHECKING:
    import torch
    from torch._ops import OpOverload
    from torch.utils._python_dispatch import TorchDispatchMode

#: ops whose every output element is a sum of products, each linear in every floating argument: on the arguments'
#: absolute values they give the sum of the terms' absolute values, on ones the number of terms
MULTILINEAR = frozenset({"mm", "bmm", "addmm", "baddbmm", "mv", "dot", "convolution", "convolution_backward",
                         "sum", "mean"})
#: a tensor at rounding level passes within this many times its simulated rounding noise (the callers' docstrings
#: give the measurements behind it)
FLOOR_FACTOR = 16.0
#: sums of products accumulate in float32 at least (float16 / bfloat16 kernels, ours and torch's, do)
F32_UNIT_ROUNDOFF = 2.0 ** -24
#: ops that copy or create without arithmetic: their results are not jittered
_NO_ARITHMETIC = frozenset({"clone", "_to_copy", "detach", "lift_fresh", "copy", "empty_like", "zeros_like"})


def jitter_mode(u: float, seed: int) -> TorchDispatchMode:
    """A dispatch mode under which every aten op computes in its inputs' dtype with rounding noise of unit
    roundoff `u` added, as the module's docstring says; `seed` seeds the noise."""
    u_acc = min(u, F32_UNIT_ROUNDOFF)
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_map

    gen = torch.Generator().manual_seed(seed)

    def is_float(t: object) -> TypeGuard[torch.Tensor]:
        return isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel() > 0

    def jitter(t: object) -> object:   # a leaf of an op's outputs: a floating tensor jittered, the rest as is
        return t * (1 + u * (2 * torch.rand(t.shape, dtype=t.dtype, generator=gen) - 1)) if is_float(t) else t

    def accumulation(out: object, total: torch.Tensor, count: torch.Tensor) -> object:
        if not is_float(out):
            return out
        return out + u_acc * count.clamp(min=0).sqrt() * total * torch.randn(out.shape, dtype=out.dtype, generator=gen)

    class Jitter(TorchDispatchMode):
        # (an aten op's arguments and results: pytrees of tensors, numbers, lists, dtypes, None...)
        def __torch_dispatch__(self, func: OpOverload, types: Sequence[type], args: tuple[Any, ...] = (),
                               kwargs: dict[str, Any] | None = None) -> Any:
            schema, kwargs = func._schema, kwargs or {}
            name = func.__name__.split(".")[0]
            if (schema.is_mutable or any(r.alias_info is not None for r in schema.returns)
                    or name in _NO_ARITHMETIC):
                return func(*args, **kwargs)
            out = func(*args, **kwargs)
            if name not in MULTILINEAR:
                return tree_map(jitter, out)
            total = func(*tree_map(lambda t: t.abs() if is_float(t) else t, (args, kwargs))[0], **kwargs)
            if name == "mean":    # a sum of n terms over n: the error is a sum's over n
                count = torch.full_like(out, args[0].numel() / max(out.numel(), 1))
            else:
                count = func(*tree_map(lambda t: torch.ones_like(t) if is_float(t) else t, (args, kwargs))[0],
                             **kwargs)
            if isinstance(out, torch.Tensor):
                return jitter(accumulation(out, total, count))
            return type(out)(jitter(accumulation(o, q, c)) for o, q, c in zip(out, total, count))

    return Jitter()
