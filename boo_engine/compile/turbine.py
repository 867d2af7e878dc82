"""BOO's own export of a kernel, for the `boo` column: iree-turbine's BOO op modules, exported the way BOO's
IREE launchable does (`iree.turbine.kernel.boo.driver.launch.get_launchable`, iree-boo-driver's `iree_boo_legacy`
backend: `get_nn_module(use_custom=True)`, `force_single_dispatch` as the signature says, turbine's
`runtime.get_module_asm`), so the MLIR is what turbine emits for the same kernel, already at IREE's util/hal level.

What this module owns:
- `turbine_version()`: the installed iree-turbine, read from its package metadata (no import); part of the boo
  build's cache key, like the MLIR itself.
- `boo_problem(sig, formulation)`: why the boo column cannot use turbine's export for a kernel (None when it can):
  an op BOO does not have (batch norm), a feature its signature cannot say (a fused activation, a transposed
  conv, an input permutation, a strided aten call), a formulation of ours, or iree-turbine missing. The kernel
  is then our export compiled with BOO's flags, said once per reason by the session.
- `export_boo(sig)`: turbine's MLIR for the kernel, with its entry point named `main` (our runtime's name for
  every kernel: the only difference from turbine's text, whose function takes BOO's kernel name), checked
  against our signature's call convention (every argument and result, in order, shape and element type) before
  anything is measured. A mismatch or a failed turbine export is a `NotBoo` naming why (the caller falls back).
- `shim_mlir_bindings()`: IREE 3.13's MLIR Python bindings dropped the static `T.isinstance(value)` methods of
  their type, attribute and value classes, which turbine 3.9 calls (`RankedTensorType.isinstance(t)`,
  `OpResult.isinstance(v)`, ...). The shim adds them back where missing, additively (nothing that exists is
  replaced), once per process, before turbine is imported: only in the compile workers that export with it.

Signatures are mapped field by field (not by re-parsing the command: our layer norm's `--mode` follows MIOpen,
where `--mode 1` has weight and bias; turbine's parser reads `--mode 0` as "elementwise affine" with both): the
boo column is BOO's module for the SAME function as our signature, so its numerics are judged like any kernel.
For convs and gemms the mapped signature's `func_name` must equal ours (BOO's naming): a cheap proof the mapping
kept every field.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .. import locations
from ..ops.base import DEFAULT_FORMULATION, OpSignature

if TYPE_CHECKING:
    import torch

#: the distribution that holds BOO
TURBINE_DIST = "iree-turbine"
#: our exported entry point (compile/export.py FUNC_NAME; the runtime calls it)
ENTRY = "main"
#: aten ops BOO's registry has (iree.turbine.kernel.boo.op_exports.registry)
BOO_ATEN_OPS = ("mm", "bmm", "addmm")
#: our dtype names -> turbine's aten trace type names (the ones its AtenSignature builds)
_ATEN_TYPES = {"float32": "float", "bfloat16": "c10::BFloat16"}
#: our dtype names -> MLIR element types (the call-convention check)
_ELEMENT = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64", "int64": "i64",
            "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "ui8", "bool": "i1"}


class NotBoo(Exception):
    """BOO's export cannot build this kernel; the message (one line) says why."""


def turbine_version() -> str | None:
    """The iree-turbine the boo build uses, or None when there is none (read without importing it): the one
    scripts/setup.sh installed in `locations.turbine_dir()`, else one importable in this environment."""
    private = _private_dist()
    if private is not None:
        return private.version
    try:
        if importlib.util.find_spec("iree.turbine") is None:
            return None
        return importlib.metadata.version(TURBINE_DIST)
    except (ImportError, ValueError):   # no such distribution, or a module entry that hides it
        return None


def _private_dist() -> importlib.metadata.Distribution | None:
    """iree-turbine as setup.sh installs it: in its own folder, off sys.path (see locations.turbine_dir)."""
    folder = locations.turbine_dir()
    if not (folder / "iree" / "turbine").is_dir():
        return None
    return next(iter(importlib.metadata.distributions(name=TURBINE_DIST, path=[str(folder)])), None)


def _importable() -> None:
    """Put the private iree-turbine on this process's import path (a compile worker about to export with it)."""
    if _private_dist() is not None and str(locations.turbine_dir()) not in sys.path:
        sys.path.append(str(locations.turbine_dir()))


def boo_problem(sig: OpSignature, formulation: str = DEFAULT_FORMULATION) -> str | None:
    """Why the boo column builds `sig` from our export instead of turbine's (one line), or None when turbine's
    export applies. Never imports torch or turbine."""
    if formulation != DEFAULT_FORMULATION:
        return f"formulation {formulation!r} is ours (BOO writes each op one way)"
    problem = _unsupported(sig)
    if problem is not None:
        return problem
    if turbine_version() is None:
        return f"{TURBINE_DIST} is not installed"
    return None


