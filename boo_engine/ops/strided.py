"""A strided tensor (a shape and strides, as a profiler trace records one) as a view of a dense buffer laid out
like the tensor's storage: what an `aten::` call's kernel takes and makes the view of inside, so IREE and eager
torch read the operand as the traced call did (transposed, sliced, channels-last, broadcast)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from boo_engine.ops._common import numel
from boo_engine.ops._lazy import torch

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class ViewPlan:
    """How one strided tensor is made from a dense buffer of shape `base`: `kind` is "dense" (the buffer is the
    tensor), "view" (index `slices` - an int picks element 0 of the innermost padding dim - permute by `perm`,
    insert the size-1 / broadcast dims, expand) or "as_strided" (a flat buffer)."""

    kind: str
    base: tuple[int, ...]
    slices: tuple[int | None, ...] = ()   # per base dim: the size kept, or None for "take element 0"
    perm: tuple[int, ...] = ()
    kept: tuple[int, ...] = ()            # the dims of the view that come from the buffer, in view order
    shape: tuple[int, ...] = ()
    strides: tuple[int, ...] = ()

    @property
    def distinct_elements(self) -> int:
        """Elements a call reads (broadcast dims counted once)."""
        if self.kind == "dense":
            return numel(self.base)
        return numel([self.shape[d] for d in range(len(self.shape)) if self.strides[d] != 0])


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    out, step = [], 1
    for d in reversed(shape):
        out.append(step)
        step *= max(int(d), 1)
    return tuple(reversed(out))


def view_plan(shape: Sequence[int], strides: Sequence[int]) -> ViewPlan:
    """The buffer and view steps that give a tensor of `shape` with `strides` (size-1 dims' strides ignored)."""
    shape, strides = tuple(shape), tuple(strides)
    rank = len(shape)
    dense = contiguous_strides(shape)
    if all(shape[d] == 1 or strides[d] == dense[d] for d in range(rank)):
        return ViewPlan("dense", shape)
    kept = tuple(d for d in range(rank) if shape[d] > 1 and strides[d] > 0)
    order = sorted(kept, key=lambda d: -strides[d])
    nested = all(strides[a] > strides[b] and strides[a] % strides[b] == 0 and strides[a] >= strides[b] * shape[b]
                 for a, b in zip(order, order[1:]))
    if not nested:   # overlapping or interleaved: a flat buffer as long as the furthest element
        extent = 1 + sum((shape[d] - 1) * strides[d] for d in range(rank) if shape[d] > 1)
        return ViewPlan("as_strided", (extent,), shape=shape, strides=strides)
    base = [shape[order[0]]] if order else []
    base += [strides[a] // strides[b] for a, b in zip(order, order[1:])]
    slices: list[int | None] = [shape[d] for d in order]
    if order and strides[order[-1]] > 1:   # every n-th element: an innermost padding dim, element 0 taken
        base.append(strides[order[-1]])
        slices.append(None)
    perm = tuple(order.index(d) for d in kept)
    return ViewPlan("view", tuple(base), tuple(slices), perm, kept, shape, strides)


def apply_view(plan: ViewPlan, buffer: torch.Tensor) -> torch.Tensor:
    """The strided tensor `plan` describes, as a view of `buffer` (traceable by torch.export)."""
    if plan.kind == "dense":
        return buffer
    if plan.kind == "as_strided":
        return torch.as_strided(buffer, plan.shape, plan.strides)
    t = buffer[tuple(slice(0, n) if n is not None else 0 for n in plan.slices)] if plan.slices else buffer
    if plan.perm and plan.perm != tuple(range(len(plan.perm))):
        t = t.permute(plan.perm)
    for d in range(len(plan.shape)):
        if d not in plan.kept:
            t = t.unsqueeze(d)
    return t.expand(plan.shape) if tuple(t.shape) != plan.shape else t


