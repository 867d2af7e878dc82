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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from boo_engine.ops._common import SHORT_DTYPES, label_of, numel, shape_str
from boo_engine.ops._lazy import torch
from boo_engine.ops.aten_call import (
    _FLOAT_DTYPES,
    _NAME,
    _RESOLVED,
    IREE_NATIVE_OPS,
    IREE_NATIVE_OPS_16BIT,
    NOT_RECORDED,
    SCALAR,
    SCALAR_LIST,
    TENSOR_LIST,
    TENSOR_TYPES,
    _fail,
    aten_flops,
    resolve,
)
from boo_engine.ops.base import DEFAULT_FORMULATION, DTYPES, ELEMENT_BYTES, OpSignature
from boo_engine.ops.strided import ViewPlan, apply_view, view_plan

if TYPE_CHECKING:
    import torch

#: the formulation computing a 16-bit call in its own dtype throughout (the default widens it to float32)
IN_DTYPE = "in_dtype"
_HALF = ("float16", "bfloat16")


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
        first = self._check_arguments()
        if first is None and TENSOR_LIST not in self.types:
            raise _fail(name, "no tensor argument: nothing for a kernel to compute on")
        if not self.dtype_name:
            # a TensorList's elements have no recorded dtype: they take the call's first tensor dtype
            object.__setattr__(self, "dtype_name", first or "float32")
        elif self.dtype_name not in DTYPES:
            raise _fail(name, f"unsupported dtype {self.dtype_name!r}")

    def _check_arguments(self) -> str | None:
        """Check every argument in order; returns the call's dtype (None when it has no tensor)."""
        first = None
        for i, (dims, typ, strides) in enumerate(zip(self.dims, self.types, self.strides)):
            if typ in DTYPES:
                _check_shape(self.name, i, dims, strides)
                # the call's dtype: its first floating-point tensor's (a where's bool condition is not it)
                if first is None or (first not in _FLOAT_DTYPES and typ in _FLOAT_DTYPES):
                    first = typ
            else:
                _check_non_tensor(self.name, i, dims, typ, strides)
        return first

    # ---- identity -------------------------------------------------------------------------------------
    @property
    def op_name(self) -> str:
        return self.name.split(".")[0]

    @property
    def decompose_for_export(self) -> bool:  # type: ignore[override]
        native = IREE_NATIVE_OPS_16BIT if any(d in _HALF for d in self.input_dtype_names()) else IREE_NATIVE_OPS
        return self.op_name.rstrip("_") not in native

    @property
    def computes_in_float32(self) -> bool:
        """Whether the default formulation computes in float32: a call with float16/bfloat16 tensors of an op IREE
        does not lower itself (see `formulated`)."""
        return self.decompose_for_export and any(d in _HALF for d in self.input_dtype_names())

    # ---- formulations ---------------------------------------------------------------------------------
    def formulations(self) -> tuple[str, ...]:
        return (DEFAULT_FORMULATION, IN_DTYPE) if self.computes_in_float32 else (DEFAULT_FORMULATION,)

    def formulated(self, formulation: str, *args: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        """A 16-bit call of an op IREE does not lower itself is computed in float32 by default: its float16 /
        bfloat16 tensors widened, the op (and so torch's decomposition of it) run in float32, each 16-bit result
        rounded once, as torch's own CPU and GPU kernels compute 16-bit ops (in their `opmath` type). Written in
        the 16-bit dtype throughout (IN_DTYPE), IREE rounds every intermediate and accumulates reductions in 16
        bits: a bfloat16 sum of 32 values had 4x torch's error, a group norm 1.5x (docs/performance.md)."""
        problem = self.formulation_problem(formulation)
        if problem is not None:
            raise ValueError(problem)
        if formulation == IN_DTYPE or not self.computes_in_float32:
            return self.reference(*args)
        wide = [a.float() if a.dtype in (torch.float16, torch.bfloat16) else a for a in args]
        out = self.reference(*wide)
        outs = out if isinstance(out, tuple) else (out,)
        back = tuple(o.to(DTYPES[d]) if d in _HALF else o for o, d in zip(outs, self.output_dtype_names()))
        return back if isinstance(out, tuple) else back[0]

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

    def eager(self, *args: torch.Tensor) -> Callable[[], torch.Tensor | tuple[torch.Tensor, ...]]:
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


def _check_non_tensor(name: str, i: int, dims: tuple, typ: str, strides: tuple) -> None:
    """Check argument `i`, one that is not a tensor: a TensorList's shapes, or a non-tensor with no dims."""
    if typ == TENSOR_LIST:
        if len(dims) != len(strides) or not dims:
            raise _fail(name, f"argument {i} (TensorList) has {len(dims)} shapes and {len(strides)} strides")
        for shape, st in zip(dims, strides):
            _check_shape(name, i, shape, st)
    elif typ not in (SCALAR, SCALAR_LIST, NOT_RECORDED):
        raise _fail(name, f"argument {i} has type {typ!r}, which cannot be built")
    elif dims:
        raise _fail(name, f"argument {i} is a {typ or 'non-tensor'} but has dims {list(dims)}")


def _check_shape(name: str, i: int, dims: Sequence[int], strides: Sequence[int]) -> None:
    if len(dims) != len(strides):
        raise _fail(name, f"argument {i} has {len(dims)} dims but {len(strides)} strides")
    for d in dims:
        if d < 0:
            raise _fail(name, f"argument {i} has a dimension of size {d} (a size is 0 or more)")
        if d > 2**31 - 1:
            raise _fail(name, f"argument {i} has a dimension of size {d}, too large")
    for s in strides:
        if s < 0:
            raise _fail(name, f"argument {i} has a negative stride {s}")


def _jsonable(x: Any) -> Any:
    return [_jsonable(v) for v in x] if isinstance(x, (tuple, list)) else x



__all__ = ["IN_DTYPE", "IREE_NATIVE_OPS", "NOT_RECORDED", "SCALAR", "SCALAR_LIST", "TENSOR_LIST", "TENSOR_TYPES",
           "AtenSignature", "ViewPlan", "apply_view", "resolve", "view_plan"]