def _unsupported(sig: OpSignature) -> str | None:
    """Why no BOO signature says `sig` (one line), or None when one does."""
    check = _PROBLEMS.get(sig.op)
    if check is None:
        return f"{sig.op} is not an op BOO has"
    return check(sig)


def _conv_problem(sig: OpSignature) -> str | None:
    """A conv feature BOO's conv signature cannot say."""
    if getattr(sig, "transposed", False):
        return "BOO's conv signature has no transposed convolution"
    if getattr(sig, "activation", ""):
        return "BOO's conv signature has no fused activation"
    return None


def _layernorm_problem(sig: OpSignature) -> str | None:
    """A layer norm feature BOO's signature cannot say."""
    if getattr(sig, "input_permutation", None) is not None:
        return "the layer norm's --input-permutation is not mapped to BOO's signature"
    return None


def _aten_problem(sig: OpSignature) -> str | None:
    """An aten op BOO's registry lacks, or the first argument its aten signature cannot take."""
    name = str(getattr(sig, "name", ""))
    if name not in BOO_ATEN_OPS:
        return f"aten::{name} is not an op BOO's registry has ({', '.join(BOO_ATEN_OPS)})"
    for typ, dims, strides in zip(sig.types, sig.dims, sig.strides):  # type: ignore[attr-defined]
        if typ in _ELEMENT:
            if typ not in _ATEN_TYPES:
                return f"BOO's aten signature takes no {typ} tensors"
            if tuple(strides) != _contiguous(tuple(dims)):
                return "BOO's aten signature makes strided operands another way than ours"
        elif typ not in ("Scalar", ""):
            return f"BOO's aten signature takes no {typ} arguments"
    return None


#: the ops BOO has -> what keeps a signature of that op from BOO's
_PROBLEMS: dict[str, Callable[[OpSignature], str | None]] = {
    "conv": _conv_problem, "layernorm": _layernorm_problem, "aten": _aten_problem,
    "gemm": lambda sig: None,   # BOO's gemm signature says every gemm
}


def _contiguous(shape: tuple[int, ...]) -> tuple[int, ...]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return tuple(reversed(out))


# ---- the shim ---------------------------------------------------------------------------------------------

_SHIMMED: list[str] | None = None


def shim_mlir_bindings() -> list[str]:
    """Give every type, attribute and value class of `iree.compiler.ir` that lacks it a static
    `isinstance(value)`, as the bindings turbine 3.9 was written for had: True when `value` is one (an instance,
    or castable to the class, which is what the old method asked). Additive and idempotent; returns the classes
    it added the method to (once per process)."""
    global _SHIMMED
    if _SHIMMED is not None:
        return _SHIMMED
    _importable()
    from iree.compiler import ir

    families = tuple(c for c in (getattr(ir, "Type", None), getattr(ir, "Attribute", None),
                                 getattr(ir, "Value", None)) if isinstance(c, type))
    added: list[str] = []
    for name in sorted(dir(ir)):
        cls = getattr(ir, name, None)
        if not (isinstance(cls, type) and issubclass(cls, families)) or hasattr(cls, "isinstance"):
            continue
        try:
            cls.isinstance = staticmethod(_isinstance_of(cls))  # type: ignore[attr-defined]
        except (AttributeError, TypeError):   # a class that takes no new attributes: turbine does not call it
            continue
        added.append(name)
    _SHIMMED = added
    return added


def _isinstance_of(cls: type) -> Callable[[object], bool]:
    def check(value: object) -> bool:
        if isinstance(value, cls):
            return True
        try:   # the old bindings' question: can `value` be cast to this class (a generic Type that is one)?
            cls(value)
        except Exception:  # noqa: BLE001 - any refusal means "not one"
            return False
        return True
    return check


# ---- the export -------------------------------------------------------------------------------------------

