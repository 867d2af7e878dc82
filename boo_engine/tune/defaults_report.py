"""What `boo-tui tune --defaults` found per op class (`Outcome` per candidate, `ClassResult` per class, the
table entry it stores) and the table it prints: each candidate's geomean time, ratio and verdict against IREE's
plain default, the winner, then why the sets without a verdict have none."""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from ..compare import Comparison
from ..cpu_defaults.rules import OpClass
from ..markdown import format_us

PLAIN = "IREE default"
SAME_KERNEL = "compiles to the same kernel as IREE's default"


@dataclass
class Outcome:
    """One flag set on one class: its comparison with IREE's plain default, or why it has none."""

    name: str
    flags: tuple[str, ...]
    comparison: Comparison | None = None
    formulation: str | None = None
    geomean_us: float | None = None
    error: str | None = None        # compile failure (the compiler's first error line), numerics, ...
    note: str | None = None         # measured but never chosen (why)
    best_only: str | None = None    # may be the best column's choice, never the per-op flags (why)
    samples: dict[str, Sequence[float]] = field(default_factory=dict, repr=False)   # per kernel, for choose()

    def describe(self) -> dict[str, Any]:
        d: dict[str, Any] = {"flags": list(self.flags)}
        if self.geomean_us is not None:
            d["geomean_us"] = round(self.geomean_us, 3)
        c = self.comparison
        if c is not None:
            d.update(ratio=round(c.ratio, 4), ci=[_round(c.ci_low), _round(c.ci_high)], verdict=str(c.verdict))
        if self.error:
            d["error"] = self.error
        if self.note:
            d["note"] = self.note
        if self.best_only:
            d["best_only"] = self.best_only
        return d


@dataclass
class ClassResult:
    cls: OpClass
    commands: list[str]
    outcomes: list[Outcome] = field(default_factory=list)   # IREE's plain default first
    winner: Outcome | None = None                           # None: not decided (the plain default failed)
    skipped: list[str] = field(default_factory=list)        # commands left out: their plain kernel failed
    #: the formulation sets' winner (the plain default when none was faster), None where none applies
    form_winner: Outcome | None = None
    #: BOO's own build won over every other candidate: the best column takes it for the class
    boo_wins: bool = False
    #: the name of the candidate the best column takes (the fastest of all)
    best_choice: str | None = None
    #: the flags the best column adds for the class: the winning formulation's, or a best-only set's
    best_flags: tuple[str, ...] = ()

    def entry(self) -> dict[str, Any]:
        assert self.winner is not None
        d = {"flags": list(self.winner.flags), "winner": self.winner.name, "commands": self.commands,
             "candidates": {o.name: o.describe() for o in self.outcomes}}
        if self.form_winner is not None:
            d["formulation"] = self.form_winner.formulation or "default"
        if self.boo_wins:
            d["build"] = "boo"
        if self.best_flags:
            d["best_flags"] = list(self.best_flags)
        return d


def _round(x: float) -> float | None:
    return round(x, 4) if math.isfinite(x) else None


def print_table(decided: list[ClassResult], candidates: list[str], out: TextIO) -> None:
    """The per-class table: class, commands, each set's geomean time, ratio and verdict, the winner; then the
    reasons of the sets that could not be measured."""
    names = [PLAIN, *candidates]
    rows = [["op class", "cmds", *names, "winner"]]
    notes: list[str] = []
    for res in decided:
        row = [str(res.cls), str(len(res.commands))]
        by_name = {o.name: o for o in res.outcomes}
        for name in names:
            o = by_name.get(name)
            row.append(_cell(o))
            if o is not None and (o.error or o.note or o.best_only):
                notes.append(f"  {res.cls} {name}: {_why(o)}")
        won = res.winner.name if res.winner else "not decided"
        row.append(won if res.best_choice in (None, won) else f"{won}; best: {res.best_choice}")
        rows.append(row)
        notes += [f"  {res.cls}: left out {s}" for s in res.skipped]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip(), file=out)
    if notes:
        print("\n".join(["", *notes]), file=out)


def _why(o: Outcome) -> str:
    """Why a set has no plain verdict in the table (its error, its note), or what it may be chosen for."""
    if o.error:
        return o.error
    if o.note:
        return o.note if o.note == SAME_KERNEL else f"not chosen: {o.note}"
    return f"the best column's only: {o.best_only}"


def _cell(o: Outcome | None) -> str:
    if o is None:
        return "-"
    if o.error:
        return "FAIL" if o.error.startswith("compile failed") else "n/a"
    if o.note == SAME_KERNEL:
        return "= " + PLAIN
    us = f"{format_us(o.geomean_us)} us"
    c = o.comparison
    return us if c is None else f"{us} {c.ratio:.2f}x {c.verdict}" + ("*" if o.note or o.best_only else "")


