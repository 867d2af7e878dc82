"""Op signatures: one frozen dataclass per op family (see base.OpSignature for the contract)."""
from __future__ import annotations

from boo_engine.ops.base import DTYPES, OpSignature
from boo_engine.ops.bnorm import BatchNormSignature
from boo_engine.ops.conv import ConvSignature
from boo_engine.ops.gemm import GemmSignature
from boo_engine.ops.layernorm import LayerNormSignature

__all__ = ["DTYPES", "OpSignature", "BatchNormSignature", "ConvSignature", "GemmSignature", "LayerNormSignature"]
