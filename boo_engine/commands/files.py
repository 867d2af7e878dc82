"""Commands files: one MIOpenDriver command per line.

`.tsv` lines are split on tabs (a spreadsheet column per token), anything else shell-style (shlex). `#` starts a
comment line; blank lines are skipped. `extra_args` are appended to every line, so a command-line `--iter 5`
overrides the file's own (the last occurrence of a flag wins).
"""
from __future__ import annotations

import os
from collections.abc import Sequence
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


def _split_line(line: str, tsv: bool) -> list[str]:
    if tsv:
        return [tok.strip() for tok in line.split("\t") if tok.strip()]
    try:
        return split_words(line)
    except ValueError as exc:
        raise CommandError(f"cannot split line: {exc}") from None


def _read_lines(path: str | os.PathLike[str]) -> list[str]:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read().splitlines()
    except FileNotFoundError:
        raise CommandError(f"commands file not found: {os.fspath(path)}") from None
    except IsADirectoryError:
        raise CommandError(f"commands file is a directory: {os.fspath(path)}") from None
    except UnicodeDecodeError:
        raise CommandError(f"commands file is not UTF-8 text: {os.fspath(path)}") from None
    except OSError as exc:
        raise CommandError(f"cannot read commands file {os.fspath(path)}: {exc.strerror or exc}") from None


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
    show the bad lines next to the good ones.
    A missing or unreadable file raises CommandError naming the path in both modes.
    """
    if errors not in ("raise", "collect"):
        raise ValueError(f"errors must be 'raise' or 'collect', got {errors!r}")
    tsv = os.fspath(path).lower().endswith(".tsv")
    extra = [str(a) for a in extra_args]
    out: list = []
    for number, raw in enumerate(_read_lines(path), start=1):
        text = raw.strip()
        if not text or text.startswith("#"):
            continue
        source = f"{os.fspath(path)}:{number}"
        try:
            command = parse_invocation(_split_line(text, tsv) + extra)
        except CommandError as exc:
            if errors == "raise":
                raise CommandError(f"{source}: {exc}") from None
            out.append(CommandLine(source=source, text=elide(text), command=None, error=str(exc)))
            continue
        out.append(command if errors == "raise" else CommandLine(source, text, command, None))
    return out
