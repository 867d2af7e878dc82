"""The outputs of a few common aten calls by rule, where torch's own meta kernel is slow Python.

`aten_call.resolve` learns what a call returns by running it on meta tensors. For most ops that is the C++ meta
kernel (~15-40 us), but for some it is torch's Python reference with its type-promotion wrappers: aten::addmm ~0.35
ms, aten::linear ~0.33 ms, aten::gelu ~0.4 ms, aten::relu ~0.27 ms, aten::add/mul ~0.1 ms a call (torch 2.13 on a
Zen 4 core); and even aten::mm/bmm took ~0.09 ms a line with the meta tensors made for it. A profiler trace of a
transformer is mostly these, and a file of 40,000 distinct addmm lines spent 11 s here
(benchmarks/bench_many_lines.py, mixed). For those ops this module gives the same shapes and dtype by rule, but only
when every precondition torch would check holds (2-D matrices whose inner sizes agree, shapes that broadcast, one
floating dtype for every tensor, arguments it knows); anything else returns None and the call goes to the meta
kernel, which gives torch's own answer or error. A test compares the rules with the meta kernel over random shapes,
dtypes and arguments (tests/test_aten.py).

No torch here: the rules read shapes and dtype names.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

Shape = tuple[int, ...]
Spec = tuple[Shape, str]
#: the dtypes the rules take: the result of an op on tensors of one of these is that dtype
FLOATS = frozenset({"float32", "float64", "float16", "bfloat16"})
#: elementwise ops of one tensor that keep its shape and dtype (on a floating tensor), by overload
UNARY = frozenset({"relu.default", "sigmoid.default", "tanh.default", "silu.default", "gelu.default"})
#: elementwise ops of two tensors whose result has their broadcast shape (on one floating dtype)
BINARY = frozenset({"add.Tensor", "sub.Tensor", "mul.Tensor", "div.Tensor"})


def broadcast(a: Shape, b: Shape) -> Shape | None:
    """The broadcast shape of `a` and `b`, None when they do not broadcast."""
    out = []
    for x, y in zip(reversed((1,) * (len(b) - len(a)) + a), reversed((1,) * (len(a) - len(b)) + b)):
        if x != y and 1 not in (x, y):
            return None
        out.append(y if x == 1 else x)
    return tuple(reversed(out))


def _addmm(t: list[Spec]) -> Spec | None:
    """addmm(self, mat1, mat2, beta, alpha): [M, N]; self broadcasts to it."""
    if len(t) != 3:
        return None
    (bias, _), (m1, _), (m2, _) = t
    if len(m1) != 2 or len(m2) != 2 or m1[1] != m2[0] or len(bias) > 2:
        return None
    out = (m1[0], m2[1])
    return (out, t[0][1]) if broadcast(bias, out) == out else None


def _mm(t: list[Spec]) -> Spec | None:
    """mm(self, mat2): [n, m] @ [m, p] -> [n, p]."""
    if len(t) != 2:
        return None
    (a, _), (b, _) = t
    if len(a) != 2 or len(b) != 2 or a[1] != b[0]:
        return None
    return (a[0], b[1]), t[0][1]


def _bmm(t: list[Spec]) -> Spec | None:
    """bmm(self, mat2): [b, n, m] @ [b, m, p] -> [b, n, p] (no broadcast of the batch)."""
    if len(t) != 2:
        return None
    (a, _), (b, _) = t
    if len(a) != 3 or len(b) != 3 or a[0] != b[0] or a[2] != b[1]:
        return None
    return (a[0], a[1], b[2]), t[0][1]


def _linear(t: list[Spec]) -> Spec | None:
    """linear(input, weight, bias=None): input[:-1] + [out_features]; a bias of out_features."""
    if len(t) not in (2, 3):
        return None
    (x, _), (w, _) = t[0], t[1]
    if len(w) != 2 or not x or x[-1] != w[1] or (len(t) == 3 and t[2][0] != (w[0],)):
        return None
    return x[:-1] + (w[0],), t[0][1]


def _unary(t: list[Spec]) -> Spec | None:
    return t[0] if len(t) == 1 else None


def _binary(t: list[Spec]) -> Spec | None:
    if len(t) != 2:
        return None
    shape = broadcast(t[0][0], t[1][0])
    return None if shape is None else (shape, t[0][1])


_RULES: dict[str, Callable[[list[Spec]], Spec | None]] = {
    "addmm.default": _addmm, "mm.default": _mm, "bmm.default": _bmm, "linear.default": _linear,
    **dict.fromkeys(UNARY, _unary), **dict.fromkeys(BINARY, _binary),
}
#: the overloads a rule here covers
RULED = frozenset(_RULES)
#: the constant arguments each rule knows to leave the result alone (their values checked in `_constants_ok`)
_CONSTANTS: dict[str, tuple[str, ...]] = {"addmm.default": ("beta", "alpha"), "gelu.default": ("approximate",),
                                           "add.Tensor": ("alpha",), "sub.Tensor": ("alpha",),
                                           "linear.default": ("bias",)}


def _constants_ok(name: str, constants: Mapping[str, object]) -> bool:
    """Only the arguments the rule knows, with values the op takes whatever the shapes (numbers; gelu's two
    approximations; no bias given as a constant)."""
    if set(constants) - set(_CONSTANTS.get(name, ())):
        return False
    for key, value in constants.items():
        if key == "bias":           # linear without a bias: recorded as None, or its default
            if value is not None:
                return False
        elif key == "approximate":
            if value not in ("none", "tanh"):
                return False
        elif isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
    return True


def known_outputs(name: str, tensors: Sequence[Spec], constants: Mapping[str, object]) -> tuple[Spec, ...] | None:
    """The outputs of overload `name` ("addmm.default") on `tensors` ((shape, dtype name) per tensor argument, in
    order) with the non-tensor arguments `constants` (name -> value, defaults left out): None when no rule here
    answers for certain."""
    rule = _RULES.get(name)
    if rule is None or not tensors or not _constants_ok(name, constants):
        return None
    dtypes = {d for _, d in tensors}
    if len(dtypes) != 1 or not dtypes <= FLOATS:
        return None
    out = rule(list(tensors))
    return None if out is None else (out,)


__all__ = ["BINARY", "FLOATS", "RULED", "UNARY", "broadcast", "known_outputs"]
