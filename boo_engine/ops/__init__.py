"""Op signatures: one frozen dataclass per op family (see base.OpSignature for the contract)."""
from __future__ import annotations

from boo_engine.ops.aten import IN_DTYPE
from boo_engine.ops.base import DEFAULT_FORMULATION, DTYPES, OpSignature
from boo_engine.ops.bnorm import BatchNormSignature
from boo_engine.ops.conv import FWDCONV, MATMUL, MIXED, ConvSignature
from boo_engine.ops.gemm import GemmSignature
from boo_engine.ops.layernorm import LayerNormSignature

#: every formulation some kernel has (OpSignature.formulations): what a variant may name
FORMULATIONS: tuple[str, ...] = (DEFAULT_FORMULATION, FWDCONV, MATMUL, MIXED, IN_DTYPE)

__all__ = ["DEFAULT_FORMULATION", "DTYPES", "FORMULATIONS", "FWDCONV", "IN_DTYPE", "MATMUL", "MIXED", "OpSignature",
           "BatchNormSignature", "ConvSignature", "GemmSignature", "LayerNormSignature"]
