"""A small MIOpenDriver-style flag parser.

Why not argparse: argparse prints to stderr and raises SystemExit on bad input, which would take down a
dashboard or a whole batch of commands. Here every problem is a one-line `CommandError` naming the token.

Accepted forms: `--flag value`, `--flag=value`, `-x value`. Every MIOpenDriver flag takes a value, so the token
after a flag is always its value (which lets `-p -1` reach validation as "-1" instead of being read as a flag).
A flag given twice keeps its last value, so arguments appended to a command (a commands file's extra args)
override the ones written earlier.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from boo_engine.errors import CommandError

#: a flag's value: an int, float or str by its kind; None for a flag not given whose default depends on others
FlagValue = int | float | str | None


@dataclass(frozen=True)
class Flag:
    """One flag of an op's table: its long name (the key of the parsed values), short letter, value kind and
    default (None = not given, for flags whose default depends on other flags)."""

    long: str
    short: str | None
    kind: str  # "int" | "float" | "str"
    default: FlagValue


def show(token: str) -> str:
    """A token as it appears in error messages: quoted and kept to one line."""
    text = token if len(token) <= 40 else token[:37] + "..."
    return repr(text)


def _int(op: str, spelled: str, raw: str) -> int:
    if raw.isdigit() and raw.isascii() and len(raw) <= 18:   # the usual value: plain digits
        return int(raw)
    text = raw.strip()
    # plain decimal integers only (int() would also take '1_000' and ' 7 ')
    body = text[1:] if text[:1] in "+-" else text
    if not body.isascii() or not body.isdigit() or len(body) > 18:
        raise CommandError(f"{op}: {spelled} expects an integer, got {show(raw)}")
    return int(text)


def _convert(op: str, spelled: str, kind: str, raw: str) -> int | float | str:
    if kind == "int":
        return _int(op, spelled, raw)
    if kind == "float":
        try:
            value = float(raw)
        except ValueError:
            raise CommandError(f"{op}: {spelled} expects a number, got {show(raw)}") from None
        if not math.isfinite(value):
            raise CommandError(f"{op}: {spelled} expects a finite number, got {show(raw)}")
        return value
    return raw


@dataclass(frozen=True)
class _Compiled:
    """A flag table made ready for parsing: its flags by long name, by short letter and by the token that names
    them (`--name`, `-x`), and the defaults."""

    by_long: dict[str, Flag]
    by_short: dict[str, Flag]
    by_token: dict[str, Flag]
    defaults: dict[str, FlagValue]


#: id(table) -> (the table, compiled): each op's table is compiled once, not on every command (200,000 distinct
#: commands built these dicts 200,000 times). The table is kept, so its id is never reused while cached.
_COMPILED: dict[int, tuple[Sequence[Flag], _Compiled]] = {}
_COMPILED_KEPT = 64


def _compile(table: Iterable[Flag]) -> _Compiled:
    known = _COMPILED.get(id(table))
    if known is not None and known[0] is table:
        return known[1]
    flags = list(table)
    by_token = {"--" + f.long: f for f in flags}
    by_token.update({"-" + f.short: f for f in flags if f.short and len(f.short) == 1})
    compiled = _Compiled({f.long: f for f in flags}, {f.short: f for f in flags if f.short}, by_token,
                         {f.long: f.default for f in flags})
    if isinstance(table, tuple):   # immutable: safe to reuse (a list could change under us)
        if len(_COMPILED) >= _COMPILED_KEPT:
            _COMPILED.clear()
        _COMPILED[id(table)] = (table, compiled)
    return compiled


def parse_flags(op: str, tokens: Sequence[str], table: Iterable[Flag]) -> tuple[dict[str, Any], dict[str, str]]:
    """Parse `tokens` (the command without its op word) against `table`.

    Returns (values by long name with defaults filled in, the spelling the user typed for each given flag).
    The spellings let later validation name the flag as the user wrote it. Each value is a FlagValue of its
    flag's kind (the op's parser, which made the table, reads its flags by name as the types it gave them).
    """
    compiled = _compile(table)
    by_long, by_short, by_token = compiled.by_long, compiled.by_short, compiled.by_token
    values: dict[str, Any] = dict(compiled.defaults)
    spelled: dict[str, str] = {}
    i, n = 0, len(tokens)
    while i < n:
        token = tokens[i]
        flag: Flag | None = by_token.get(token)
        raw: str | None = None
        if flag is not None and i + 1 < n:   # the usual `-x value` / `--name value`
            values[flag.long] = _convert(op, token, flag.kind, tokens[i + 1])
            spelled[flag.long] = token
            i += 2
            continue
        if token.startswith("--") and len(token) > 2:
            name, eq, inline = token[2:].partition("=")
            flag = by_long.get(name)
            if flag is None:
                raise CommandError(f"{op}: unknown flag {show('--' + name)}")
            used = "--" + name
            if eq:
                raw = inline
        elif len(token) == 2 and token[0] == "-":
            flag = by_short.get(token[1])
            if flag is None:
                raise CommandError(f"{op}: unknown flag {show(token)}")
            used = token
        elif token.startswith("-") and len(token) > 2 and not _looks_numeric(token):
            raise CommandError(f"{op}: unknown flag {show(token)}")
        else:
            raise CommandError(f"{op}: unexpected argument {show(token)}")
        if raw is None:
            if i + 1 >= n:
                raise CommandError(f"{op}: {used} expects a value")
            raw = tokens[i + 1]
            i += 2
        else:
            i += 1
        values[flag.long] = _convert(op, used, flag.kind, raw)
        spelled[flag.long] = used
    return values, spelled


def _looks_numeric(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


def _family(word: str) -> str:
    """`convbfp16` -> `conv`, so timing-arg messages start like every other message of that op."""
    for suffix in ("bfp16", "fp16"):
        if word.endswith(suffix) and len(word) > len(suffix):
            return word[: -len(suffix)]
    return word


@dataclass(frozen=True)
class DriverFlag:
    """One of MIOpenDriver's own flags (not the op's): what it is called, the values it takes, what it means
    here. `values` None: any non-empty text (the solution id or name of `-S`)."""

    long: str
    short: str
    values: tuple[int, ...] | None
    meaning: str


_VERIFY = DriverFlag("verify", "V", (0, 1), "numerics check (-V 1 checks this command's numerics)")
_WALL = DriverFlag("wall", "w", (0, 1), "wall-clock timing: ignored, every kernel is timed per call")
#: MIOpenDriver's own flags per op family, beyond -t/--time and -i/--iter (which every family has), as its
#: driver/*_driver.hpp declare them: a letter means different things in different families (`-s` is conv's
#: kernel search but bnorm's --save, an op flag), so the tables are per family. Only -V has a meaning here.
DRIVER_FLAGS: dict[str, tuple[DriverFlag, ...]] = {
    "conv": (_VERIFY, DriverFlag("wall", "w", (0, 1, 2), _WALL.meaning),
             DriverFlag("search", "s", (0, 1), "MIOpen's kernel search: ignored (boo-tui tune searches IREE's)"),
             DriverFlag("solution", "S", None, "MIOpen solution id: ignored (IREE compiles its own kernel)"),
             DriverFlag("gpualloc", "G", (0, 1), "MIOpen's buffer allocation: ignored")),
    "bnorm": (_VERIFY, _WALL),
    "layernorm": (_VERIFY, _WALL),
    "gemm": (_VERIFY,),
}


#: family -> every name of its MIOpenDriver flags (`--iter`, `-i`, ...) -> "iter" | "time" | its DriverFlag; made
#: once per family, not on every command
_DRIVER_TABLES: dict[str, dict[str, str | DriverFlag]] = {}


def _driver_table(family: str) -> dict[str, str | DriverFlag]:
    table = _DRIVER_TABLES.get(family if family in DRIVER_FLAGS else "")   # "": every other word's (-i, -t)
    if table is None:
        table = {"--iter": "iter", "-i": "iter", "--time": "time", "-t": "time"}
        for entry in DRIVER_FLAGS.get(family, ()):
            table["--" + entry.long] = table["-" + entry.short] = entry
        _DRIVER_TABLES[family if family in DRIVER_FLAGS else ""] = table
    return table


@dataclass(frozen=True)
class DriverArgs:
    """A command with MIOpenDriver's own flags taken out. `verify`: the -V value, None when not given.
    `ignored`: the flags taken out that change nothing here, as typed (`-w`, `--search`), in order."""

    rest: list[str]
    iters: int = 100
    time: int = 1
    verify: int | None = None
    ignored: tuple[str, ...] = ()


def split_driver_args(tokens: Sequence[str]) -> DriverArgs:
    """Remove MIOpenDriver's own flags wherever they appear, as BOO removes its timing args before the op's
    parser sees the command; the last occurrence wins. Every family has:

    | flag | value | meaning in boo-tui |
    |---|---|---|
    | `--iter N`, `-i N` | N >= 1 (default 100) | iterations to measure (the goal unless --min-time is given) |
    | `--time 0/1`, `-t 0/1` | 0 or 1 (default 1) | IGNORED: validated and kept in `Command.time` for compatibility |
    |  |  | with MIOpenDriver (whose `-t 1` prints kernel times); boo-tui always times every kernel |

    and per family (DRIVER_FLAGS): `-V/--verify 0|1` (1: check this command's numerics), `-w/--wall`,
    conv's `-s/--search`, `-S/--solution`, `-G/--gpualloc` (validated, then ignored: `DriverArgs.ignored`)."""
    family = _family(tokens[0]) if tokens and not tokens[0].startswith("-") else "command"
    table = _driver_table(family)
    i = _first_driver_flag(tokens, table)
    if i is None:
        return DriverArgs(rest=list(tokens))
    op = _op_word(family)
    timing = {"iter": 100, "time": 1}
    verify: int | None = None
    rest: list[str] = list(tokens[:i])
    ignored: list[str] = []
    while i < len(tokens):
        token = tokens[i]
        entry = table.get(token.partition("=")[0] if token.startswith("--") else token)
        if entry is None:
            rest.append(token)
            i += 1
            continue
        name, raw, i = _flag_value(op, tokens, i)
        if isinstance(entry, str):
            timing[entry] = _timing_value(op, name, entry, raw)
        elif entry is _VERIFY:
            verify = _driver_flag_value(op, name, entry, raw)
        else:
            _driver_flag_value(op, name, entry, raw)
            if name not in ignored:
                ignored.append(name)
    return DriverArgs(rest=rest, iters=timing["iter"], time=timing["time"], verify=verify, ignored=tuple(ignored))


def _first_driver_flag(tokens: Sequence[str], table: dict[str, str | DriverFlag]) -> int | None:
    """Where the search for driver flags starts: None when no token can be one, else the first that can be."""
    if "=" in "".join(tokens):   # a `--flag=value` may be anywhere: look at every token
        return 0
    # no `--flag=value`: only a token that is a flag's name can be one
    named = table.keys() & set(tokens)
    if not named:
        return None
    return min(tokens.index(name) for name in named)   # every token before the first is the op's


def _op_word(family: str) -> str:
    """The op's word as it starts every message."""
    # quoted when it is not plain text (a token of whitespace or control characters would break the one-line error)
    return family if family.isprintable() and family.strip() == family and family else show(family)


def _flag_value(op: str, tokens: Sequence[str], i: int) -> tuple[str, str, int]:
    """The driver flag at tokens[i] -> (its name as typed, its value, the index after them)."""
    token = tokens[i]
    name, eq, inline = token.partition("=") if token.startswith("--") else (token, "", "")
    if eq:
        return name, inline, i + 1
    if i + 1 < len(tokens):
        return name, tokens[i + 1], i + 2
    raise CommandError(f"{op}: {name} expects a value")


def _timing_value(op: str, name: str, which: str, raw: str) -> int:
    """The value of `--iter` (at least 1) or `--time` (0 or 1), checked."""
    value = _int(op, name, raw)
    if which == "iter":
        if value < 1:
            raise CommandError(f"{op}: {name} must be at least 1, got {value}")
    elif value not in (0, 1):
        raise CommandError(f"{op}: {name} must be 0 or 1, got {value}")
    return value


def _driver_flag_value(op: str, name: str, flag: DriverFlag, raw: str) -> int | None:
    """The value of one of DRIVER_FLAGS, checked against its values (None for a flag that takes any text)."""
    if flag.values is None:
        if not raw.strip():
            raise CommandError(f"{op}: {name} expects a value")
        return None
    value = _int(op, name, raw)
    if value not in flag.values:
        raise CommandError(f"{op}: {name} expects {' or '.join(map(str, flag.values))}, got {value}")
    return value


def ignored_flags_note(flags: Iterable[str]) -> str:
    """The one line a run prints (once) when its commands carry MIOpenDriver flags that change nothing here."""
    return (f"MIOpenDriver flags with no meaning here are accepted and ignored: {', '.join(flags)} "
            "(-w wall-clock, -s search, -S solution, -G gpualloc: boo-tui times every call of IREE's kernel)")


def require(op: str, cond: bool, message: str) -> None:
    """Raise a CommandError `op: message` unless `cond` holds."""
    if not cond:
        raise CommandError(f"{op}: {message}")
