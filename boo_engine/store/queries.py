"""Read queries. Each takes its own sqlite3 connection (readers never share the writer's), so any thread
may call them while results are being written (WAL: readers see the last committed state, never wait)."""
from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import Any

from ..limits.records import PeakRow
from ..results import DONE, FAILED, JobResult
from .owner import RunOwner, effective_status, owner_of
from .rows import job_result_from_row, loads

_RUN_SELECT = """
SELECT runs.*, e.host AS host, e.cpu AS cpu, e.gpu AS gpu,
       (SELECT COUNT(*) FROM results r WHERE r.run_id = runs.id) AS n_results,
       (SELECT COUNT(*) FROM results r WHERE r.run_id = runs.id AND r.status = 'done') AS ok,
       (SELECT COUNT(*) FROM results r WHERE r.run_id = runs.id AND r.status = 'failed') AS failed
FROM runs LEFT JOIN environments e ON e.id = runs.environment_id
"""

RESULT_SELECT = """
SELECT r.*, c.text AS command, c.op AS op, v.name AS variant,
       k.artifact, k.cache_key, k.compile_seconds, k.cache_hit, k.compiler_version, k.num_dispatches,
       k.compile_command, k.compile_error, k.spec_applied, k.build, k.chosen_by
FROM results r
JOIN commands c ON c.id = r.command_id
JOIN variants v ON v.id = r.variant_id
LEFT JOIN kernels k ON k.id = r.kernel_id
WHERE r.run_id = ?
ORDER BY r.id
"""


#: newest first by when each run started (in UTC: runs merged from machines in other time zones carry their
#: offsets); ids follow the order databases were merged in, so a merge listed an older machine's runs first
NEWEST_FIRST = "julianday(runs.started_at) DESC, runs.id DESC"


class RunRow(RunOwner):
    """A run as `_RUN_SELECT` reads it: the columns of `runs` in their order (`config` parsed), its machine's
    host, CPU and GPU, its results counted, and the status it was stored with. A migration that adds a column to
    `runs` adds it here and in `_run_dict`."""

    id: int
    started_at: str                   # ISO-8601 UTC
    finished_at: str | None
    status: str                       # as it stands: a `running` run whose process died here is interrupted
    command_line: str | None
    tool_version: str | None
    target: str | None
    config: dict[str, Any] | None     # the run's settings, as the session stored them (JSON)
    environment_id: int | None
    host: str | None
    cpu: str | None
    gpu: str | None
    n_results: int
    ok: int                           # results done
    failed: int
    stored_status: str                # as the row says


class RunInfo(RunRow):
    """One run (`run_info`): its row and the environment it was measured in (`collect_environment()`'s dict)."""

    environment: dict[str, Any] | None


def _run_dict(row: sqlite3.Row) -> RunRow:
    """A run row; `status` as it stands (a `running` run whose process died here is interrupted), and
    `stored_status` as the row says. The keys in the order of the row's columns (`runs.*` first): an export of
    the run lists them so."""
    owner = owner_of(row)
    return {"id": row["id"], "started_at": row["started_at"], "finished_at": row["finished_at"],
            "status": effective_status(str(row["status"]), owner), "command_line": row["command_line"],
            "tool_version": row["tool_version"], "target": row["target"], "config": loads(row["config"]),
            "environment_id": row["environment_id"], "owner_pid": owner["owner_pid"],
            "owner_host": owner["owner_host"], "owner_started": owner["owner_started"], "host": row["host"],
            "cpu": row["cpu"], "gpu": row["gpu"], "n_results": row["n_results"], "ok": row["ok"],
            "failed": row["failed"], "stored_status": row["status"]}


def list_runs(conn: sqlite3.Connection, limit: int) -> list[RunRow]:
    rows = conn.execute(_RUN_SELECT + f" ORDER BY {NEWEST_FIRST} LIMIT ?", (limit,)).fetchall()
    return [_run_dict(r) for r in rows]


def run_info(conn: sqlite3.Connection, run_id: int) -> RunInfo | None:
    row = conn.execute(_RUN_SELECT + " WHERE runs.id = ?", (run_id,)).fetchone()
    if row is None:
        return None
    d = _run_dict(row)
    env = None
    if d["environment_id"] is not None:
        erow = conn.execute("SELECT details FROM environments WHERE id = ?", (d["environment_id"],)).fetchone()
        env = loads(erow["details"]) if erow else None
    return {**d, "environment": env}


