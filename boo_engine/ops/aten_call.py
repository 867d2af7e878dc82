"""One `aten::` call against torch (imports torch): the overload it binds to, how to call it, what it returns
(found on meta tensors), and its FLOP count. `ops/aten.py` holds the signature; this module, its torch side."""
from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from boo_engine.errors import CommandError
from boo_engine.ops._common import numel
from boo_engine.ops._lazy import torch
from boo_engine.ops.aten_shapes import RULED, known_outputs
from boo_engine.ops.base import DTYPES
from boo_engine.ops.strided import ViewPlan, apply_view

if TYPE_CHECKING:
    import torch


class AtenSignature(Protocol):
    """What this module reads of an aten call's signature (`ops.aten.AtenSignature`, which imports this module):
    named here so that the two do not import each other."""

    @property
    def name(self) -> str: ...
    @property
    def dims(self) -> tuple: ...
    @property
    def types(self) -> tuple[str, ...]: ...
    @property
    def concrete(self) -> tuple[str, ...]: ...
    @property
    def op_name(self) -> str: ...
    def _tensor_args(self) -> list[tuple[int, tuple[int, ...], tuple[int, ...], str]]: ...
    def view_plans(self) -> list[ViewPlan]: ...
    def input_shapes(self) -> list[tuple[int, ...]]: ...
    def input_dtype_names(self) -> list[str]: ...
    def output_shapes(self) -> list[tuple[int, ...]]: ...

#: profiler type names (and torch's own names, for lines written by hand) -> our dtype names
TENSOR_TYPES: dict[str, str] = {
    "float": "float32", "double": "float64", "c10::Half": "float16", "c10::BFloat16": "bfloat16",
    "long int": "int64", "long": "int64", "int": "int32", "short int": "int16", "short": "int16",
    "signed char": "int8", "unsigned char": "uint8", "bool": "bool",
    **{name: name for name in ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8",
                               "uint8")},
    "half": "float16", "Half": "float16", "BFloat16": "bfloat16",
}
#: the non-tensor kinds a trace records
SCALAR, SCALAR_LIST, TENSOR_LIST, NOT_RECORDED = "Scalar", "ScalarList", "TensorList", ""
#: c10::ScalarType codes (a trace records `dtype=torch.float16` as '5')
_SCALAR_TYPE_CODES = {0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16", 6: "float32",
                      7: "float64", 11: "bool", 15: "bfloat16"}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?")
_FLOAT_DTYPES = ("float32", "float64", "float16", "bfloat16")
#: ops IREE's torch input lowers itself, to its own fast forms (matmuls, convolutions, attention): exported as
#: they are. Every other op is exported through torch's default decompositions to core aten ops first, which
#: IREE lowers (e.g. native_layer_norm_backward fails to compile in IREE 3.13 as it is: 'torch.constant.bool').
IREE_NATIVE_OPS = frozenset({
    "mm", "bmm", "addmm", "baddbmm", "matmul", "linear", "conv1d", "conv2d", "conv3d", "convolution",
    "_convolution", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "scaled_dot_product_attention",
    "argmax", "argmin", "layer_norm", "native_layer_norm", "softmax", "_softmax", "log_softmax", "_log_softmax",
})
#: the same for calls with float16 / bfloat16 tensors, less the normalizations: IREE 3.13's own layer norm in 16
#: bits failed BOO's numerics (bf16 error 1.35x torch's, fp16 4.3x) and was slower (298 vs 241 us bf16, 766 vs
#: 234 us fp16, 64x16x256, one Zen 4 thread) than torch's decomposition computed in float32
#: (benchmarks/bench_aten_16bit.py, docs/performance.md)
IREE_NATIVE_OPS_16BIT = IREE_NATIVE_OPS - {"layer_norm", "native_layer_norm"}


def _fail(name: str, message: str) -> CommandError:
    return CommandError(f"aten::{name}: {message}")


# ---- resolution (imports torch) ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Resolution:
    """The overload a call binds to, how to call it, and what it returns (shapes and dtype names)."""

    overload: torch._ops.OpOverload
    overload_name: str
    positional: tuple         # per schema argument: ("t", input index) | ("tl", (indices...)) | ("c", value)
    keywords: tuple           # (name, same encoding) for keyword-only arguments
    outputs: tuple[tuple[tuple[int, ...], str], ...]
    returns_tuple: bool
    note: str = ""

    def call(self, views: Sequence[torch.Tensor]) -> torch.Tensor | tuple[torch.Tensor, ...]:
        def value(enc: tuple) -> object:
            kind, v = enc
            if kind == "t":
                return views[v]
            if kind == "tl":
                return [views[k] for k in v]
            return v

        result = self.overload(*[value(e) for e in self.positional], **{k: value(e) for k, e in self.keywords})
        tensors = _tensors_of(result)
        return tuple(tensors) if self.returns_tuple else tensors[0]


