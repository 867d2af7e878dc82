"""Signature -> torch-dialect MLIR text, through torch.export and IREE's FxImporter.

The MLIR text is part of the cache key, so export must be deterministic: the same signature gives the same text
in any process (no source locations, no addresses, constants frozen in a stable order). The first torch.export
of a process holds the GIL for ~150 ms, which is why the compile pool exports in worker processes, never on a
UI thread.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from ..errors import CompileError
from ..ops.base import DEFAULT_FORMULATION, OpSignature
from .lowering import lower

#: name of the exported entry point; the runtime calls this function
FUNC_NAME = "main"


def export_mlir(sig: OpSignature, formulation: str = DEFAULT_FORMULATION) -> str:
    """Torch-dialect MLIR of `sig.reference` (or of the op written as `formulation`, one of
    `sig.formulations()`), with one function `main` taking `sig.input_shapes()`.

    Ops IREE's torch input cannot lower are decomposed by torch first (compile/lowering.py: the rule, and the
    MLIR's first line naming what was decomposed).

    Raises CompileError when the kernel has no such formulation (one line naming those it has), when
    torch.export or the importer rejects the op (a bug in the signature or an op the importer cannot express),
    with the underlying message kept in `stderr`, or when an op is left that neither IREE nor torch can lower."""
    from iree.compiler import ir
    from iree.compiler.extras.fx_importer import FxImporter

    check_formulation(sig, formulation)

    def import_text(program: torch.export.ExportedProgram) -> str:
        importer = FxImporter(context=ir.Context())
        with user_outputs_only(program):
            importer.import_frozen_program(program, func_name=FUNC_NAME)
        return str(importer.module)

    try:
        sig.check()   # an aten:: call resolves its overload now, outside export's fake-tensor tracing
        args = fake_sample_args(sig)
        with torch.no_grad():
            program = torch.export.export(sig.as_module(formulation), args, strict=False)
            text, _ = lower(export_label(sig), program, sig.decompose_for_export, import_text)
    except CompileError:
        raise
    except Exception as e:  # noqa: BLE001 - export failures become one clear error
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise CompileError(f"{sig.func_name}: export to MLIR failed: {first}", stderr=str(e)) from None
    return text


@contextlib.contextmanager
def user_outputs_only(program: torch.export.ExportedProgram) -> Iterator[None]:
    """While it is imported, the program's graph returns the op's results alone. A call that writes into its
    inputs (a training-mode aten::batch_norm updates its running statistics in place; its schema does not say so)
    is functionalized by torch.export into extra outputs, the inputs' new values, placed BEFORE the results: the
    kernel returned 3 tensors where the op (and so the reference numerics compare with) returns 1. The kernel
    computes what the op returns; the writes (O(channels) of work) are left out, as the reference leaves them."""
    from torch.export.graph_signature import OutputKind

    written = [s.kind == OutputKind.USER_INPUT_MUTATION for s in program.graph_signature.output_specs]
    if not any(written):
        yield
        return
    out = next(n for n in program.graph.nodes if n.op == "output")
    saved = out.args
    out.args = (tuple(v for v, w in zip(out.args[0], written) if not w),)
    try:
        yield
    finally:
        out.args = saved


def export_label(sig: OpSignature) -> str:
    """How a lowering failure names the kernel: `aten::NAME` for a trace line (the op the user wrote), else the
    kernel's name."""
    name = getattr(sig, "name", None)
    return f"aten::{name}" if sig.op == "aten" and isinstance(name, str) else sig.func_name


def check_formulation(sig: OpSignature, formulation: str) -> None:
    """CompileError (one line: the formulations it has) when `sig` cannot be written as `formulation`."""
    problem = sig.formulation_problem(formulation)
    if problem is not None:
        raise CompileError(problem)


def fake_sample_args(sig: OpSignature) -> tuple[torch.Tensor, ...]:
    """The arguments export traces with: fake tensors (shapes and dtypes, no storage), so exporting a kernel
    whose inputs would not fit in this machine's memory (a 16384^3 gemm cross-compiled for a GPU) costs no more
    than a small one. Unlike meta-device tensors, fake CPU tensors give the same MLIR as real ones (meta
    tensors change the layouts torch.export records for some convs and layer norms), so cache keys stay."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        return tuple(torch.empty(s, dtype=d) for s, d in zip(sig.input_shapes(), sig.input_dtypes()))
