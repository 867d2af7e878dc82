"""Argument checks shared by the functional API: each failure is one `BooNNError` line naming the op and what is
wrong, raised before any kernel is built (a signature's own check would name MIOpen flags the caller never
typed)."""
from __future__ import annotations

from collections.abc import Sequence

import torch

from .kernels import BooNNError

#: the dtypes our kernels are built for, by torch dtype
DTYPE_NAMES: dict[torch.dtype, str] = {
    torch.float32: "float32",
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
}


def check_tensors(op: str, named: Sequence[tuple[str, torch.Tensor | None]]) -> str:
    """The dtype name shared by the (name, tensor-or-None) arguments; one supported dtype, one device."""
    present = [(n, t) for n, t in named if t is not None]
    for name, t in present:
        if not isinstance(t, torch.Tensor):
            raise BooNNError(f"{op}: {name} must be a torch.Tensor, got {type(t).__name__}")
    name0, t0 = present[0]
    if t0.dtype not in DTYPE_NAMES:
        raise BooNNError(f"{op}: {name0} has dtype {str(t0.dtype).removeprefix('torch.')} "
                         f"(boo kernels take float32, float16 or bfloat16)")
    for name, t in present[1:]:
        if t.dtype != t0.dtype:
            raise BooNNError(f"{op}: {name} is {str(t.dtype).removeprefix('torch.')}, {name0} "
                             f"{str(t0.dtype).removeprefix('torch.')} (one dtype for all tensors)")
        if t.device != t0.device:
            raise BooNNError(f"{op}: {name} is on {t.device}, {name0} on {t0.device} (one device for all tensors)")
    return DTYPE_NAMES[t0.dtype]


def int_tuple(op: str, name: str, value: object, n: int, minimum: int) -> tuple[int, ...]:
    """`value` (a caller's argument, checked here: an int, or a sequence of n ints) as n ints, each >= minimum."""
    if isinstance(value, int) and not isinstance(value, bool):
        values: tuple[object, ...] = (value,) * n
    elif isinstance(value, Sequence) and not isinstance(value, str):
        values = tuple(value)
        if len(values) != n:
            raise BooNNError(f"{op}: {name} {list(values)} has {len(values)} values for a {n}-D convolution")
    else:
        raise BooNNError(f"{op}: {name} must be an int or a sequence of {n} ints, got {value!r}")
    ints: list[int] = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
            raise BooNNError(f"{op}: {name} {value!r} must hold ints >= {minimum}")
        ints.append(v)
    return tuple(ints)


def shape_tuple(op: str, name: str, value: object) -> tuple[int, ...]:
    """A normalized shape given (a caller's argument, checked here) as an int or a sequence of ints."""
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,)
    if isinstance(value, (Sequence, torch.Size)) and not isinstance(value, str) and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value):
        return tuple(value)
    raise BooNNError(f"{op}: {name} must be an int or a sequence of ints, got {value!r}")


def check_rank(op: str, name: str, t: torch.Tensor, ranks: Sequence[int], what: str) -> None:
    if t.dim() not in ranks:
        raise BooNNError(f"{op}: {name} has {t.dim()} dims {list(t.shape)}; expected {what}")
