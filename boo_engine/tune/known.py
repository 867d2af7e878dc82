"""The tune's winner against the kernel's BEST KNOWN configuration on this machine (the `best` column's: a finished
tune's winner for it, else the `tune --defaults` table, else the rules; variants/best.py), not only against the
plain build the search starts from.

A winner 0.15x of the plain build may be exactly what the best column already picks, and a winner slower than what
the best column picks would, once written, REPLACE that kernel in the best column (store/tuned.py takes a finished
tune's winner first): so the verification measures the best known kernel too, interleaved with the winner, and a
winner significantly slower than it is not emitted.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ..compare import Comparison, Verdict
from ..variants import BEST

if TYPE_CHECKING:
    from ..session import Session

#: the variant name of a kernel's best known configuration in a tune's session (one per kernel: `known-<index>`)
KNOWN_PREFIX = "known-"


def add_known_job(session: Session, func_name: str, command: str, index: int) -> str | None:
    """A job measuring kernel `func_name` (command text `command`) in its best known configuration: the best
    column's marker scoped to this one kernel (resolved when it compiles, as the best column is). None where the
    best column knows nothing of its own (a GPU target: its best is the plain build) or the job could not be
    added."""
    if session.target.kind != "cpu":
        return None
    variant = dataclasses.replace(BEST, name=f"{KNOWN_PREFIX}{index}", kernels=(func_name,))
    jobs = [j for j in session.add_variant(variant) if j.command == command]
    return jobs[0].job_id if jobs else None


def against_known(winner_vs_known: Comparison | None, known_note: str = "") -> tuple[bool, str]:
    """(whether the winner may be emitted, what to add to its message), given the winner measured against the best
    known kernel (`winner_vs_known`: winner / known, interleaved; None when the known kernel gave no measurement,
    `known_note` then says why)."""
    if winner_vs_known is None:
        return True, f"; the best known kernel: {known_note or 'not measured'}"
    c = winner_vs_known
    figures = f"{c.ratio:.3f}x [{c.ci_low:.3f}, {c.ci_high:.3f}]"
    if c.verdict == Verdict.SLOWER:
        return False, (f"but {figures} of the best known kernel, significantly slower: not emitted (the best "
                       f"column keeps the kernel it has)")
    if c.verdict == Verdict.FASTER:
        return True, f"; against the best known kernel: {figures}, faster"
    return True, (f"; against the best known kernel: {figures} ({c.verdict}): no better than what the best column "
                  f"already picks")
