"""Small helpers shared by the op signatures (validation with one-line CommandErrors, shape strings)."""
from __future__ import annotations

from collections.abc import Sequence

from boo_engine.errors import CommandError
from boo_engine.ops.base import DTYPES

#: largest size accepted for one dimension: beyond this torch and IREE index arithmetic overflows anyway
MAX_DIM = 2**31 - 1

#: the mode words BOO uses, by the set of gradients computed (input, weight, bias)
BACKWARD_MODE_NAMES: dict[tuple[bool, bool, bool], str] = {
    (True, False, False): "input_backward",
    (False, True, False): "weight_backward",
    (False, False, True): "bias_backward",
    (True, True, False): "input_weight_backward",
    (True, False, True): "input_bias_backward",
    (False, True, True): "weight_bias_backward",
    (True, True, True): "all_backward",
}


#: how shape labels name the dtypes (float32, the default, is left out of a label)
SHORT_DTYPES: dict[str, str] = {"float32": "", "float16": "f16", "bfloat16": "bf16"}


def short_backward_mode(mask: tuple[bool, bool, bool]) -> str:
    """`bwd-data`, `bwd-weight`, `bwd-bias`, `bwd-data+weight`, ... `bwd-all`: a backward mode in a shape label."""
    if all(mask):
        return "bwd-all"
    return "bwd-" + "+".join(name for name, on in zip(("data", "weight", "bias"), mask) if on)


def label_of(*tokens: str) -> str:
    """A shape label from its tokens (empty ones left out), separated by single spaces."""
    return " ".join(t for t in tokens if t)


def fail(op: str, message: str) -> CommandError:
    """The error to raise: `op: message` on one line."""
    return CommandError(f"{op}: {message}")


def check_dtype(op: str, dtype_name: str) -> None:
    if dtype_name not in DTYPES:
        raise fail(op, f"unsupported dtype {dtype_name!r} (expected one of {', '.join(DTYPES)})")


def check_size(op: str, name: str, value: int, minimum: int = 1) -> None:
    """A size (or stride, padding ...) named `name` in messages must be an int in [minimum, MAX_DIM]."""
    if type(value) is int and minimum <= value <= MAX_DIM:   # the usual case, decided at once
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise fail(op, f"{name} expects an integer, got {value!r}")
    if value < minimum:
        what = "positive" if minimum == 1 else f"at least {minimum}"
        raise fail(op, f"{name} must be {what}, got {value}")
    if value > MAX_DIM:
        raise fail(op, f"{name} {value} is too large (at most {MAX_DIM})")


def shape_str(shape: Sequence[int]) -> str:
    """`2x8x16x16`: how BOO writes shapes in kernel names."""
    return "x".join(map(str, map(int, shape)))


def numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n
