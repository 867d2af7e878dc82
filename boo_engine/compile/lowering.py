"""Which ATen ops IREE's torch input cannot lower, and torch's decompositions of exactly those (torch and
iree.compiler are imported by the functions that need them: export workers only).

The rule: export the op (as it is, or through torch's default decompositions when the signature asks for them),
import it, and run IREE's torch input conversion (`torch-to-iree`, ~10 ms in process, the same for every target)
on the result. An aten op the importer could only write as a generic `torch.operator` (torch-mlir does not know
it) or one the conversion fails to legalize is decomposed with torch's own decomposition of that op (torch._decomp,
or its CompositeImplicitAutograd kernel), and the export is imported and checked again, until nothing is left
unlowered. An op neither IREE nor torch can break down fails in one line naming it. No op list: the frontend
decides. The decompositions applied are written in the MLIR's first line (so the text, the cache key and the
cache's .mlir file all say them) and read back by `decompositions_in`.
"""
from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import CompileError

if TYPE_CHECKING:
    from torch._ops import OperatorBase, OpOverload
    from torch.export import ExportedProgram

#: the most rounds of decompose-and-check (a decomposition may emit ops that need one of their own)
MAX_ROUNDS = 8
#: the MLIR's first line when ops were decomposed; `decompositions_in` reads it back
HEADER = "// boo: decomposed for IREE's torch input: "
#: the op namespaces torch.export emits (prims: what some of torch's decompositions call)
_OP = r"torch\.(?:aten|prims)\.[\w.]+"
_OPERATOR = re.compile(rf'torch\.operator "({_OP})"')
_ILLEGAL = re.compile(rf"failed to legalize operation '({_OP})'")
_ILLEGAL_TORCH = re.compile(r"failed to legalize operation 'torch\.")
_LEFT = re.compile(rf"= ({_OP}) ")
_ILLEGAL_OPERATOR = re.compile(rf"failed to legalize operation 'torch\.operator'[^\n]*?name = \"({_OP})\"")


def mlir_name(op: OpOverload) -> str:
    """The torch-dialect name IREE's importer gives an aten OpOverload: `torch.aten.NAME[.OVERLOAD]`."""
    schema = op._schema
    namespace, _, name = schema.name.partition("::")
    overload = schema.overload_name
    return f"torch.{namespace}.{name}" + (f".{overload}" if overload else "")


def unlowered(text: str) -> list[str]:
    """The aten ops (torch-dialect names, sorted) of imported MLIR `text` that IREE's torch input cannot lower:
    every generic `torch.operator "torch.aten..."`, and the aten op the torch-to-iree conversion fails to
    legalize. When the conversion names a torch op that is no aten op (a `torch.constant.int` whose user, say
    aten.max_pool3d_with_indices_backward, has no conversion: it is the first illegal op walked), the aten ops
    the failed conversion left in the module. [] when the conversion succeeds, or fails on something that is no
    torch op (iree-compile then reports that failure itself)."""
    from iree.compiler import ir, passmanager

    names = set(_OPERATOR.findall(text))
    ctx = ir.Context()
    module = None
    try:
        module = ir.Module.parse(text, ctx)
        passmanager.PassManager.parse("builtin.module(torch-to-iree)", ctx).run(module.operation)
    except Exception as e:  # noqa: BLE001 - MLIRError carries the diagnostics; anything else names no op
        message = str(e)
        found = set(_ILLEGAL.findall(message)) | set(_ILLEGAL_OPERATOR.findall(message))
        if not found and module is not None and _ILLEGAL_TORCH.search(message):
            found = set(_LEFT.findall(str(module)))
        names.update(found)
    return sorted(names)


def decomposition_of(op: OpOverload) -> Callable | None:
    """Torch's decomposition of one OpOverload: its registered one (torch._decomp), else its
    CompositeImplicitAutograd kernel, else one of ours (`ours()`, for an op torch has none of); None when there
    is none."""
    import torch
    from torch._decomp import get_decompositions

    found = get_decompositions([op]).get(op)
    if found is not None:
        return found
    if torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CompositeImplicitAutograd"):
        return op.decompose
    return ours().get(op)


def ours() -> dict[OpOverload, Callable]:
    """Our decompositions of ops torch has none of, written with ops IREE lowers: convolution_backward (IREE
    3.13 lowers no transposed conv's backward) as forward convolutions, the way the conv kernels' `fwdconv`
    formulation writes them; the backward ops of CPU attention, 3-D max pooling, average pooling and bilinear
    upsampling (ops/decompositions.py)."""
    import torch

    from ..ops import conv_forms, decompositions

    aten = torch.ops.aten
    return {
        aten.convolution_backward.default: conv_forms.convolution_backward,
        aten._scaled_dot_product_flash_attention_for_cpu_backward.default: decompositions.flash_attention_backward,
        aten.max_pool3d_with_indices_backward.default: decompositions.max_pool_backward,
        aten.avg_pool2d_backward.default: decompositions.avg_pool2d_backward,
        aten.upsample_bilinear2d_backward.default: decompositions.upsample_bilinear2d_backward,
    }