def _tensors_of(result: object) -> list[torch.Tensor]:
    if isinstance(result, (tuple, list)):
        return [t for r in result for t in _tensors_of(r)]
    return [result] if isinstance(result, torch.Tensor) else []


_RESOLVED: dict[AtenSignature, Resolution] = {}   # (a model has a few hundred; a big file's 40,000 were held)
RESOLVED_KEPT = 4096   # remembered at most, then forgotten all at once
_LOCK = threading.Lock()


def resolve(sig: AtenSignature) -> Resolution:
    """The overload `sig` calls (cached per process). CommandError `aten::NAME: ...` when torch has no such op,
    no overload takes the recorded arguments, or the call fails on these shapes."""
    with _LOCK:   # (uncontended: ~50 ns)
        res = _RESOLVED.get(sig)
        if res is None:
            if len(_RESOLVED) >= RESOLVED_KEPT:
                _RESOLVED.clear()
            res = _RESOLVED[sig] = _resolve(sig)
    return res


class _NoMatch(Exception):
    pass


def _resolve(sig: AtenSignature) -> Resolution:
    base, _, wanted = sig.name.partition(".")
    note = ""
    packet = getattr(torch.ops.aten, base, None) if not base.startswith("__") else None
    if base.endswith("_") and not base.endswith("__"):
        functional = getattr(torch.ops.aten, base[:-1], None)
        if functional is not None:
            packet, note = functional, f"in-place aten::{base} measured as aten::{base[:-1]} (a new output)"
    if packet is None or not hasattr(packet, "overloads"):
        raise _fail(sig.name, f"torch {torch.__version__} has no op aten::{base}")
    names = [wanted] if wanted else sorted(packet.overloads(), key=lambda o: (o != "default", o))
    problems: list[str] = []
    for oname in names:
        overload = getattr(packet, oname, None)
        if overload is None:
            raise _fail(sig.name, f"aten::{base} has no overload {oname!r} (it has: {', '.join(packet.overloads())})")
        schema = overload._schema
        if any(a.is_out for a in schema.arguments):
            continue
        try:
            positional, keywords = _bind(sig, schema)
        except _NoMatch as e:
            problems.append(f"{oname}: {e}")
            continue
        try:
            outputs, returns_tuple = _output_specs(sig, overload, positional, keywords)
        except Exception as e:  # noqa: BLE001 - the op refuses these shapes/values: one line, tried in order
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            problems.append(f"{oname}: {first[:200]}")
            continue
        return Resolution(overload, oname, positional, keywords, outputs, returns_tuple, note)
    detail = problems[0] if len(problems) == 1 else "; ".join(problems[:3])
    raise _fail(sig.name, f"no overload takes these {len(sig.types)} arguments ({detail})")


def _bind(sig: AtenSignature, schema: torch._C.FunctionSchema) -> tuple[tuple, tuple]:
    args = list(schema.arguments)
    n = len(sig.types)
    if n > len(args):
        raise _NoMatch(f"takes {len(args)} arguments, the call has {n}")
    positional: list = []
    keywords: list = []
    k = 0   # next kernel input
    for i, arg in enumerate(args):
        ty = str(arg.type)
        if i >= n:
            if not arg.has_default_value():
                raise _NoMatch(f"argument {arg.name!r} has no default and was not recorded")
            break
        typ, conc, dims = sig.types[i], sig.concrete[i], sig.dims[i]
        if typ in DTYPES:
            if _strip_optional(ty) != "Tensor":
                raise _NoMatch(f"argument {i} is a tensor, {arg.name!r} is {ty}")
            enc: tuple = ("t", k)
            k += 1
        elif typ == TENSOR_LIST:
            if "Tensor" not in ty or not ty.startswith(("List", "Optional[List")):
                raise _NoMatch(f"argument {i} is a TensorList, {arg.name!r} is {ty}")
            enc = ("tl", tuple(range(k, k + len(dims))))
            k += len(dims)
        else:
            enc = ("c", _constant(i, typ, conc, arg, ty))
        if arg.kwarg_only:
            if not (enc[0] == "c" and enc[1] is _DEFAULT):
                keywords.append((arg.name, enc))
        elif enc[0] == "c" and enc[1] is _DEFAULT:
            positional.append(("c", arg.default_value))
        else:
            positional.append(enc)
    return tuple(positional), tuple(keywords)


