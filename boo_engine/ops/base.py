"""The contract every op signature fulfils. Everything downstream (export, compile, cache, launch, numerics,
benchmarking, the store, the UI) depends only on this interface, never on a concrete op.

A signature is an immutable, hashable, picklable value (a frozen dataclass) describing ONE kernel: op kind,
shapes, layouts, dtype and mode. It knows how to make deterministic sample inputs, how to compute the result
with eager PyTorch, and how much work one call does.
"""
from __future__ import annotations

import abc
from typing import Any, ClassVar, Sequence

import torch

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}


class OpSignature(abc.ABC):
    """One kernel. Subclasses are `@dataclass(frozen=True)` with a `dtype_name` field (a key of DTYPES)."""

    #: op family: "conv", "layernorm", "gemm", "bnorm"
    op: ClassVar[str]
    dtype_name: str

    # ---- identity -------------------------------------------------------------------------------------
    @property
    @abc.abstractmethod
    def func_name(self) -> str:
        """Kernel name, BOO-compatible for conv and gemm; distinct for distinct kernels. Safe as a folder name."""

    @property
    @abc.abstractmethod
    def mode(self) -> str:
        """forward, input_backward, weight_backward, ... (BOO's mode words)."""

    @property
    def dtype(self) -> torch.dtype:
        return DTYPES[self.dtype_name]

    # ---- arguments and results ------------------------------------------------------------------------
    @abc.abstractmethod
    def input_shapes(self) -> list[tuple[int, ...]]:
        """Shapes of the call arguments, in call order (all of dtype `self.dtype`)."""

    def input_dtypes(self) -> list[torch.dtype]:
        return [self.dtype] * len(self.input_shapes())

    @abc.abstractmethod
    def output_shapes(self) -> list[tuple[int, ...]]:
        """Shapes of the results, in order (one entry when the op returns a single tensor)."""

    def output_dtypes(self) -> list[torch.dtype]:
        """Dtypes of the results (batch norm keeps float32 statistics beside 16-bit activations)."""
        return [self.dtype] * len(self.output_shapes())

    @property
    def returns_tuple(self) -> bool:
        """True when `reference` returns a tuple (several outputs), False for a single tensor."""
        return len(self.output_shapes()) > 1

    def get_sample_args(
        self,
        seed: int = 0,
        *,
        device: torch.device | str | None = None,
        splat_value: float | None = None,
    ) -> tuple[torch.Tensor, ...]:
        """Deterministic inputs for a seed (same seed -> bit-identical tensors on any machine), or every
        element equal to `splat_value` when given. Standard-normal values by default."""
        gen = torch.Generator().manual_seed(seed)
        out = []
        for shape, dt in zip(self.input_shapes(), self.input_dtypes()):
            if splat_value is not None:
                t = torch.full(shape, float(splat_value), dtype=dt)
            else:
                t = torch.randn(shape, generator=gen, dtype=torch.float32).to(dt)
            out.append(t.to(device) if device is not None else t)
        return tuple(out)

    @abc.abstractmethod
    def reference(self, *args: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        """The op in eager PyTorch. Dtype-generic: computes in the dtype of the arguments it is given, so
        numerics can call it with float64 copies. Must be traceable by torch.export (no data-dependent Python
        control flow), because `as_module()` wraps it for export to MLIR."""

    def as_module(self) -> torch.nn.Module:
        """A module whose forward(*args) is `reference(*args)`, for torch.export."""
        return _ReferenceModule(self)

    # ---- cost model -----------------------------------------------------------------------------------
    @property
    @abc.abstractmethod
    def flops(self) -> int:
        """Floating-point operations of one call (a multiply-add counts 2)."""

    @property
    def bytes(self) -> int:
        """Minimum memory traffic of one call: every input read once and every output written once."""
        pairs = list(zip(self.input_shapes(), self.input_dtypes())) + list(zip(self.output_shapes(), self.output_dtypes()))
        return sum(_numel(s) * torch.empty((), dtype=dt).element_size() for s, dt in pairs)

    # ---- description ----------------------------------------------------------------------------------
    @abc.abstractmethod
    def describe(self) -> dict[str, Any]:
        """JSON-able facts for display and the store: `common_facts()` plus op-specific fields (layouts,
        stride, padding, dilation, groups, eps, transposes, ...)."""

    def common_facts(self) -> dict[str, Any]:
        """The facts every op's describe() starts with."""
        return {
            "op": self.op,
            "dtype": self.dtype_name,
            "mode": self.mode,
            "input_shapes": [list(s) for s in self.input_shapes()],
            "output_shapes": [list(s) for s in self.output_shapes()],
        }

    def __str__(self) -> str:  # pragma: no cover - convenience
        return self.func_name


class _ReferenceModule(torch.nn.Module):
    def __init__(self, sig: OpSignature):
        super().__init__()
        self._sig = sig

    def forward(self, *args: torch.Tensor):
        return self._sig.reference(*args)


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n
