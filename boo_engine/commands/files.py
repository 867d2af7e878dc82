"""Commands files: one MIOpenDriver command per line.

`.tsv` lines are split on tabs (a spreadsheet column per token), anything else shell-style (shlex). `#` starts a
comment line; blank lines are skipped. `extra_args` are appended to every line, so a command-line `--iter 5`
overrides the file's own (the last occurrence of a flag wins).

Weights: a comment `# boo-tui: calls=12 share=8.31% us=456.7` (what `boo-tui capture` writes) gives the NEXT
command line its weight in the model it was captured from: `calls` (an int >= 1: how often the model called the
kernel), `share` (its share of the capture's compute total, percent, 0-100, the `%` optional; a file captured
before the compute total took shares of the model's eager time) and, optionally, `us` (the time those calls took in
the capture, microseconds >= 0: what the model line compares the measured sum with); calls and share are required,
other `key=value` items are ignored (captures may add some). A malformed weight line is a bad line like any other
(`path:LINE: ...`); any other `#` line stays a comment.
"""
from __future__ import annotations

import codecs
import dataclasses
import math
import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, overload

from boo_engine.commands.command import Command, parse_invocation
from boo_engine.commands.split import split_words
from boo_engine.errors import CommandError, elide


@dataclass(frozen=True)
class CommandLine:
    """One non-comment line of a commands file, parsed or not (for errors="collect")."""

    source: str  # "path:LINE"
    text: str  # the line as written (stripped)
    command: Command | None
    error: str | None
    calls: int | None = None     # the weight its `# boo-tui:` line gave (kept for a line that does not parse)
    share: float | None = None
    captured_us: float | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def message(self) -> str | None:
        """The error as a user sees it, naming where: `path:LINE: message` (None for a good line)."""
        return None if self.error is None else f"{self.source}: {self.error}"


def looks_like_commands_file(item: str) -> bool:
    """Whether a command-line input names a commands file rather than being a command: any *.txt / *.tsv (so a
    missing file is reported as such), or an existing path with no spaces in it."""
    if item.endswith((".txt", ".tsv")):
        return True
    if " " in item.strip():
        return False
    return Path(item).is_file()


#: the comment that gives the next command its weight (see the module docstring)
WEIGHT_PREFIX = "# boo-tui:"


@dataclass(frozen=True)
class Weight:
    """A command's weight in the model it was captured from."""

    calls: int        # >= 1
    share: float      # percent of the capture's compute total (of the model's eager time in older files), 0-100
    us: float | None = None   # the calls' time in the capture, microseconds (None: the line gives none)


def is_weight_line(text: str) -> bool:
    return text.startswith(WEIGHT_PREFIX)


def parse_weight(text: str) -> Weight:
    """`# boo-tui: calls=12 share=8.31% self=3.10% us=456.7` -> Weight(12, 8.31, 456.7); CommandError naming what is
    wrong."""
    items: dict[str, str] = {}
    for item in text[len(WEIGHT_PREFIX):].split():
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise CommandError(f"weight line: {item!r} is not key=value")
        items.setdefault(key, value)
    if "calls" not in items or "share" not in items:
        missing = " and ".join(k for k in ("calls", "share") if k not in items)
        raise CommandError(f"weight line: no {missing} (expected `{WEIGHT_PREFIX} calls=N share=P%`)")
    try:
        calls = int(items["calls"])
    except ValueError:
        calls = 0
    if calls < 1:
        raise CommandError(f"weight line: calls={elide(items['calls'], 20)} is not an integer >= 1")
    raw = items["share"].removesuffix("%")
    try:
        share = float(raw)
    except ValueError:
        share = math.nan
    if not (math.isfinite(share) and 0.0 <= share <= 100.0):
        raise CommandError(f"weight line: share={elide(items['share'], 20)} is not a percentage between 0 and 100")
    us = None
    if "us" in items:
        try:
            us = float(items["us"])
        except ValueError:
            us = math.nan
        if not (math.isfinite(us) and us >= 0.0):
            raise CommandError(f"weight line: us={elide(items['us'], 20)} is not a time in microseconds >= 0")
    return Weight(calls, share, us)


def _split_line(line: str, tsv: bool) -> list[str]:
    if tsv:
        return [tok.strip() for tok in line.split("\t") if tok.strip()]
    try:
        return split_words(line)
    except ValueError as exc:
        raise CommandError(f"cannot split line: {exc}") from None


