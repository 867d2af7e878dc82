"""`OpCall`: one call of an op as a profiler trace recorded it, the record every capture module shares (trace reads
them from a chrome trace, classify tells compute from bookkeeping, lines and miopen write command lines of them)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class OpCall:
    """One call of an op as the trace recorded it: the four per-call lists of a chrome trace (record_shapes=True)
    and its total and self time (total less its direct children's) in microseconds."""

    name: str
    dims: list[Any]
    types: list[str]
    strides: list[Any]
    concrete: list[str]
    dur_us: float
    self_us: float
    step: int = 0
    """which `ProfilerStep#` of the trace it ran in (0 when the trace has no steps)"""