def turbine_signature(sig: OpSignature) -> Any:
    """Turbine's signature object for our `sig` (NotBoo when BOO has no such kernel)."""
    problem = _unsupported(sig)
    if problem is not None:
        raise NotBoo(problem)
    import torch

    dtype = getattr(torch, sig.dtype_name)
    if sig.op == "conv":
        from iree.turbine.kernel.boo.op_exports.conv import ConvSignature, Mode

        s: Any = sig
        kwargs: dict[str, Any] = dict(
            input_shape=list(s.input_shape), kernel_shape=list(s.filter_shape), input_layout=s.in_layout,
            kernel_layout=s.fil_layout, output_layout=s.out_layout, bias=bool(s.bias), dtype=dtype,
            stride=list(s.stride), padding=list(s.padding), dilation=list(s.dilation), groups=int(s.groups))
        if s.is_forward:
            tsig = ConvSignature(mode=Mode.FORWARD, **kwargs)
        else:
            tsig = ConvSignature(backward_mask=list(s.grad_mask), **kwargs)
        _same_name(tsig, sig)
        return tsig
    if sig.op == "gemm":
        from iree.turbine.kernel.boo.op_exports.gemm import GEMMSignature
        from iree.turbine.kernel.boo.op_exports.gemm import Mode as GemmMode

        g: Any = sig
        mode = {1: GemmMode.FORWARD, 2: GemmMode.A_BACKWARD, 3: GemmMode.B_BACKWARD}[g.forw]
        tsig = GEMMSignature(a_shape=[g.m, g.k], b_shape=[g.k, g.n], transpose_a=bool(g.trans_a),
                             transpose_b=bool(g.trans_b), dtype=dtype, mode=mode)
        _same_name(tsig, sig)
        return tsig
    if sig.op == "layernorm":
        from iree.turbine.kernel.boo.op_exports.layer_norm import LayerNormSignature
        from iree.turbine.kernel.boo.op_exports.layer_norm import Mode as LnMode

        ln: Any = sig
        return LayerNormSignature(input_shape=list(ln.input_shape), normalized_shape=list(ln.normalized_shape),
                                  eps=float(ln.eps), elementwise_affine=bool(ln.affine), bias=bool(ln.affine),
                                  dtype=dtype, mode=LnMode(ln.forw))
    from iree.turbine.kernel.boo.op_exports.aten import AtenSignature

    a: Any = sig
    types = [_ATEN_TYPES.get(t, "Scalar" if t == "Scalar" else t) for t in a.types]
    return AtenSignature(name=f"aten::{a.name}", input_dims=[list(d) for d in a.dims], input_type=types,
                         input_strides=[list(s) for s in a.strides], concrete_inputs=list(a.concrete))


def _same_name(tsig: Any, sig: OpSignature) -> None:
    if tsig.func_name != sig.func_name:
        raise NotBoo(f"BOO names the mapped kernel {tsig.func_name}, not {sig.func_name}: the mapping is wrong")


#: True in the processes made for compiling (the compile pool's workers, a Ray compile task): turbine's export runs
#: there. Anywhere else (inside a model's torch.compile, where turbine's strict export meets the running Dynamo and
#: fails, "Cannot clear callbacks while 1 are pending", or crashes the process) it runs in a child process.
EXPORT_IN_PROCESS = False
#: how long a child's export may take
CHILD_TIMEOUT_S = 600.0


def export_boo(sig: OpSignature) -> str:
    """Turbine's MLIR of `sig` (entry point `main`), as BOO's launchable exports it, checked against our call
    convention. NotBoo (one line) when turbine cannot build the kernel or builds another call. In a process not
    made for compiling (EXPORT_IN_PROCESS), in a child process of its own."""
    if not EXPORT_IN_PROCESS:
        return _export_in_child(sig)
    shim_mlir_bindings()
    try:
        tsig = turbine_signature(sig)
        text = _turbine_asm(tsig, _fake_args(tsig), ENTRY)
    except NotBoo:
        raise
    except Exception as e:  # noqa: BLE001 - any failure of turbine's export is one line, and the fallback
        raise NotBoo(f"iree-turbine's export failed: {_why(e)}") from None
    check_convention(sig, text)
    return text


def _export_in_child(sig: OpSignature) -> str:
    """export_boo in a fresh Python (this one's import path), the signature in and the text out as pickles."""
    import os
    import pickle
    import subprocess

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    code = "from boo_engine.compile.turbine import child_main; child_main()"
    try:
        p = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(sig), capture_output=True,
                           timeout=CHILD_TIMEOUT_S, env=env)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise NotBoo(f"iree-turbine's export did not finish: {type(e).__name__}") from None
    try:
        kind, text = pickle.loads(p.stdout)
    except Exception:  # noqa: BLE001 - a child that died says so in one line
        tail = (p.stderr.decode(errors="replace").strip().splitlines() or [f"exit {p.returncode}"])[-1]
        raise NotBoo(f"iree-turbine's export crashed (exit {p.returncode}): {tail[:200]}") from None
    if kind != "ok":
        raise NotBoo(str(text))
    return str(text)


def child_main() -> None:
    """The child of `_export_in_child`: a signature pickled on stdin, ("ok", MLIR) or ("notboo", why) on stdout."""
    import pickle

    global EXPORT_IN_PROCESS
    EXPORT_IN_PROCESS = True
    sig = pickle.loads(sys.stdin.buffer.read())
    out = sys.stdout.buffer
    sys.stdout = sys.stderr   # whatever turbine or torch prints must not mix with the answer
    try:
        result: tuple[str, str] = ("ok", export_boo(sig))
    except NotBoo as e:
        result = ("notboo", str(e))
    out.write(pickle.dumps(result))
    out.flush()


