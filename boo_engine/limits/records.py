"""The shapes a machine's peaks travel in: the measuring process's JSON answer (measure.py, read by peaks.py) and
the rows of the results database's `peaks` table (peaks.py writes them, store/queries.py stores and reads them).

A leaf (it imports nothing of boo_engine), so the store can name these rows without importing the limits.
"""
from __future__ import annotations

from typing import NotRequired, TypedDict


class CandidateExtras(TypedDict, total=False):
    """What a measured candidate says of itself beside its figure: the matrix size of a matmul, the buffer of a
    streaming kernel, the IREE kernel's function name."""

    size: int
    buffer_bytes: int
    func_name: str


class Candidate(CandidateExtras):
    """One measured candidate (measure.py): `value` in GFLOP/s (kind compute) or GB/s (kind bandwidth, dtype None),
    from the fastest sample `best_us`; `source` says what ran."""

    kind: str
    dtype: str | None
    value: float
    source: str
    best_us: float


class Measurement(TypedDict):
    """The measuring process's answer (`python -m boo_engine.limits.measure`, one JSON line)."""

    candidates: list[Candidate]
    errors: list[str]
    seconds: float
    threads: int
    target: str


class CandidateFigure(TypedDict):
    """A candidate as a peak's details keep it: what ran and what it reached."""

    source: str
    value: float


class PeakDetails(TypedDict, total=False):
    """A peak's details (the `peaks` table's JSON column): every candidate of its kind and dtype and the errors of
    the measurement (`Peak.details`); in a stored row also the thread count, how the theoretical figures were
    derived and how long the measurement took (`Peaks.rows`)."""

    candidates: list[CandidateFigure]
    errors: list[str]
    threads: int
    basis: str
    seconds: float | None


class PeakRow(TypedDict):
    """One row of the `peaks` table (store/schema.py): one ceiling of a machine. `id` and `environment_id` are
    there in a row read back (`SELECT *`), not in one to insert."""

    machine_key: str
    target: str
    measured_at: str
    kind: str
    dtype: str | None
    value: float
    source: str | None
    theoretical: float | None
    details: PeakDetails | None
    id: NotRequired[int]
    environment_id: NotRequired[int | None]
