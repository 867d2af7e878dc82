"""Any aten op, as a torch-profiler trace records one call: BOO's `aten::NAME "<dims>" "<types>" "<strides>"
"<concrete>"` lines.

The four lists have one entry per argument of the call, in schema order (what `torch.profiler` writes with
`record_shapes=True`): the tensor's shape (`[]` for a non-tensor), its element type (`float`, `double`,
`c10::Half`, `c10::BFloat16`, `long int`, `int`, `bool`, ...; `Scalar`, `ScalarList`, `TensorList`, or `''` for
an argument the profiler did not record, such as an absent optional tensor or a string), its strides, and the
concrete value of a non-tensor (`'1'`, `'[2, 2]'`, `'True'`, `'None'`, `'0.0'`; `''` when not recorded).

What becomes the kernel:
- every tensor argument is a kernel input. A tensor whose strides are not the contiguous ones for its shape is
  rebuilt as the profiled call saw it: the kernel takes a dense buffer laid out like the tensor's storage and
  makes the view inside (permute, slice, broadcast; `as_strided` when nothing simpler matches), so a transposed
  or sliced operand stays strided in the compiled kernel and eager torch sees the same view. `input_shapes()`
  are those buffers' shapes.
- every non-tensor argument is a constant baked into the kernel; an unrecorded one takes the schema's default
  (a conv2d without bias gets `bias=None`; gelu's unrecorded `approximate` gets `'none'`: a trace does not keep
  strings, so write one in the concrete list, e.g. `'tanh'`, to choose it).
- the overload is the first of the op's overloads (default first, `out=` variants never) whose schema takes the
  recorded arguments; an in-place op (`add_`) is measured as its out-of-place form (`add`): the kernel returns a
  new tensor either way.

Parsing, naming and labels never import torch (the dashboard labels rows on its own thread); `check()` resolves
the overload (importing torch) and is what makes an unknown op a one-line CommandError at parse time.
"""
from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from boo_engine.errors import CommandError
from boo_engine.ops._common import SHORT_DTYPES, label_of, numel, shape_str
from boo_engine.ops._lazy import torch
from boo_engine.ops.base import DTYPES, ELEMENT_BYTES, OpSignature

if TYPE_CHECKING:
    import torch  # noqa: F811

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


def _fail(name: str, message: str) -> CommandError:
    return CommandError(f"aten::{name}: {message}")


# ---- strided tensors as views of dense buffers ---------------------------------------------------------------
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


