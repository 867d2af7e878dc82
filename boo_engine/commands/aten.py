"""`aten::NAME "<Input Dims>" "<Input type>" "<Input Strides>" "<Concrete Inputs>"`: BOO's line for any aten op,
the four Python-literal lists exactly as a torch-profiler chrome trace records one call (see ops/aten.py for what
becomes the kernel).

    aten::mm "[[3840, 4352], [4352, 3840]]" "['c10::BFloat16', 'c10::BFloat16']" "[[1, 3840], [3840, 1]]" "['', '']"

Syntax only here (no torch): every problem is a one-line CommandError naming the list and the argument.
"""
from __future__ import annotations

import ast
import contextlib
import json
import re
from collections.abc import Sequence

from boo_engine.errors import CommandError
from boo_engine.ops.aten import NOT_RECORDED, SCALAR, SCALAR_LIST, TENSOR_LIST, TENSOR_TYPES, AtenSignature

PREFIX = "aten::"
LISTS = ("Input Dims", "Input type", "Input Strides", "Concrete Inputs")
_NON_TENSOR = {SCALAR, SCALAR_LIST, TENSOR_LIST, NOT_RECORDED}


def is_aten_word(word: str) -> bool:
    return word.startswith(PREFIX)


def _show(text: str) -> str:
    return repr(text if len(text) <= 60 else text[:57] + "...")


def _fail(name: str, message: str) -> CommandError:
    return CommandError(f"aten::{name}: {message}")


#: a list of (lists of) integers, or of plain single-quoted strings: what a trace writes, and what json / a regular
#: expression read as ast.literal_eval does, 5-10x faster (anything else goes to literal_eval)
_INT_LIST = re.compile(r"\[[\[\]0-9, -]*\]")
_STR_LIST = re.compile(r"\[ *(?:'[^'\\\n\r\0]*' *, *)*(?:'[^'\\\n\r\0]*' *,? *)?\]")
_STR_ITEM = re.compile(r"'([^'\\\n\r\0]*)'")


def _literal_list(name: str, label: str, text: str) -> list:
    source = text.strip()
    if _INT_LIST.fullmatch(source):
        with contextlib.suppress(ValueError, RecursionError, MemoryError):   # (e.g. a trailing comma, which json
            return json.loads(source)                                        # refuses: literal_eval decides)
    elif _STR_LIST.fullmatch(source):
        return _STR_ITEM.findall(source)
    try:
        value = ast.literal_eval(source)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise _fail(name, f"{label} is not a Python list literal: {_show(text)}") from None
    if not isinstance(value, list):
        raise _fail(name, f"{label} is not a list: {_show(text)}")
    return value


def _ints(name: str, label: str, i: int, value: object, *, nested: bool = False) -> tuple:
    """A shape/strides entry: a list of ints (a list of such lists for a TensorList)."""
    if not isinstance(value, (list, tuple)):
        raise _fail(name, f"{label} entry {i} is not a list: {value!r}"[:200])
    if nested:
        return tuple(_ints(name, label, i, v) for v in value)
    if not all(isinstance(d, int) and not isinstance(d, bool) for d in value):
        raise _fail(name, f"{label} entry {i} is not a list of integers: {value!r}"[:200])
    return tuple(value)


def parse_aten(word: str, tokens: Sequence[str]) -> AtenSignature:
    """`word` is `aten::NAME`; `tokens` the four quoted lists (timing args already removed)."""
    name = word[len(PREFIX):]
    if not name:
        raise CommandError("aten:: without an op name (expected e.g. aten::mm)")
    if len(tokens) != 4:
        raise _fail(name, f"expects 4 quoted lists ({', '.join(LISTS)}), got {len(tokens)} argument(s)")
    dims_l, types_l, strides_l, conc_l = (_literal_list(name, label, tok) for label, tok in zip(LISTS, tokens))
    lengths = [len(x) for x in (dims_l, types_l, strides_l, conc_l)]
    if len(set(lengths)) != 1:
        shown = ", ".join(f"{label} {n}" for label, n in zip(LISTS, lengths))
        raise _fail(name, f"the four lists differ in length ({shown})")
    types: list[str] = []
    dims: list[tuple] = []
    strides: list[tuple] = []
    concrete: list[str] = []
    for i, (d, t, s, c) in enumerate(zip(dims_l, types_l, strides_l, conc_l)):
        if not isinstance(t, str):
            raise _fail(name, f"Input type entry {i} is not a string: {t!r}"[:200])
        t = t.strip()
        if t in TENSOR_TYPES:
            norm = TENSOR_TYPES[t]
        elif t in _NON_TENSOR:
            norm = t
        else:
            raise _fail(name, f"argument {i} has type {t!r}, which cannot be built (tensor types: float, double, "
                              "c10::Half, c10::BFloat16, long int, int, bool; or Scalar, ScalarList, TensorList, '')")
        nested = norm == TENSOR_LIST
        dims.append(_ints(name, "Input Dims", i, d, nested=nested))
        strides.append(_ints(name, "Input Strides", i, s, nested=nested))
        if c is None:
            c = "None"
        if not isinstance(c, (str, int, float, bool)):
            raise _fail(name, f"Concrete Inputs entry {i} is not a string: {c!r}"[:200])
        types.append(norm)
        concrete.append(str(c).strip())
    return AtenSignature(name=name, dims=tuple(dims), types=tuple(types), strides=tuple(strides),
                         concrete=tuple(concrete))


def aten_text(tokens: Sequence[str]) -> str | None:
    """BOO's own spelling of an aten line (each list in double quotes), or None when a list holds a character
    that double quotes do not keep (then the caller shell-quotes)."""
    if len(tokens) != 5 or not is_aten_word(tokens[0]):
        return None
    if any(ch in tok for tok in tokens[1:] for ch in '"\\$`'):
        return None
    return " ".join([tokens[0]] + [f'"{tok}"' for tok in tokens[1:]])
