"""The `layernorm` / `layernormfp16` / `layernormbfp16` flag table.

`--normalized_dim` defaults to the LAST dim when not given: MIOpen's default is 3, but BOO normalizes over the
last dim whatever the flag says, so commands written for BOO (e.g. `--input 16x128x768` with no `-o`) keep their
meaning. Given explicitly, it is honoured: normalize over dims [o, rank).

BOO's own flags: `--input-permutation P0 P1 ...` (its syntax: the dims as separate words; `P0,P1,...` in one
word is taken too) is x's memory order (see ops/layernorm.py). `--use-aten V` is accepted (V: 0/1/true/false)
and has no effect here: in BOO it makes the full backward call `aten.native_layer_norm_backward` instead of the
written-out math, which IREE 3.13 cannot lower, so our kernels always write the math out.
"""
from __future__ import annotations

import re
from collections.abc import Sequence

from boo_engine.commands.driver_flags import Flag, parse_flags, require, show
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
    Flag("use-aten", None, "str", "1"),
)
PERMUTATION_FLAG = "--input-permutation"
_INT = re.compile(r"[+-]?[0-9]{1,10}")


def parse_shape(op: str, flag: str, text: str) -> tuple[int, ...]:
    """`16x128x768` -> (16, 128, 768); every part a positive decimal integer."""
    shape = text.strip().lower()
    # one pass over the text (a message built per part would quote the whole text once per part: quadratic)
    require(op, _SHAPE.fullmatch(shape) is not None, f"{flag} expects a shape like 16x128x768, got {show(text)}")
    rank = shape.count("x") + 1
    require(op, rank <= MAX_RANK, f"{flag} has {rank} dims, at most {MAX_RANK} are supported")
    return tuple(int(part) for part in shape.split("x"))


def split_permutation(op: str, tokens: Sequence[str]) -> tuple[list[str], tuple[int, ...] | None]:
    """Take `--input-permutation` and its values out of `tokens` (BOO's argparse `nargs="*"`: every integer word
    that follows; `--input-permutation=0,2,1` in one word too). The last occurrence wins."""
    rest: list[str] = []
    perm: tuple[int, ...] | None = None
    i = 0
    while i < len(tokens):
        name, eq, inline = tokens[i].partition("=")
        if name != PERMUTATION_FLAG:
            rest.append(tokens[i])
            i += 1
            continue
        words: list[str] = []
        i += 1
        if eq:
            words = [w for w in inline.replace(",", " ").split()]
            require(op, bool(words), f"{PERMUTATION_FLAG} expects dims like 0 2 1 3, got {show(inline)}")
        else:
            while i < len(tokens) and _INT.fullmatch(tokens[i].strip()):
                words.append(tokens[i])
                i += 1
        for w in words:
            require(op, _INT.fullmatch(w.strip()) is not None,
                    f"{PERMUTATION_FLAG} expects dims like 0 2 1 3, got {show(w)}")
        require(op, len(words) <= MAX_RANK, f"{PERMUTATION_FLAG} has {len(words)} dims, at most {MAX_RANK}")
        perm = tuple(int(w) for w in words)
    return rest, perm


def parse_layernorm(op: str, dtype_name: str, tokens: Sequence[str]) -> LayerNormSignature:
    tokens, perm = split_permutation(op, tokens)
    values, spelled = parse_flags(op, tokens, LAYERNORM_FLAGS)
    use_aten = str(values["use-aten"]).strip().lower()
    require(op, use_aten in ("0", "1", "true", "false"),
            f"{spelled.get('use-aten', '--use-aten')} expects 0, 1, true or false, got {show(values['use-aten'])}")
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
        # an empty list is BOO's identity (its `input_permutation or identity`)
        input_permutation=perm or None,
    )
