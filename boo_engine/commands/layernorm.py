"""The `layernorm` / `layernormfp16` / `layernormbfp16` flag table.

`--normalized_dim` defaults to the LAST dim when not given: MIOpen's default is 3, but BOO normalizes over the
last dim whatever the flag says, so commands written for BOO (e.g. `--input 16x128x768` with no `-o`) keep their
meaning. Given explicitly, it is honoured: normalize over dims [o, rank).
"""
from __future__ import annotations

import re
from collections.abc import Sequence

from boo_engine.commands.flags import Flag, parse_flags, require, show
from boo_engine.ops.layernorm import LayerNormSignature

#: a shape: dims of at most 10 decimal digits, joined by x
_SHAPE = re.compile(r"[0-9]{1,10}(?:x[0-9]{1,10})*")
MAX_RANK = 16

LAYERNORM_FLAGS: tuple[Flag, ...] = (
    Flag("input", "X", "str", "100x3x32x32"),
    Flag("eps", "e", "float", 1e-5),
    Flag("mode", "m", "int", 0),
    Flag("normalized_dim", "o", "int", None),
    Flag("forw", "F", "int", 1),
)


def parse_shape(op: str, flag: str, text: str) -> tuple[int, ...]:
    """`16x128x768` -> (16, 128, 768); every part a positive decimal integer."""
    shape = text.strip().lower()
    # one pass over the text (a message built per part would quote the whole text once per part: quadratic)
    require(op, _SHAPE.fullmatch(shape) is not None, f"{flag} expects a shape like 16x128x768, got {show(text)}")
    rank = shape.count("x") + 1
    require(op, rank <= MAX_RANK, f"{flag} has {rank} dims, at most {MAX_RANK} are supported")
    return tuple(int(part) for part in shape.split("x"))


def parse_layernorm(op: str, dtype_name: str, tokens: Sequence[str]) -> LayerNormSignature:
    values, spelled = parse_flags(op, tokens, LAYERNORM_FLAGS)
    shape = parse_shape(op, spelled.get("input", "--input"), values["input"])
    mode = values["mode"]
    require(op, mode in (0, 1), f"{spelled.get('mode', '--mode')} expects 0 or 1, got {mode}")
    ndim = values["normalized_dim"]
    if ndim is None:
        ndim = len(shape) - 1
    return LayerNormSignature(
        dtype_name=dtype_name,
        input_shape=shape,
        normalized_dim=ndim,
        eps=values["eps"],
        affine=bool(mode),
        forw=values["forw"],
    )
