"""The op registry: the first token of a command picks the op family parser and the dtype."""
from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from boo_engine.commands.aten import is_aten_word, parse_aten
from boo_engine.commands.bnorm import parse_bnorm
from boo_engine.commands.conv import parse_conv
from boo_engine.commands.gemm import parse_gemm
from boo_engine.commands.layernorm import parse_layernorm
from boo_engine.commands.split import split_words
from boo_engine.errors import CommandError
from boo_engine.ops.base import OpSignature

Parser = Callable[[str, str, Sequence[str]], OpSignature]

_FAMILIES: dict[str, Parser] = {
    "conv": parse_conv,
    "layernorm": parse_layernorm,
    "gemm": parse_gemm,
    "bnorm": parse_bnorm,
}
_DTYPE_SUFFIXES = {"": "float32", "fp16": "float16", "bfp16": "bfloat16"}



@dataclass(frozen=True)
class OpEntry:
    """What an op word means: its family (`conv` for `convbfp16`), its dtype and the family's parser."""

    family: str
    dtype_name: str
    parser: Parser


#: op word -> entry; filled by `register_family`
OPS: dict[str, OpEntry] = {}


def register_family(family: str, parser: Parser) -> None:
    """Make `family`, `familyfp16` and `familybfp16` known."""
    for suffix, dtype_name in _DTYPE_SUFFIXES.items():
        OPS[family + suffix] = OpEntry(family, dtype_name, parser)


for _family, _parser in _FAMILIES.items():
    register_family(_family, _parser)


def tokenize(cmd: str | Sequence[str]) -> list[str]:
    """Shell-split a command string (a sequence of tokens is taken as is). A leading `MIOpenDriver` (as in
    MIOpen's logs) is dropped, so commands can be pasted from a log."""
    if isinstance(cmd, str):
        try:
            tokens = split_words(cmd)
        except ValueError as exc:
            raise CommandError(f"cannot split command: {exc}") from None
    else:
        tokens = [str(t) for t in cmd]
    if tokens and os.path.basename(tokens[0]) == "MIOpenDriver":
        tokens = tokens[1:]
    if not tokens:
        raise CommandError("empty command")
    return tokens


def parse_op_tokens(tokens: Sequence[str]) -> OpSignature:
    """tokens[0] is the op word, the rest its flags (timing args already removed). Error messages start with the
    op family (`conv: ...` for a convbfp16 command too), matching the signatures' own validation."""
    word = tokens[0]
    if is_aten_word(word):
        return parse_aten(word, list(tokens[1:]))
    entry = OPS.get(word)
    if entry is None:
        shown = word if len(word) <= 40 else word[:37] + "..."
        raise CommandError(f"unknown op {shown!r} (expected one of {', '.join(sorted(OPS))}, or aten::NAME)")
    # messages name the family ("conv: ..." for convbfp16 too), as the signatures' own validation does
    return entry.parser(entry.family, entry.dtype_name, list(tokens[1:]))
