"""A run's lifecycle in the `runs` table (and its unfinished results), as the writer thread runs it: each function
takes the connection inside one of WriteConnection's transactions (`WriteConnection.execute`). `where` names the
database in the one-line errors."""
from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from ..results import FINAL_STATUSES, INTERRUPTED, QUEUED, RunStatus
from .connection import StoreError
from .owner import owner_row
from .rows import dumps, environment_row
from .sql import inserted_id, now_iso, upsert_returning_id


def start_run(c: sqlite3.Connection, command_line: str, target: str, config: dict[str, Any],
              environment: dict[str, Any]) -> int:
    """A new run, `running`, owned by this process: its id."""
    from .. import __version__

    env_id = upsert_returning_id(c, "environments", environment_row(environment), "hash")
    owner = owner_row()
    cur = c.execute(
        "INSERT INTO runs (started_at, status, command_line, tool_version, target, config, environment_id,"
        " owner_pid, owner_host, owner_started) VALUES (?, 'running', ?, ?, ?, ?, ?, ?, ?, ?)",
        (now_iso(), command_line, __version__, target, dumps(config), env_id,
         owner["owner_pid"], owner["owner_host"], owner["owner_started"]),
    )
    return inserted_id(cur)


def finish_run(c: sqlite3.Connection, run_id: int, status: RunStatus, where: Path) -> None:
    cur = c.execute("UPDATE runs SET status = ?, finished_at = ? WHERE id = ?", (status, now_iso(), run_id))
    if cur.rowcount == 0:
        raise StoreError(f"no run {run_id} in {where}")


def resume_run(c: sqlite3.Connection, run_id: int, where: Path) -> None:
    """The run is `running` again, owned by this process."""
    owner = owner_row()
    cur = c.execute("UPDATE runs SET status = 'running', finished_at = NULL, owner_pid = ?, owner_host = ?,"
                    " owner_started = ? WHERE id = ?",
                    (owner["owner_pid"], owner["owner_host"], owner["owner_started"], run_id))
    if cur.rowcount == 0:
        raise StoreError(f"no run {run_id} in {where}")


def mark_interrupted(c: sqlite3.Connection, run_id: int, where: Path) -> int:
    """Every unfinished result of the run, and the run if still running, `interrupted`: the results marked."""
    marks = ",".join("?" * len(FINAL_STATUSES))
    if c.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
        raise StoreError(f"no run {run_id} in {where}")
    cur = c.execute(f"UPDATE results SET status = ? WHERE run_id = ? AND status NOT IN ({marks})",
                    (INTERRUPTED, run_id, *FINAL_STATUSES))
    c.execute("UPDATE runs SET status = 'interrupted', finished_at = COALESCE(finished_at, ?)"
              " WHERE id = ? AND status = 'running'", (now_iso(), run_id))
    return cur.rowcount


def finish_queued(c: sqlite3.Connection, run_id: int, status: str, error: str, finished_at: float) -> int:
    """The run's results still queued given `status` and `error`: how many."""
    return c.execute("UPDATE results SET status = ?, error = ?, finished_at = ? WHERE run_id = ? AND status = ?",
                     (status, error, finished_at, run_id, QUEUED)).rowcount