class _Default:
    def __repr__(self) -> str:
        return "<default>"


_DEFAULT = _Default()


def _strip_optional(ty: str) -> str:
    return ty[len("Optional["):-1] if ty.startswith("Optional[") else ty


def _constant(i: int, typ: str, conc: str, arg: torch._C.Argument, ty: str) -> object:
    """The value of a non-tensor argument for schema type `ty`; _DEFAULT when the trace did not record it."""
    if conc == "":
        return _unrecorded(i, arg, ty)
    if conc == "None":
        _check_none(i, arg, ty)
        return None
    base = _strip_optional(ty)
    if base == "Tensor":
        raise _NoMatch(f"argument {i} ({arg.name}) is a tensor but the call recorded {typ or 'no tensor'}")
    value = _literal(conc)
    if base.startswith("List["):
        return _list_constant(i, arg.name, ty, conc, value)
    if base in _NUMBER_LABELS:
        return _number(i, arg.name, _NUMBER_LABELS[base], conc, value)
    if base == "str":
        return conc[1:-1] if len(conc) >= 2 and conc[0] == conc[-1] and conc[0] in "'\"" else conc
    if base == "ScalarType" and isinstance(value, int) and value in _SCALAR_TYPE_CODES:
        return DTYPES[_SCALAR_TYPE_CODES[value]]
    raise _NoMatch(f"argument {i} ({arg.name}) has schema type {ty}, which a kernel cannot take as a constant")


def _unrecorded(i: int, arg: torch._C.Argument, ty: str) -> object:
    """An argument the trace did not record: _DEFAULT when it has a default, else None when it is optional."""
    optional = ty.startswith("Optional[")
    base = _strip_optional(ty)
    if "Tensor" in base and base != "Tensor" and not optional:
        raise _NoMatch(f"argument {i} ({arg.name}) is a tensor list that was not recorded")
    if arg.has_default_value():
        return _DEFAULT
    if optional:
        return None
    raise _NoMatch(f"argument {i} ({arg.name}: {ty}) has no recorded value and no default")


def _check_none(i: int, arg: torch._C.Argument, ty: str) -> None:
    """A recorded None must be taken: by an optional argument or one whose default is None."""
    if ty.startswith("Optional[") or arg.has_default_value() and arg.default_value is None:
        return
    raise _NoMatch(f"argument {i} ({arg.name}: {ty}) cannot be None")


def _list_constant(i: int, name: str, ty: str, conc: str, value: object) -> list:
    """A List[...] argument: the recorded list or tuple, or one number standing for every element."""
    if not isinstance(value, (list, tuple)):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return [value]   # int[2] schema arguments take one int for every dim
        raise _NoMatch(f"argument {i} ({name}: {ty}) expects a list, got {conc!r}")
    return list(value)


#: numeric schema types -> the type as the messages name it
_NUMBER_LABELS = {"int": "int", "SymInt": "int", "float": "float", "bool": "bool", "number": "Scalar"}


def _number(i: int, name: str, label: str, conc: str, value: object) -> int | float:
    """An int, float, bool or Scalar argument (`label`) from its recorded value."""
    if label == "bool":
        if value in (0, 1):   # True / False, or 0 / 1
            return bool(value)
    elif label == "Scalar":
        if isinstance(value, (int, float)):
            return value
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        if label == "float":
            return float(value)
        if isinstance(value, int):
            return value
    raise _NoMatch(f"argument {i} ({name}: {label}) got {conc!r}")


def _literal(text: str) -> object:
    """A recorded concrete value: Python literals, plus `0.` style floats and `True`/`False`/`None`; else the
    text itself."""
    import ast

    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):   # '{[]: 1}': unhashable; deep nests
        try:
            return float(text)
        except ValueError:
            return text


def _known_outputs(sig: AtenSignature, overload: torch._ops.OpOverload, positional: tuple,
                   keywords: tuple) -> tuple[tuple[tuple[int, ...], str], ...] | None:
    """`aten_shapes.known_outputs` for this binding: its tensors' (shape, dtype) in argument order and its
    constants by name; None for a binding it does not cover (a tensor list, a tensor given by keyword)."""
    schema = overload._schema
    name = f"{schema.name.partition('::')[2]}.{schema.overload_name or 'default'}"
    if name not in RULED:     # most overloads: nothing to gather
        return None
    tensors = [(tuple(shape), dtype) for _, shape, _, dtype in sig._tensor_args()]
    given: list[int] = []
    constants: dict[str, object] = {}
    for arg, (kind, value) in zip(schema.arguments, positional):
        if kind == "t":
            given.append(value)
        elif kind == "c":
            constants[arg.name] = value
        else:
            return None
    for key, (kind, value) in keywords:
        if kind != "c":
            return None
        constants[key] = value
    return known_outputs(name, [tensors[k] for k in given], constants)


