"""Calls -> commands: the aten line (BOO's format), merging identical calls, and the commands file's text.

Each command is preceded by `# boo-tui: calls=N share=P% self=S%` (read back by the commands-file reader): N the
calls merged into it, P its summed time over the total the header names, S the same of its self time. Commands are
ordered by share, largest first.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..commands import CommandError, parse_command
from .miopen import miopen_line
from .trace import OpCall


def aten_line(call: OpCall) -> str:
    """`aten::NAME "<Input Dims>" "<Input type>" "<Input Strides>" "<Concrete Inputs>"`: the four lists as a
    torch-profiler chrome trace records them, each written with str(list) (Python literals)."""
    return f'{call.name} "{call.dims}" "{call.types}" "{call.strides}" "{call.concrete}"'


def command_for(call: OpCall) -> str:
    """The MIOpenDriver line where one exists and our grammar reads it back, else the aten line."""
    line = miopen_line(call)
    if line is not None:
        try:
            parse_command(line)
        except CommandError:
            line = None  # a call the grammar refuses (an invalid geometry, say) stays what torch recorded
    return line if line is not None else aten_line(call)


@dataclass
class Captured:
    """One command and the calls merged into it."""

    command: str
    calls: int = 0
    total_us: float = 0.0
    self_us: float = 0.0
    first: int = 0
    """index of its first call: ties in share keep the model's order"""


def merge(calls: Sequence[OpCall]) -> list[Captured]:
    """Identical commands merged, ordered by summed time, largest first (first call first on ties)."""
    merged: dict[str, Captured] = {}
    for i, call in enumerate(calls):
        cmd = command_for(call)
        entry = merged.setdefault(cmd, Captured(cmd, first=i))
        entry.calls += 1
        entry.total_us += call.dur_us
        entry.self_us += call.self_us
    return sorted(merged.values(), key=lambda c: (-c.total_us, c.first))


def _pct(part_us: float, total_us: float) -> str:
    return f"{100.0 * part_us / total_us:.2f}%" if total_us > 0 else "0.00%"


def render(header: Sequence[str], commands: Sequence[Captured], total_us: float) -> str:
    """The commands file: `# ` header lines, then per command its `# boo-tui:` line and the command."""
    out = [f"# {line}" if line else "#" for line in header]
    for c in commands:
        out.append(f"# boo-tui: calls={c.calls} share={_pct(c.total_us, total_us)} self={_pct(c.self_us, total_us)}")
        out.append(c.command)
    return "\n".join(out) + "\n"
