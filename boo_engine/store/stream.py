"""A run read back a chunk at a time, in the order its rows were stored (`results.id`).

What a run too big to hold in memory (session/spool.py) is measured and exported from: its queued jobs come back
a window at a time to be measured (`queued_rows`), and its results a chunk at a time to be exported
(`result_chunk`). Each read is one indexed query (`idx_results_status` for the queued ones, the primary key for
the rest) on the caller's connection.
"""
from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from ..results import DONE, QUEUED, JobResult
from .queries import RESULT_SELECT, samples_by_result
from .rows import job_result_from_row


@dataclass(frozen=True, slots=True)
class QueuedRow:
    """A stored job that has not run: enough to plan it again under its own id."""

    row_id: int
    job_id: str
    command: str
    variant: str
    backend: str
    source: str | None
    calls: int | None
    share: float | None
    captured_us: float | None


_QUEUED = """
SELECT r.id, r.job_id, c.text, v.name, r.backend, r.source, r.calls, r.share, r.captured_us
FROM results r
JOIN commands c ON c.id = r.command_id
JOIN variants v ON v.id = r.variant_id
WHERE r.run_id = ? AND r.status = ? AND r.id > ?
ORDER BY r.id
LIMIT ?
"""

#: (`+r.run_id`: not through idx_results_status, which would sort all the run's rows for each chunk: a walk of
#: the primary key from `r.id > ?` instead)
_CHUNK = RESULT_SELECT.replace("WHERE r.run_id = ?", "WHERE r.id > ? AND +r.run_id = ?") + "LIMIT ?"


def queued_rows(conn: sqlite3.Connection, run_id: int, after: int, limit: int) -> list[QueuedRow]:
    """Up to `limit` of the run's queued jobs stored after row `after`, in order."""
    return [QueuedRow(*row) for row in conn.execute(_QUEUED, (run_id, QUEUED, after, limit))]


def result_chunk(conn: sqlite3.Connection, run_id: int, after: int, limit: int) -> list[tuple[int, JobResult]]:
    """Up to `limit` of the run's results stored after row `after`, in order, each rebuilt completely (samples
    included) with its row id."""
    rows = conn.execute(_CHUNK, (after, run_id, limit)).fetchall()
    if not rows:
        return []
    samples, cpu = samples_by_result(conn.execute(
        "SELECT s.result_id, s.latency_us, s.cpu_us FROM samples s JOIN results r ON r.id = s.result_id"
        " WHERE s.result_id BETWEEN ? AND ? AND +r.run_id = ? ORDER BY s.result_id, s.idx",
        (rows[0]["id"], rows[-1]["id"], run_id)))
    return [(r["id"], job_result_from_row(dict(r), samples.get(r["id"], []), cpu.get(r["id"]))) for r in rows]


def unsucceeded(conn: sqlite3.Connection, run_id: int) -> int:
    """The run's results that are not done, or whose numerics check failed."""
    return int(conn.execute("SELECT COUNT(*) FROM results WHERE run_id = ? AND (status != ? OR numerics = 'fail')",
                            (run_id, DONE)).fetchone()[0])


def status_count(conn: sqlite3.Connection, run_id: int, status: str) -> int:
    """The run's results whose status is `status`."""
    return int(conn.execute("SELECT COUNT(*) FROM results WHERE run_id = ? AND status = ?",
                            (run_id, status)).fetchone()[0])
