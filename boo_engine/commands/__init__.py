"""MIOpenDriver command grammar: command text -> OpSignature.

    parse_command("conv -n 2 -c 8 -H 16 -W 16 -k 8 -y 1 -x 1")      -> ConvSignature
    parse_invocation("gemm --a_w 32 --iter 5")                      -> Command (signature + timing args)
    read_commands_file("cmds.txt", extra_args=["--iter", "5"])      -> list[Command]

Every malformed command raises `CommandError` (a ValueError) with a one-line message naming the bad token;
nothing else escapes (no SystemExit, no IndexError, no torch error).
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Sequence

from boo_engine.commands.files import CommandLine, looks_like_commands_file, read_commands_file
from boo_engine.commands.flags import split_timing_args
from boo_engine.commands.registry import OPS, parse_op_tokens, tokenize
from boo_engine.errors import CommandError
from boo_engine.ops.base import OpSignature

__all__ = [
    "Command",
    "CommandLine",
    "CommandError",
    "OPS",
    "parse_command",
    "looks_like_commands_file",
    "parse_invocation",
    "read_commands_file",
]


@dataclass(frozen=True)
class Command:
    """One parsed command line: the kernel it describes plus the timing args that were stripped from it.

    `text` is the command without timing args (and without a leading `MIOpenDriver`), shell-quoted: what BOO
    prints and what goes in the `arguments` column of exports. `tokens` are the same words, unquoted.
    """

    signature: OpSignature
    text: str
    tokens: tuple[str, ...]
    iters: int = 100
    time: int = 1


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
