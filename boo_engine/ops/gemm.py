"""GEMM signatures: C[M,N] = A[M,K] @ B[K,N], with A and/or B stored transposed, forward and BOO's two backward
modes (-F 2: dA = dC @ B^T taking (dC, b); -F 3: dB = A^T @ dC taking (dC, a)). Gradients come back in the
stored layout of the matrix they belong to (transposed when that matrix is stored transposed)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from boo_engine.ops._lazy import torch

if TYPE_CHECKING:
    import torch

from boo_engine.ops._common import SHORT_DTYPES, check_dtype, check_size, fail, label_of
from boo_engine.ops.base import OpSignature

#: MIOpen/BOO `-F` value -> mode word
GEMM_MODES: dict[int, str] = {1: "forward", 2: "a_backward", 3: "b_backward"}
#: the mode as a shape label gives it (forward, the usual case, is left out)
GEMM_SHORT_MODES: dict[int, str] = {1: "", 2: "bwd-a", 3: "bwd-b"}


@dataclass(frozen=True)
class GemmSignature(OpSignature):
    op: ClassVar[str] = "gemm"

    dtype_name: str
    m: int
    k: int
    n: int
    trans_a: bool = False
    trans_b: bool = False
    forw: int = 1

    def __post_init__(self) -> None:
        check_dtype("gemm", self.dtype_name)
        check_size("gemm", "--a_w", self.m)
        check_size("gemm", "--a_h", self.k)
        check_size("gemm", "--b_w", self.n)
        if self.forw not in GEMM_MODES:
            raise fail("gemm", f"unsupported -F {self.forw} (expected 1 forward, 2 A-grad or 3 B-grad)")

    @property
    def mode(self) -> str:
        return GEMM_MODES[self.forw]

    @property
    def func_name(self) -> str:
        items = ["gemm", self.dtype_name, self.mode, f"{self.m}x{self.k}x{self.n}"]
        if self.trans_a:
            items.append("transA")
        if self.trans_b:
            items.append("transB")
        return "_".join(items)

    @property
    def shape_label(self) -> str:
        """`MxKxN`, then `tA` / `tB` for transposed operands, the backward mode and a 16-bit dtype:
        `256x512x512 tB`, `128x256x256 f16`."""
        return label_of(f"{self.m}x{self.k}x{self.n}", "tA" if self.trans_a else "", "tB" if self.trans_b else "",
                        GEMM_SHORT_MODES[self.forw], SHORT_DTYPES.get(self.dtype_name, self.dtype_name))

    @property
    def a_shape(self) -> tuple[int, int]:
        """A as stored: (M, K), or (K, M) when transposed."""
        return (self.k, self.m) if self.trans_a else (self.m, self.k)

    @property
    def b_shape(self) -> tuple[int, int]:
        """B as stored: (K, N), or (N, K) when transposed."""
        return (self.n, self.k) if self.trans_b else (self.k, self.n)

    def input_shapes(self) -> list[tuple[int, ...]]:
        if self.forw == 1:
            return [self.a_shape, self.b_shape]
        if self.forw == 2:
            return [(self.m, self.n), self.b_shape]
        return [(self.m, self.n), self.a_shape]

    def output_shapes(self) -> list[tuple[int, ...]]:
        return [{1: (self.m, self.n), 2: self.a_shape, 3: self.b_shape}[self.forw]]

    def reference(self, *args: torch.Tensor) -> torch.Tensor:
        if self.forw == 1:
            a, b = args
            a = a.t() if self.trans_a else a
            b = b.t() if self.trans_b else b
            return torch.mm(a, b)
        if self.forw == 2:
            dc, b = args
            b_kn = b.t() if self.trans_b else b
            da = torch.mm(dc, b_kn.t())  # (M, K)
            return da.t().contiguous() if self.trans_a else da
        dc, a = args
        a_mk = a.t() if self.trans_a else a
        db = torch.mm(a_mk.t(), dc)  # (K, N)
        return db.t().contiguous() if self.trans_b else db

    @property
    def flops(self) -> int:
        """2*M*N*K in every mode: each gradient is one GEMM of the same size."""
        return 2 * self.m * self.n * self.k

    def describe(self) -> dict[str, Any]:
        return {
            **self.common_facts(),
            "forw": self.forw,
            "M": self.m,
            "K": self.k,
            "N": self.n,
            "transA": self.trans_a,
            "transB": self.trans_b,
        }