def _output_specs(sig: AtenSignature, overload: torch._ops.OpOverload, positional: tuple,
                  keywords: tuple) -> tuple[tuple[tuple[tuple[int, ...], str], ...], bool]:
    """The outputs' shapes and dtype names, and whether it returns several: by rule for the few common ops whose
    meta kernel is slow Python (`aten_shapes`), else by running the call on meta tensors (shapes and dtypes, no
    data: 15 us to 1 ms), or fake ones for an op with no meta kernel (a fresh FakeTensorMode costs ~8 ms)."""
    known = _known_outputs(sig, overload, positional, keywords)
    if known is not None:
        return known, False
    res = Resolution(overload, "", positional, keywords, (), True)

    def run() -> torch.Tensor | tuple[torch.Tensor, ...]:
        bufs = [torch.empty(s, dtype=DTYPES[d], device="meta")
                for s, d in zip(sig.input_shapes(), sig.input_dtype_names())]
        return res.call([apply_view(p, b) for p, b in zip(sig.view_plans(), bufs)])

    try:
        outs = run()
    except NotImplementedError:
        from torch._subclasses.fake_tensor import FakeTensorMode

        with FakeTensorMode():
            bufs = [torch.empty(s, dtype=DTYPES[d]) for s, d in zip(sig.input_shapes(), sig.input_dtype_names())]
            outs = res.call([apply_view(p, b) for p, b in zip(sig.view_plans(), bufs)])
    outs = outs if isinstance(outs, tuple) else (outs,)
    if not outs:
        raise ValueError(f"aten::{sig.name} returns no tensor: nothing to measure")
    specs = []
    for t in outs:
        name = str(t.dtype).replace("torch.", "")
        if name not in DTYPES:
            raise ValueError(f"it returns a {name} tensor, which a kernel here cannot return")
        specs.append((tuple(int(d) for d in t.shape), name))
    return tuple(specs), len(specs) > 1


# ---- cost ----------------------------------------------------------------------------------------------------
def aten_flops(sig: AtenSignature) -> int:
    op = sig.op_name.rstrip("_")
    shapes = [s for _, s, _, _ in sig._tensor_args()]
    kw = dict(zip(range(len(sig.concrete)), sig.concrete))

    def out_numel() -> int:
        return numel(sig.output_shapes()[0])

    try:
        if op in ("mm", "bmm", "matmul"):
            return 2 * out_numel() * shapes[0][-1]
        if op in ("addmm", "baddbmm", "addbmm"):
            return 2 * out_numel() * shapes[1][-1] + 2 * out_numel()
        if op == "linear":
            return 2 * out_numel() * shapes[0][-1] + (out_numel() if len(shapes) > 2 else 0)
        if op in ("conv1d", "conv2d", "conv3d", "convolution", "_convolution", "conv_transpose1d",
                  "conv_transpose2d", "conv_transpose3d"):
            x, w = shapes[0], shapes[1]
            per = numel(w) // w[0]
            transposed = op.startswith("conv_transpose") or (op in ("convolution", "_convolution")
                                                              and kw.get(6) == "True")
            macs = numel(x) * per if transposed else out_numel() * per
            bias = out_numel() if len(shapes) > 2 else 0
            return 2 * macs + bias
        if op in ("scaled_dot_product_attention", "_scaled_dot_product_flash_attention",
                  "_scaled_dot_product_efficient_attention"):
            q, k, v = shapes[0], shapes[1], shapes[2]
            heads = numel(q) // (q[-2] * q[-1])
            f = 2 * heads * q[-2] * k[-2] * (q[-1] + v[-1])
            causal = len(sig.concrete) > 5 and sig.concrete[5] == "True"
            return f // 2 if causal else f
        if op in ("layer_norm", "native_layer_norm", "group_norm", "native_group_norm", "batch_norm",
                  "native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_no_training"):
            return numel(shapes[0]) * (8 if len(shapes) > 1 else 6)
        if op in ("native_layer_norm_backward", "native_batch_norm_backward", "native_group_norm_backward"):
            return numel(shapes[0]) * 9
    except (IndexError, ZeroDivisionError):
        return 0
    return 0
