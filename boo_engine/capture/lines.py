"""Calls -> commands: the aten line (BOO's format), merging identical calls, and the commands file's text.

Each command is preceded by `# boo-tui: calls=N share=P% self=S% us=T` (read back by the commands-file reader): N
the calls merged into it, T their profiled time in microseconds, P that time's part of the compute total (the sum of
T over every command of the file: every compute call the region made), S the same of its self time. Commands are
ordered by share, largest first.
"""
from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from ..commands import CommandError, parse_command
from .calls import OpCall
from .miopen import miopen_line


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

    With `steps` > 1 (a model recorded over several identical passes, one `ProfilerStep#` each) a command stands
    for one pass: its calls are the median over the passes of its calls a pass (at least 1), and its time is, call
    by call (the k-th call of the command in each pass), the least over the passes, summed. A call's profiled time
    only grows when the thread loses its core meanwhile (on a loaded 2-core host one pass's compute total was
    6.0 ms, another's 28.9 ms, with the same calls), so the least is the call's own time; the median over nine
    passes still read an 85 us softmax backward as 1,004 us. Passes with fewer calls of the command (a
    data-dependent branch) are left out of its figures."""
    per_step: dict[str, list[list[OpCall]]] = {}
    first: dict[str, int] = {}
    known: dict[str, str] = {}  # the aten line says everything about the call: its command is computed once
    for i, call in enumerate(calls):
        key = aten_line(call)
        cmd = known.get(key)
        if cmd is None:
            cmd = known[key] = command_for(call)
        first.setdefault(cmd, i)
        per_step.setdefault(cmd, [[] for _ in range(steps)])[min(call.step, steps - 1)].append(call)
    merged = []
    for cmd, rows in per_step.items():
        n = max(1, round(statistics.median(len(r) for r in rows)))
        usable = [r[:n] for r in rows if len(r) >= n]   # never empty: the longest row has >= the median
        merged.append(Captured(cmd, calls=n, first=first[cmd],
                               total_us=sum(min(r[k].dur_us for r in usable) for k in range(n)),
                               self_us=sum(min(r[k].self_us for r in usable) for k in range(n))))
    return sorted(merged, key=lambda c: (-c.total_us, c.first))


def compute_total(commands: Sequence[Captured]) -> float:
    """The compute total shares are of: the profiled time of every command (every compute call) of the file."""
    return sum(c.total_us for c in commands)


def _pct(part_us: float, total_us: float) -> str:
    return f"{100.0 * part_us / total_us:.2f}%" if total_us > 0 else "0.00%"


def render(header: Sequence[str], commands: Sequence[Captured]) -> str:
    """The commands file: `# ` header lines, then per command its `# boo-tui:` line and the command."""
    total_us = compute_total(commands)
    out = [f"# {line}" if line else "#" for line in header]
    for c in commands:
        out.append(f"# boo-tui: calls={c.calls} share={_pct(c.total_us, total_us)} self={_pct(c.self_us, total_us)} "
                   f"us={c.total_us:.1f}")
        out.append(c.command)
    return "\n".join(out) + "\n"
