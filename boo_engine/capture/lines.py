"""Calls -> commands: the aten line (BOO's format), merging identical calls, and the commands file's text.

Each command is preceded by `# boo-tui: calls=N share=P% self=S%` (read back by the commands-file reader): N the
calls merged into it, P its summed time over the total the header names, S the same of its self time. Commands are
ordered by share, largest first.
"""
from __future__ import annotations

import statistics
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


def merge(calls: Sequence[OpCall], steps: int = 1) -> list[Captured]:
    """Identical commands merged, ordered by summed time, largest first (first call first on ties).

    With `steps` > 1 (a model recorded over several identical passes, one `ProfilerStep#` each), a command's calls,
    time and self time are the median over the passes of its per-pass sums: one pass's figures, with the noise of
    a loaded machine damped (on our shared 2-core host single recorded passes differed by 10x)."""
    per_step: dict[str, list[Captured]] = {}
    first: dict[str, int] = {}
    known: dict[str, str] = {}  # the aten line says everything about the call: its command is computed once
    for i, call in enumerate(calls):
        key = aten_line(call)
        cmd = known.get(key)
        if cmd is None:
            cmd = known[key] = command_for(call)
        first.setdefault(cmd, i)
        rows = per_step.setdefault(cmd, [Captured(cmd) for _ in range(steps)])
        row = rows[min(call.step, steps - 1)]
        row.calls += 1
        row.total_us += call.dur_us
        row.self_us += call.self_us
    merged = [Captured(cmd, calls=round(statistics.median(r.calls for r in rows)),
                       total_us=statistics.median(r.total_us for r in rows),
                       self_us=statistics.median(r.self_us for r in rows), first=first[cmd])
              for cmd, rows in per_step.items()]
    return sorted(merged, key=lambda c: (-c.total_us, c.first))


def _pct(part_us: float, total_us: float) -> str:
    return f"{100.0 * part_us / total_us:.2f}%" if total_us > 0 else "0.00%"


def render(header: Sequence[str], commands: Sequence[Captured], total_us: float) -> str:
    """The commands file: `# ` header lines, then per command its `# boo-tui:` line and the command."""
    out = [f"# {line}" if line else "#" for line in header]
    for c in commands:
        out.append(f"# boo-tui: calls={c.calls} share={_pct(c.total_us, total_us)} self={_pct(c.self_us, total_us)}")
        out.append(c.command)
    return "\n".join(out) + "\n"