def _why(e: BaseException) -> str:
    """One line for a failed export: dynamo's "got RuntimeError('...')" where it wraps the real error."""
    text = str(e)
    inner = re.search(r"got (\w+)\('([^'\n]*)'\)", text)
    if inner:
        return f"{inner.group(1)}: {inner.group(2)[:200]}"
    first = (text.strip().splitlines() or [""])[0]
    return f"{type(e).__name__}: {first[:200]}" if first else type(e).__name__


def _turbine_asm(tsig: Any, args: tuple[torch.Tensor, ...], func_name: str) -> str:
    """turbine's `runtime.get_module_asm` of the signature's custom module (its file cache off: it shares the
    name $BOO_CACHE_ON with ours and must never serve us), its warnings and torch's error logs kept quiet (an
    export that fails is one line from the caller)."""
    import logging
    import warnings

    from iree.turbine.kernel.boo.runtime import cache as turbine_cache
    from iree.turbine.kernel.boo.runtime import get_module_asm

    turbine_cache.toggle_cache_on(0)
    loggers = [logging.getLogger(n) for n in ("torch._subclasses.fake_tensor", "torch.export", "torch._export")]
    levels = [lg.level for lg in loggers]
    try:
        for lg in loggers:
            lg.setLevel(logging.CRITICAL)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return str(get_module_asm(lambda: tsig.get_nn_module(use_custom=True), lambda: args, func_name,
                                      force_single_dispatch=bool(tsig.force_single_dispatch)))
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def _fake_args(tsig: Any) -> tuple[torch.Tensor, ...]:
    """BOO exports with `get_sample_args(splat_value=0)`; the same shapes and dtypes as fake tensors (no
    storage: a kernel too big for this machine's memory exports as cheaply as a small one). Same MLIR as the
    real tensors (checked on a conv, its gradients, a gemm and a layer norm)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        return tuple(tsig.get_sample_args(splat_value=0))


#: `%0 = hal.tensor.import wait(%arg3) => %arg1 : !hal.buffer_view -> tensor<64x64x3x3xf32>`: argument 1's type
_IMPORT = re.compile(r"hal\.tensor\.import\b[^\n]*?=>\s*%arg(\d+)\s*:\s*!hal\.buffer_view\s*->\s*tensor<([^>]*)>")
_EXPORT = re.compile(r"hal\.tensor\.export\s+%[\w#.]+\s*:\s*tensor<([^>]*)>")
_HEADER = re.compile(r"util\.func public @(\S+)\$async\(([^)]*)\)")


def _tensor_type(text: str) -> tuple[tuple[int, ...], str]:
    parts = text.split("x")
    return tuple(int(p) for p in parts[:-1]), parts[-1]


def check_convention(sig: OpSignature, text: str) -> None:
    """NotBoo unless turbine's `main$async` takes exactly as many tensors as our call passes, each it reads of
    our argument's shape and element type in our order (an argument the kernel does not read, such as x for a
    data gradient, stays in the signature, unread), and returns exactly our results, in order."""
    header = _HEADER.search(text)
    if header is None or header.group(1) != ENTRY:
        raise NotBoo(f"iree-turbine's module has no {ENTRY}$async entry point")
    nargs = header.group(2).count("!hal.buffer_view")
    body = text[header.end():].split("util.func", 1)[0]
    want_in = [(tuple(s), _ELEMENT.get(d, d)) for s, d in zip(sig.input_shapes(), sig.input_dtype_names())]
    want_out = [(tuple(s), _ELEMENT.get(d, d)) for s, d in zip(sig.output_shapes(), sig.output_dtype_names())]
    if nargs != len(want_in):
        raise NotBoo(f"BOO's kernel takes {nargs} tensors, our call passes {len(want_in)}")
    for index, typ in _IMPORT.findall(body):
        if _tensor_type(typ) != want_in[int(index)]:
            raise NotBoo(f"BOO's kernel takes argument {index} as {typ}, ours is {_types([want_in[int(index)]])[1:-1]}")
    got_out = [_tensor_type(t) for t in _EXPORT.findall(body)]
    if got_out != want_out:
        raise NotBoo(f"BOO's kernel returns {_types(got_out)}, ours {_types(want_out)}")


def _types(items: list[tuple[tuple[int, ...], str]]) -> str:
    return "(" + ", ".join("x".join([*map(str, s), e]) for s, e in items) + ")"