# ---- the signature -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AtenSignature(OpSignature):
    """One call of an aten op. Fields are the trace's four lists, normalized: `types` holds our dtype names for
    tensors (float32, float64, float16, bfloat16, int64, int32, ..., bool) and Scalar / ScalarList / TensorList /
    '' otherwise; `dims` and `strides` hold a shape per argument (a tuple of shapes for a TensorList)."""

    op: ClassVar[str] = "aten"

    name: str
    dims: tuple
    types: tuple[str, ...]
    strides: tuple
    concrete: tuple[str, ...]
    dtype_name: str = ""

    def __post_init__(self) -> None:
        name = self.name
        if not _NAME.fullmatch(name):
            raise _fail(name, "not an op name (expected aten::NAME or aten::NAME.OVERLOAD)")
        n = len(self.types)
        if not (len(self.dims) == len(self.strides) == len(self.concrete) == n):
            raise _fail(name, f"the four lists differ in length (Input Dims {len(self.dims)}, Input type {n}, "
                              f"Input Strides {len(self.strides)}, Concrete Inputs {len(self.concrete)})")
        first = None
        for i, (dims, typ, strides) in enumerate(zip(self.dims, self.types, self.strides)):
            if typ in DTYPES:
                _check_shape(name, i, dims, strides)
                # the call's dtype: its first floating-point tensor's (a where's bool condition is not it)
                if first is None or (first not in _FLOAT_DTYPES and typ in _FLOAT_DTYPES):
                    first = typ
            elif typ == TENSOR_LIST:
                if len(dims) != len(strides) or not dims:
                    raise _fail(name, f"argument {i} (TensorList) has {len(dims)} shapes and {len(strides)} strides")
                for shape, st in zip(dims, strides):
                    _check_shape(name, i, shape, st)
            elif typ not in (SCALAR, SCALAR_LIST, NOT_RECORDED):
                raise _fail(name, f"argument {i} has type {typ!r}, which cannot be built")
            elif dims:
                raise _fail(name, f"argument {i} is a {typ or 'non-tensor'} but has dims {list(dims)}")
        if first is None and TENSOR_LIST not in self.types:
            raise _fail(name, "no tensor argument: nothing for a kernel to compute on")
        if not self.dtype_name:
            # a TensorList's elements have no recorded dtype: they take the call's first tensor dtype
            object.__setattr__(self, "dtype_name", first or "float32")
        elif self.dtype_name not in DTYPES:
            raise _fail(name, f"unsupported dtype {self.dtype_name!r}")

    # ---- identity -------------------------------------------------------------------------------------
    @property
    def op_name(self) -> str:
        return self.name.split(".")[0]

    @property
    def decompose_for_export(self) -> bool:  # type: ignore[override]
        return self.op_name.rstrip("_") not in IREE_NATIVE_OPS

    def _tensor_args(self) -> list[tuple[int, tuple[int, ...], tuple[int, ...], str]]:
        """(argument index, shape, strides, dtype) of every kernel input, TensorLists flattened."""
        out = []
        for i, (dims, typ, strides) in enumerate(zip(self.dims, self.types, self.strides)):
            if typ in DTYPES:
                out.append((i, tuple(dims), tuple(strides), typ))
            elif typ == TENSOR_LIST:
                out += [(i, tuple(s), tuple(st), self.dtype_name) for s, st in zip(dims, strides)]
        return out

    @property
    def canonical(self) -> str:
        """The call in one deterministic line (what the kernel name's digest is taken over)."""
        return repr((self.name, self.dims, self.types, self.strides, self.concrete, self.dtype_name))

    @property
    def func_name(self) -> str:
        """`aten_mm_bfloat16_3840x4352_4352x3840_1a2b3c4d`: op, dtype, tensor shapes (cut at 60 characters)
        and a digest of the whole call, so calls differing only in strides or constants stay distinct."""
        digest = hashlib.sha256(self.canonical.encode()).hexdigest()[:8]
        shapes = "_".join(shape_str(s) or "s" for _, s, _, _ in self._tensor_args())[:60].rstrip("_x")
        op = re.sub(r"[^A-Za-z0-9_]", "_", self.name)
        return "_".join(p for p in ("aten", op, self.dtype_name, shapes, digest) if p)

    @property
    def mode(self) -> str:
        return "backward" if "backward" in self.op_name else "forward"

    @property
    def shape_label(self) -> str:
        """`mm 3840x4352ᵗ 4352x3840 bf16`: op, tensor shapes (`ᵗ` marks a strided view), constants given."""
        parts = []
        for _, s, st, _ in self._tensor_args():
            mark = "" if view_plan(s, st).kind == "dense" else "ᵗ"
            parts.append((shape_str(s) or "scalar") + mark)
        consts = [c for c, t in zip(self.concrete, self.types) if t in (SCALAR, SCALAR_LIST, NOT_RECORDED) and c]
        return label_of(self.op_name, " ".join(parts), " ".join(consts)[:40],
                        SHORT_DTYPES.get(self.dtype_name, self.dtype_name))

    # ---- arguments ------------------------------------------------------------------------------------
    def view_plans(self) -> list[ViewPlan]:
        return [view_plan(s, st) for _, s, st, _ in self._tensor_args()]

    def input_shapes(self) -> list[tuple[int, ...]]:
        return [p.base for p in self.view_plans()]

    def input_dtype_names(self) -> list[str]:
        return [dt for _, _, _, dt in self._tensor_args()]

    def output_shapes(self) -> list[tuple[int, ...]]:
        return [s for s, _ in resolve(self).outputs]

    def output_dtype_names(self) -> list[str]:
        return [d for _, d in resolve(self).outputs]

    @property
    def returns_tuple(self) -> bool:
        return resolve(self).returns_tuple

    def check(self) -> None:
        resolve(self)

    def get_sample_args(self, seed: int = 0, *, device: torch.device | str | None = None,
                        splat_value: float | None = None) -> tuple[torch.Tensor, ...]:
        """Floats standard-normal; integers in [0, smallest dim of the call) so they are valid indices for
        embedding / gather / index_select along any dim; bools random."""
        gen = torch.Generator().manual_seed(seed)
        sizes = [d for _, s, _, _ in self._tensor_args() for d in s if d > 0]
        high = max(1, min(sizes, default=1))
        out = []
        for shape, dt_name in zip(self.input_shapes(), self.input_dtype_names()):
            dt = DTYPES[dt_name]
            if splat_value is not None:
                t = torch.full(shape, splat_value if dt_name in _FLOAT_DTYPES else int(splat_value), dtype=dt)
            elif dt_name in _FLOAT_DTYPES:
                t = torch.randn(shape, generator=gen, dtype=torch.float32).to(dt)
            elif dt_name == "bool":
                t = torch.randint(0, 2, shape, generator=gen).bool()
            else:
                t = torch.randint(0, high, shape, generator=gen).to(dt)
            out.append(t.to(device) if device is not None else t)
        return tuple(out)

    def reference(self, *args: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        res = resolve(self)
        views = [apply_view(p, a) for p, a in zip(self.view_plans(), args)]
        return res.call(views)

    def eager(self, *args: torch.Tensor) -> Any:
        """The views are made once; the timed call is the op alone (a view costs eager torch ~2 us a tensor)."""
        res = resolve(self)
        views = [apply_view(p, a) for p, a in zip(self.view_plans(), args)]
        return lambda: res.call(views)

    # ---- cost model -----------------------------------------------------------------------------------
    @property
    def flops(self) -> int:
        """Known formulas (a multiply-add counts 2), 0 for other ops (their rate is bytes only):
        mm/bmm/matmul/addmm/baddbmm/addbmm/linear 2*M*N*K per batch (+ the add), conv*/convolution 2 * output
        elements * (input channels per group x filter size) (+ bias), scaled_dot_product_attention the two
        matmuls (2*L*S*(E+Ev) per batch-head; halved when causal), layer/group/batch norm 6-8 per element
        forward and ~9 backward (as the layernorm op's estimate)."""
        return aten_flops(self)

    @property
    def bytes(self) -> int:
        """Every element the call reads once (a broadcast operand counted once, a view's padding not at all)
        plus every output written once."""
        ins = sum(p.distinct_elements * ELEMENT_BYTES[dt] for p, dt in zip(self.view_plans(),
                                                                              self.input_dtype_names()))
        return ins + sum(numel(s) * ELEMENT_BYTES[d] for s, d in resolve(self).outputs)

    def describe(self) -> dict[str, Any]:
        """Plain data; output shapes only once this process resolved the op (labels never import torch)."""
        facts: dict[str, Any] = {
            "op": self.op, "dtype": self.dtype_name, "mode": self.mode, "aten": self.name,
            "input_shapes": [list(s) for s in self.input_shapes()],
            "arg_dims": _jsonable(self.dims), "arg_types": list(self.types), "arg_strides": _jsonable(self.strides),
            "concrete_inputs": list(self.concrete),
        }
        res = _RESOLVED.get(self)
        if res is not None:
            facts["overload"] = res.overload_name
            facts["output_shapes"] = [list(s) for s, _ in res.outputs]
            facts["output_dtypes"] = [d for _, d in res.outputs]
            if res.note:
                facts["note"] = res.note
        return facts

    def required_compile_flags(self) -> list[str]:
        """IREE demotes f64 to f32 at its input by default, which would change the kernel's argument types."""
        names = set(self.input_dtype_names())
        if "float64" in names or (self in _RESOLVED and any(d == "float64" for _, d in _RESOLVED[self].outputs)):
            return ["--iree-input-demote-f64-to-f32=false"]
        return []


def _check_shape(name: str, i: int, dims: Any, strides: Any) -> None:
    if len(dims) != len(strides):
        raise _fail(name, f"argument {i} has {len(dims)} dims but {len(strides)} strides")
    for d in dims:
        if d < 1:
            raise _fail(name, f"argument {i} has a dimension of size {d} (every size must be at least 1)")
        if d > 2**31 - 1:
            raise _fail(name, f"argument {i} has a dimension of size {d}, too large")
    for s in strides:
        if s < 0:
            raise _fail(name, f"argument {i} has a negative stride {s}")


def _jsonable(x: Any) -> Any:
    return [_jsonable(v) for v in x] if isinstance(x, (tuple, list)) else x


# ---- resolution (imports torch) ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Resolution:
    """The overload a call binds to, how to call it, and what it returns (shapes and dtype names)."""

    overload: Any
    overload_name: str
    positional: tuple         # per schema argument: ("t", input index) | ("tl", (indices...)) | ("c", value)
    keywords: tuple           # (name, same encoding) for keyword-only arguments
    outputs: tuple[tuple[tuple[int, ...], str], ...]
    returns_tuple: bool
    note: str = ""

    def call(self, views: Sequence[torch.Tensor]) -> torch.Tensor | tuple[torch.Tensor, ...]:
        def value(enc: tuple) -> Any:
            kind, v = enc
            if kind == "t":
                return views[v]
            if kind == "tl":
                return [views[k] for k in v]
            return v

        result = self.overload(*[value(e) for e in self.positional], **{k: value(e) for k, e in self.keywords})
        tensors = _tensors_of(result)
        return tuple(tensors) if self.returns_tuple else tensors[0]


def _tensors_of(result: Any) -> list:
    if isinstance(result, (tuple, list)):
        return [t for r in result for t in _tensors_of(r)]
    return [result] if isinstance(result, torch.Tensor) else []


_RESOLVED: dict[AtenSignature, Resolution] = {}
_LOCK = threading.Lock()


def resolve(sig: AtenSignature) -> Resolution:
    """The overload `sig` calls (cached per process). CommandError `aten::NAME: ...` when torch has no such op,
    no overload takes the recorded arguments, or the call fails on these shapes."""
    res = _RESOLVED.get(sig)
    if res is None:
        with _LOCK:
            res = _RESOLVED.get(sig)
            if res is None:
                res = _resolve(sig)
                _RESOLVED[sig] = res
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


def _bind(sig: AtenSignature, schema: Any) -> tuple[tuple, tuple]:
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


def _constant(i: int, typ: str, conc: str, arg: Any, ty: str) -> Any:
    """The value of a non-tensor argument for schema type `ty`; _DEFAULT when the trace did not record it."""
    optional = ty.startswith("Optional[")
    base = _strip_optional(ty)
    if conc == "":
        if "Tensor" in base and base != "Tensor" and not optional:
            raise _NoMatch(f"argument {i} ({arg.name}) is a tensor list that was not recorded")
        if arg.has_default_value():
            return _DEFAULT
        if optional:
            return None
        raise _NoMatch(f"argument {i} ({arg.name}: {ty}) has no recorded value and no default")
    if conc == "None":
        if optional or arg.has_default_value() and arg.default_value is None:
            return None
        raise _NoMatch(f"argument {i} ({arg.name}: {ty}) cannot be None")
    if base == "Tensor":
        raise _NoMatch(f"argument {i} ({arg.name}) is a tensor but the call recorded {typ or 'no tensor'}")
    try:
        value = _literal(conc)
    except ValueError:
        value = conc
    if base.startswith("List["):
        if not isinstance(value, (list, tuple)):
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return [value]   # int[2] schema arguments take one int for every dim
            raise _NoMatch(f"argument {i} ({arg.name}: {ty}) expects a list, got {conc!r}")
        return list(value)
    if base in ("int", "SymInt"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise _NoMatch(f"argument {i} ({arg.name}: int) got {conc!r}")
        return value
    if base == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _NoMatch(f"argument {i} ({arg.name}: float) got {conc!r}")
        return float(value)
    if base == "bool":
        if isinstance(value, bool):
            return value
        if value in (0, 1):
            return bool(value)
        raise _NoMatch(f"argument {i} ({arg.name}: bool) got {conc!r}")
    if base == "number":
        if not isinstance(value, (int, float)):
            raise _NoMatch(f"argument {i} ({arg.name}: Scalar) got {conc!r}")
        return value
    if base == "str":
        return conc[1:-1] if len(conc) >= 2 and conc[0] == conc[-1] and conc[0] in "'\"" else conc
    if base == "ScalarType" and isinstance(value, int) and value in _SCALAR_TYPE_CODES:
        return DTYPES[_SCALAR_TYPE_CODES[value]]
    raise _NoMatch(f"argument {i} ({arg.name}) has schema type {ty}, which a kernel cannot take as a constant")


def _literal(text: str) -> Any:
    """A recorded concrete value: Python literals, plus `0.` style floats and `True`/`False`/`None`."""
    import ast

    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        try:
            return float(text)
        except ValueError:
            raise ValueError(text) from None


def _output_specs(sig: AtenSignature, overload: Any, positional: tuple,
                  keywords: tuple) -> tuple[tuple[tuple[tuple[int, ...], str], ...], bool]:
    """Run the call on meta tensors (shapes and dtypes, no data: ~1 ms), or fake ones for an op with no meta
    kernel (a fresh FakeTensorMode costs ~8 ms): the outputs' shapes and dtype names, and whether it returns
    several."""
    res = Resolution(overload, "", positional, keywords, (), True)

    def run() -> Any:
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