def lower(label: str, program: ExportedProgram, decompose_default: bool,
          import_text: Callable[[ExportedProgram], str]) -> tuple[str, tuple[str, ...]]:
    """MLIR text of `program` (a torch.export ExportedProgram) that IREE's torch input can lower, and the ops
    decomposed to get there (sorted `aten.NAME.OVERLOAD`). `import_text` imports a program to MLIR text.

    Raises CompileError `LABEL: IREE's torch input cannot lower torch.aten.X (no decomposition in torch either)`
    when an op is left that neither IREE nor torch can break down."""
    chosen: dict[OpOverload, Callable] = {}
    first: list[str] = []   # what the frontend could not lower in the export as it was
    for _ in range(MAX_ROUNDS):
        current = _decomposed(program, decompose_default, chosen)
        text = import_text(current)
        left = unlowered(text)
        if not left:
            break
        first = first or left
        by_name = _overloads(current)
        for name in left:
            op = by_name.get(name)
            fn = decomposition_of(op) if op is not None and op not in chosen else None
            if op is None or fn is None:
                raise CompileError(f"{label}: {_cannot(name, first, op in chosen)}")
            chosen[op] = fn
    else:
        raise CompileError(f"{label}: IREE's torch input cannot lower {', '.join(first)}: torch's decompositions "
                           f"still leave {', '.join(left)} after {MAX_ROUNDS} rounds")
    names = tuple(sorted(str(op) for op in chosen))
    return (HEADER + ", ".join(names) + "\n" + text if names else text), names


def _cannot(name: str, first: list[str], decomposed: bool) -> str:
    """Why `name` is left: the one line a lowering failure says, naming the op the export had."""
    if name in first and not decomposed:
        return f"IREE's torch input cannot lower {name} (no decomposition in torch either)"
    return (f"IREE's torch input cannot lower {', '.join(first)} (torch's decomposition emits {name}, which IREE "
            f"cannot lower either)")


def decompositions_in(text: str) -> tuple[str, ...]:
    """The ops `lower` decomposed for this MLIR text (its first line), () when none."""
    if not text.startswith(HEADER):
        return ()
    line = text[len(HEADER):].split("\n", 1)[0]
    return tuple(n for n in line.split(", ") if n)


def _decomposed(program: ExportedProgram, decompose_default: bool,
                chosen: dict[OpOverload, Callable]) -> ExportedProgram:
    """`program` through torch's default decompositions (when asked) and `chosen`. A decomposition may call an op
    that mutates (torch's of _native_batch_norm_legit_no_training calls _native_batch_norm_legit, whose running
    statistics are in-place), which export refuses in a functional graph: that op's own decomposition joins
    `chosen` and the program is decomposed again."""
    if not decompose_default and not chosen:
        return program
    import warnings

    for _ in range(MAX_ROUNDS):
        table: dict[OperatorBase, Callable] = {}
        if decompose_default:
            from torch.export import default_decompositions

            table = default_decompositions()
        for op, fn in chosen.items():
            table[op] = fn
        try:
            with warnings.catch_warnings():   # torch 2.13 warns about its own pytree internals here
                warnings.simplefilter("ignore", FutureWarning)
                result = program.run_decompositions(table)
                ignored = {op: fn for op, fn in chosen.items() if op in set(_overloads(result).values())}
                if ignored:
                    result = _retraced(result, ignored).run_decompositions(table)
                return result
        except Exception as e:
            mutating = _mutating_op(str(e))
            inner = decomposition_of(mutating) if mutating is not None and mutating not in chosen else None
            if mutating is None or inner is None:
                raise
            chosen[mutating] = inner
    raise CompileError(f"torch's decompositions still call mutating ops after {MAX_ROUNDS} rounds")


def _retraced(program: ExportedProgram, table: dict[OpOverload, Callable]) -> ExportedProgram:
    """`program` traced again by make_fx with `table` applied, and exported. run_decompositions ignores the
    decomposition of an op with a CompositeImplicitAutograd kernel beside its backend kernels (aten.silu_backward:
    export moves it to its CIA override, which the CPU and Autograd kernels shadow), so such an op was left for
    IREE, which cannot lower it; make_fx applies a decomposition table whatever kernels the op has."""
    import torch
    from torch._guards import detect_fake_mode
    from torch.fx.experimental.proxy_tensor import make_fx

    args = tuple(n.meta["val"] for n in program.graph.nodes if n.op == "placeholder")
    with detect_fake_mode(args) or contextlib.nullcontext():
        traced = make_fx(program.module(), decomposition_table=table)(*args)
    return torch.export.export(traced, args, strict=False)


_NOT_FUNCTIONAL = re.compile(r"entirely functional graph, but found .*?target=torch\.ops\.aten\.(\w+)\.(\w+)")


def _mutating_op(message: str) -> OpOverload | None:
    """The OpOverload export names when a decomposition left a mutating op in a graph that must be functional."""
    import torch

    m = _NOT_FUNCTIONAL.search(message)
    packet = getattr(torch.ops.aten, m.group(1), None) if m else None
    return getattr(packet, m.group(2), None) if m and packet is not None else None


def _overloads(program: ExportedProgram) -> dict[str, OpOverload]:
    """torch-dialect name -> OpOverload, for every aten call in the program's graph."""
    import torch

    found: dict[str, OpOverload] = {}
    for node in program.graph_module.graph.nodes:
        if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload):
            found.setdefault(mlir_name(node.target), node.target)
    return found
