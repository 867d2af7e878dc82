"""The contract every op signature fulfils. Everything downstream (export, compile, cache, launch, numerics,
benchmarking, the store, the UI) depends only on this interface, never on a concrete op.

A signature is an immutable, hashable, picklable value (a frozen dataclass) describing ONE kernel: op kind,
shapes, layouts, dtype and mode. It knows how to make deterministic sample inputs, how to compute the result
with eager PyTorch, and how much work one call does.
"""
from __future__ import annotations

import abc
import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from ._lazy import torch

if TYPE_CHECKING:
    import torch

#: the formulation every kernel has: the export its signature's `reference` gives (see OpSignature.formulations)
DEFAULT_FORMULATION = "default"

#: bytes per element of each supported dtype (names as in kernel names and torch: float32, float16, bfloat16; the
#: float64 / integer / bool types are for aten:: calls, whose arguments may be indices, masks or doubles)
ELEMENT_BYTES: dict[str, int] = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int64": 8, "int32": 4,
                                 "int16": 2, "int8": 1, "uint8": 1, "bool": 1}


class _TorchDtypes(Mapping):
    """dtype name -> torch.dtype. Asking which names exist does not import torch; looking one up does."""

    def __getitem__(self, name: str) -> torch.dtype:
        if name not in ELEMENT_BYTES:
            raise KeyError(name)
        return getattr(torch, name)

    def __contains__(self, name: object) -> bool:
        return name in ELEMENT_BYTES

    def __iter__(self) -> Iterator[str]:
        return iter(ELEMENT_BYTES)

    def __len__(self) -> int:
        return len(ELEMENT_BYTES)


DTYPES: Mapping[str, torch.dtype] = _TorchDtypes()


class OpSignature(abc.ABC):
    """One kernel. Subclasses are `@dataclass(frozen=True)` with a `dtype_name` field (a key of DTYPES).

    Parsing, naming, shapes, dtype names, the cost model and describe() never import torch: a process that
    only parses, looks kernels up and stores results (the headless front end over cached kernels) never pays
    its ~1 s import. Tensors, torch dtypes and the reference import it on first use."""

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
    def shape_label(self) -> str:
        """A compact, human-readable line that tells this kernel apart from the others of its op in a table:
        the sizes first, then what differs from the defaults, e.g. `n2 c64 28x28 k64 3x3 p1 NCHW fwd`. Never
        imports torch. Ops override it; this default lists the argument shapes."""
        return ", ".join("x".join(str(d) for d in s) for s in self.input_shapes())

    @property
    def dtype(self) -> torch.dtype:
        return DTYPES[self.dtype_name]

    # ---- arguments and results ------------------------------------------------------------------------
    @abc.abstractmethod
    def input_shapes(self) -> list[tuple[int, ...]]:
        """Shapes of the call arguments, in call order (all of dtype `self.dtype`)."""

    def input_dtype_names(self) -> list[str]:
        """Dtype names of the call arguments, in call order."""
        return [self.dtype_name] * len(self.input_shapes())

    def input_dtypes(self) -> list[torch.dtype]:
        return [DTYPES[n] for n in self.input_dtype_names()]

    @abc.abstractmethod
    def output_shapes(self) -> list[tuple[int, ...]]:
        """Shapes of the results, in order (one entry when the op returns a single tensor)."""

    def output_dtype_names(self) -> list[str]:
        """Dtype names of the results (batch norm keeps float32 statistics beside 16-bit activations)."""
        return [self.dtype_name] * len(self.output_shapes())

    def output_dtypes(self) -> list[torch.dtype]:
        return [DTYPES[n] for n in self.output_dtype_names()]

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

    def eager(self, *args: torch.Tensor) -> Callable[[], torch.Tensor | tuple[torch.Tensor, ...]]:
        """A zero-argument callable running the op on `args` as eager torch does in a model: what the torch
        backend times. Work that belongs to making the inputs (an aten call's strided views of its buffers) is
        done here, once, not in every timed call."""
        return functools.partial(self.reference, *args)

    # ---- formulations ---------------------------------------------------------------------------------
    def formulations(self) -> tuple[str, ...]:
        """The ways this kernel can be written for export, DEFAULT_FORMULATION ("default": `reference` itself)
        first. Each computes the same function with the same arguments, results and func_name, through
        different torch ops (e.g. a backward conv as forward convolutions), so the compiler sees a different
        program: a tuner can search over them. Ops that own a choice override this and `formulated`."""
        return (DEFAULT_FORMULATION,)

    def formulation_problem(self, formulation: str) -> str | None:
        """None when this kernel supports `formulation`, else the one-line reason."""
        if formulation in self.formulations():
            return None
        return (f"{self.func_name} does not support formulation {formulation!r}; "
                f"it has: {', '.join(self.formulations())}")

    def formulated(self, formulation: str, *args: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        """The op computed the way `formulation` writes it (traceable by torch.export, dtype-generic, like
        `reference`). The default formulation is `reference`."""
        problem = self.formulation_problem(formulation)
        if problem is not None:
            raise ValueError(problem)
        return self.reference(*args)

    def as_module(self, formulation: str = DEFAULT_FORMULATION) -> torch.nn.Module:
        """A module whose forward(*args) is the op written as `formulation` (`reference(*args)` by default), for
        torch.export. ValueError for a formulation this kernel does not have."""
        problem = self.formulation_problem(formulation)
        if problem is not None:
            raise ValueError(problem)
        return _reference_module_class()(self, formulation)

    def check(self) -> None:
        """Checks beyond the fields that may import torch (an `aten::` call resolves its overload here). Raises
        CommandError; parsing calls it unless asked for syntax only."""
        return None

    #: whether export lowers the program to core aten ops first (torch's default decompositions): only for ops
    #: IREE's torch input does not lower itself (an `aten::` call of, say, native_layer_norm_backward)
    decompose_for_export: bool = False

    def required_compile_flags(self) -> list[str]:
        """iree-compile flags this kernel cannot compile correctly without (e.g. keeping float64 arguments);
        part of the compile flags and so of the cache key."""
        return []

    # ---- cost model -----------------------------------------------------------------------------------
    @property
    @abc.abstractmethod
    def flops(self) -> int:
        """Floating-point operations of one call (a multiply-add counts 2)."""

    @property
    def bytes(self) -> int:
        """Minimum memory traffic of one call: every input read once and every output written once."""
        pairs = (list(zip(self.input_shapes(), self.input_dtype_names()))
                 + list(zip(self.output_shapes(), self.output_dtype_names())))
        return sum(_numel(s) * ELEMENT_BYTES[dt] for s, dt in pairs)

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


@functools.cache
def _reference_module_class() -> type:
    """The torch.nn.Module wrapping a signature's reference (defined on first use: it needs torch)."""

    class _ReferenceModule(torch.nn.Module):
        def __init__(self, sig: OpSignature, formulation: str = DEFAULT_FORMULATION):
            super().__init__()
            self._sig = sig
            self._formulation = formulation

        def forward(self, *args: torch.Tensor):
            return self._sig.formulated(self._formulation, *args)

    return _ReferenceModule


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n
