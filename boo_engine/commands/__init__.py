"""MIOpenDriver command grammar: command text -> OpSignature.

    parse_command("conv -n 2 -c 8 -H 16 -W 16 -k 8 -y 1 -x 1")      -> ConvSignature
    parse_invocation("gemm --a_w 32 --iter 5")                      -> Command (signature + timing args)
    read_commands_file("cmds.txt", extra_args=["--iter", "5"])      -> list[Command]

Every malformed command raises `CommandError` (a ValueError) with a one-line message naming the bad token;
nothing else escapes (no SystemExit, no IndexError, no torch error).
"""
from __future__ import annotations

from boo_engine.commands.command import Command, parse_command, parse_invocation
from boo_engine.commands.files import CommandLine, iter_commands_file, looks_like_commands_file, read_commands_file
from boo_engine.commands.registry import OPS
from boo_engine.commands.split import split_words
from boo_engine.errors import CommandError

__all__ = [
    "OPS",
    "Command",
    "CommandError",
    "CommandLine",
    "iter_commands_file",
    "looks_like_commands_file",
    "parse_command",
    "parse_invocation",
    "read_commands_file",
    "split_words",
]