def load_results(conn: sqlite3.Connection, run_id: int) -> list[JobResult]:
    rows = conn.execute(RESULT_SELECT, (run_id,)).fetchall()
    samples, cpu = samples_by_result(conn.execute(
        "SELECT s.result_id, s.latency_us, s.cpu_us FROM samples s JOIN results r ON r.id = s.result_id "
        "WHERE r.run_id = ? ORDER BY s.result_id, s.idx",
        (run_id,),
    ))
    return [job_result_from_row(dict(r), samples.get(r["id"], []), cpu.get(r["id"])) for r in rows]


def samples_by_result(
        cur: Iterable[tuple[int, float, float | None]]) -> tuple[dict[int, list[float]], dict[int, list[float]]]:
    """(result id, latency, CPU time) rows in order -> each result's samples, and its CPU times where read."""
    samples: dict[int, list[float]] = {}
    cpu: dict[int, list[float]] = {}
    for result_id, latency, cpu_us in cur:
        samples.setdefault(result_id, []).append(latency)
        if cpu_us is not None:
            cpu.setdefault(result_id, []).append(cpu_us)
    return samples, cpu


def finished_job_ids(conn: sqlite3.Connection, run_id: int) -> set[str]:
    rows = conn.execute(
        "SELECT job_id FROM results WHERE run_id = ? AND status IN (?, ?)", (run_id, DONE, FAILED)
    ).fetchall()
    return {r[0] for r in rows}


def run_commands(conn: sqlite3.Connection,
                 run_id: int) -> list[tuple[str, str | None, int | None, float | None, float | None]]:
    """The run's commands as recorded with its results, in the order first recorded: (text, source, calls,
    share, captured_us) (the weights None when the commands file gave none)."""
    rows = conn.execute(
        "SELECT c.text, MIN(r.source), MAX(r.calls), MAX(r.share), MAX(r.captured_us) FROM results r"
        " JOIN commands c ON c.id = r.command_id WHERE r.run_id = ? GROUP BY c.text ORDER BY MIN(r.id)",
        (run_id,)).fetchall()
    return [(r[0], r[1], r[2], r[3], r[4]) for r in rows]


def last_run_id(conn: sqlite3.Connection) -> int | None:
    """The run that started last (not the highest id: see NEWEST_FIRST)."""
    row = conn.execute(f"SELECT id FROM runs ORDER BY {NEWEST_FIRST} LIMIT 1").fetchone()
    return row[0] if row else None


_PEAK_COLUMNS = ("machine_key", "target", "measured_at", "kind", "dtype", "value", "source", "theoretical", "details")


def peaks(conn: sqlite3.Connection, machine_key: str, target: str) -> list[PeakRow]:
    """The newest row of each (kind, dtype) stored for the machine: a raised peak is a newer row than the one
    it replaces."""
    rows = conn.execute(
        "SELECT * FROM peaks WHERE machine_key = ? AND target = ? ORDER BY id DESC", (machine_key, target)).fetchall()
    newest: dict[tuple[str, str | None], PeakRow] = {}
    for r in rows:
        d = PeakRow(id=r["id"], machine_key=r["machine_key"], target=r["target"], environment_id=r["environment_id"],
                    measured_at=r["measured_at"], kind=r["kind"], dtype=r["dtype"], value=r["value"],
                    source=r["source"], theoretical=r["theoretical"], details=loads(r["details"]))
        newest.setdefault((d["kind"], d["dtype"]), d)
    return list(newest.values())


def insert_peaks(conn: sqlite3.Connection, rows: list[PeakRow], run_id: int | None) -> None:
    import json

    env_id = None
    if run_id is not None:
        found = conn.execute("SELECT environment_id FROM runs WHERE id = ?", (run_id,)).fetchone()
        env_id = found[0] if found else None
    for row in rows:
        values = [json.dumps(row.get(c)) if c == "details" else row.get(c) for c in _PEAK_COLUMNS]
        conn.execute(f"INSERT INTO peaks ({', '.join(_PEAK_COLUMNS)}, environment_id) "
                     f"VALUES ({', '.join('?' * len(_PEAK_COLUMNS))}, ?)", (*values, env_id))
