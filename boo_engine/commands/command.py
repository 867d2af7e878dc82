"""One MIOpenDriver command line -> `Command` (the kernel's signature plus the timing args stripped from it)."""
from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from boo_engine.commands.flags import split_timing_args
from boo_engine.commands.registry import parse_op_tokens, tokenize
from boo_engine.errors import CommandError
from boo_engine.ops.base import OpSignature


@dataclass(frozen=True)
class Command:
    """One parsed command line: the kernel it describes plus the timing args that were stripped from it.

    `text` is the command without timing args (and without a leading `MIOpenDriver`), shell-quoted: what BOO
    prints and what goes in the `arguments` column of exports. `tokens` are the same words, unquoted.
    `iters` is MIOpenDriver's `--iter`/`-i` (the default measuring goal). `time` is MIOpenDriver's `-t/--time`
    (0 or 1: whether MIOpenDriver prints kernel times): accepted for compatibility and otherwise IGNORED, since
    boo-tui always times every kernel.
    `calls` / `share`: the command's weight in the model it was captured from, from the `# boo-tui: calls=N
    share=P%` line before it in a commands file (`files.py`): how many times the model called the kernel (>= 1)
    and its share of the model's eager time in percent. None when the file gives none.
    """

    signature: OpSignature
    text: str
    tokens: tuple[str, ...]
    iters: int = 100
    time: int = 1
    calls: int | None = None
    share: float | None = None


def parse_invocation(cmd: str | Sequence[str]) -> Command:
    """Parse a full command line, timing args included."""
    tokens = tokenize(cmd)
    rest, iters, time = split_timing_args(tokens)
    if not rest:
        raise CommandError("command has no op (only timing args)")
    signature = parse_op_tokens(rest)
    return Command(signature=signature, text=shlex.join(rest), tokens=tuple(rest), iters=iters, time=time)


def parse_command(cmd: str | Sequence[str]) -> OpSignature:
    """Parse a command line into its kernel's signature (timing args accepted and ignored)."""
    return parse_invocation(cmd).signature
