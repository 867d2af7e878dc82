"""The `gemm` / `gemmfp16` / `gemmbfp16` flag table. Names follow MIOpenDriver: A is a_w (M) by a_h (K)."""
from __future__ import annotations

from collections.abc import Sequence

from boo_engine.commands.driver_flags import Flag, parse_flags, require
from boo_engine.ops.gemm import GemmSignature

GEMM_FLAGS: tuple[Flag, ...] = (
    Flag("a_w", "k", "int", 256),
    Flag("a_h", "m", "int", 256),
    Flag("b_w", "n", "int", 256),
    Flag("transA", "u", "int", 0),
    Flag("transB", "v", "int", 0),
    Flag("forw", "F", "int", 1),
)


def parse_gemm(op: str, dtype_name: str, tokens: Sequence[str]) -> GemmSignature:
    values, spelled = parse_flags(op, tokens, GEMM_FLAGS)
    for name in ("transA", "transB"):
        require(op, values[name] in (0, 1), f"{spelled.get(name, '--' + name)} expects 0 or 1, got {values[name]}")
    return GemmSignature(
        dtype_name=dtype_name,
        m=values["a_w"],
        k=values["a_h"],
        n=values["b_w"],
        trans_a=bool(values["transA"]),
        trans_b=bool(values["transB"]),
        forw=values["forw"],
    )