def _read_lines(path: str | os.PathLike[str]) -> Iterator[str]:
    """The file's lines (as str.splitlines cuts them), a line at a time: a file of 200,000 lines is never held.
    The whole file is checked to be UTF-8 first (a block at a time), so a bad byte anywhere refuses the file before
    its first line is planned, as reading it whole did. What is not a regular file (a pipe: `<(...)`) can be read
    only once: it is read whole."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            with open(path, encoding="utf-8-sig") as fh:
                yield from fh.read().splitlines()
            return
        decoder = codecs.getincrementaldecoder("utf-8")()
        with open(path, "rb") as fh:
            while block := fh.read(1 << 20):
                decoder.decode(block)
            decoder.decode(b"", final=True)
        with open(path, encoding="utf-8-sig") as fh:   # a BOM (as some Windows editors write) is not part of line 1
            for line in fh:
                yield from line.splitlines()
    except FileNotFoundError:
        raise CommandError(f"commands file not found: {os.fspath(path)}") from None
    except IsADirectoryError:
        raise CommandError(f"commands file is a directory: {os.fspath(path)}") from None
    except UnicodeDecodeError:
        raise CommandError(f"commands file is not UTF-8 text: {os.fspath(path)}") from None
    except OSError as exc:
        raise CommandError(f"cannot read commands file {os.fspath(path)}: {exc.strerror or exc}") from None


def _weight_of(text: str, source: str) -> tuple[Weight | None, CommandLine | None]:
    """A weight line's weight, or the bad line it is."""
    try:
        return parse_weight(text), None
    except CommandError as exc:
        return None, CommandLine(source=source, text=elide(text), command=None, error=str(exc))


#: distinct lines whose parse is remembered at most (then forgotten all at once): copies of a line share one
#: Command, and a file of 200,000 distinct lines must not keep a second table of them all while it is read
#: (65,536 of them, ~2 KB a conv's Command, were most of a spooled 200,000-line run's memory: session/spool.py)
SEEN_KEPT = 4096


def iter_commands_file(path: str | os.PathLike[str], extra_args: Sequence[str] = (), *,
                       after: int = 0) -> Iterator[CommandLine]:
    """`read_commands_file(path, extra_args, errors="collect")` a line at a time: a caller that keeps what it
    makes of each line (a session's jobs) never holds every line's CommandLine as well. A missing or unreadable
    file raises CommandError naming the path when the first line is asked for. The lines numbered `after` or
    less are read but not given (nor parsed): a caller that has them already (session/reader.py)."""
    tsv = os.fspath(path).lower().endswith(".tsv")
    extra = [str(a) for a in extra_args]
    weight: Weight | None = None   # the last weight line's, for the next command line only
    #: a line seen before -> its Command (immutable: its copies share it) or its error; a model's capture repeats
    #: lines, and 200,000 copies of one line were parsed 200,000 times and held 200,000 equal Commands
    seen: dict[str, Command | str] = {}
    for number, raw in enumerate(_read_lines(path), start=1):
        text = raw.strip()
        if not text:
            continue
        source = f"{os.fspath(path)}:{number}"
        if is_weight_line(text):
            weight, bad = _weight_of(text, source)
            if bad is not None and number > after:
                yield bad
            continue
        if text.startswith("#"):
            continue
        if number <= after:
            weight = None
            continue
        calls, share, captured_us = (weight.calls, weight.share, weight.us) if weight is not None \
            else (None, None, None)
        weight = None
        parsed = seen.get(text)
        if parsed is None:
            try:
                parsed = parse_invocation(_split_line(text, tsv) + extra)
            except CommandError as exc:
                parsed = str(exc)
            if len(seen) >= SEEN_KEPT:
                seen.clear()
            seen[text] = parsed
        if isinstance(parsed, str):
            yield CommandLine(source=source, text=elide(text), command=None, error=parsed, calls=calls, share=share,
                              captured_us=captured_us)
            continue
        command = parsed
        if calls is not None:
            command = dataclasses.replace(command, calls=calls, share=share, captured_us=captured_us)
        yield CommandLine(source, text, command, None, calls, share, captured_us)


@overload
def read_commands_file(path: str | os.PathLike[str], extra_args: Sequence[str] = (),
                       errors: Literal["raise"] = "raise") -> list[Command]: ...
@overload
def read_commands_file(path: str | os.PathLike[str], extra_args: Sequence[str] = (), *,
                       errors: Literal["collect"]) -> list[CommandLine]: ...
@overload
def read_commands_file(path: str | os.PathLike[str], extra_args: Sequence[str],
                       errors: Literal["collect"]) -> list[CommandLine]: ...


def read_commands_file(path, extra_args=(), errors="raise"):
    """Parse every command of a file.

    errors="raise": return list[Command]; the first bad line raises CommandError `path:LINE: message`.
    errors="collect": return list[CommandLine] for every non-comment line, good and bad, so a dashboard can
    show the bad lines next to the good ones (a malformed `# boo-tui:` weight line is such a bad line).
    A command after a `# boo-tui:` weight line carries its `calls`, `share` and `captured_us` (None without one).
    A missing or unreadable file raises CommandError naming the path in both modes.
    """
    if errors not in ("raise", "collect"):
        raise ValueError(f"errors must be 'raise' or 'collect', got {errors!r}")
    if errors == "collect":
        return list(iter_commands_file(path, extra_args))
    out: list[Command] = []
    for line in iter_commands_file(path, extra_args):
        if line.command is None:
            raise CommandError(f"{line.source}: {line.error}")
        out.append(line.command)
    return out
