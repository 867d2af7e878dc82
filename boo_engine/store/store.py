"""The results store: a SQLite file written by ONE background thread, read by anyone.

Why a writer thread: sqlite connections belong to the thread that opened them, a measurement loop must never
wait on disk, and SQLite allows one writer at a time anyway. Callers enqueue snapshots of their results; the
writer drains the queue, collapses repeated updates of the same job, and writes each result (row, kernel row,
samples) in ONE transaction, so a process killed at any instant leaves either the previous or the new version of
a result, never half of one (WAL + synchronous=NORMAL: a commit survives the process being killed).
Writer errors are logged at once and raised from the next `flush()` / `close()`, never swallowed.
"""
from __future__ import annotations

import atexit
import contextlib
import copy
import dataclasses
import datetime
import logging
import os
import queue
import sqlite3
import threading
import weakref
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from .. import locations
from ..errors import BooError
from ..results import FINAL_STATUSES, INTERRUPTED, JobResult, RunStatus
from . import queries, schema
from .rows import dumps, environment_row, kernel_row, result_row, variant_row

log = logging.getLogger("boo_engine.store")

DEFAULT_DB_NAME = locations.DEFAULT_DB_NAME
DB_ENV_VAR = locations.DB_ENV
RUN_STATUSES = tuple(RunStatus)
BUSY_TIMEOUT_S = 30.0


class StoreError(BooError):
    """The results database cannot be opened, read or written. The message names the file."""


def default_db_path() -> Path:
    """`$BOO_DB` if set, else `boo-results.db` in the current directory (the --db option overrides both)."""
    return locations.db_path()


def _now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S)
    conn.row_factory = sqlite3.Row
    return conn


_STOP = object()


class Store:
    """Results database at `path` (default: `default_db_path()`).

    Opening creates the parent directory, applies pending migrations, enables WAL and starts the writer thread.
    Writes (`record_result`, `register_variant`, `register_command`) are queued and return at once;
    `start_run`, `finish_run`, `resume_run`, `mark_interrupted` wait for the writer and raise its error.
    Reads open their own connection and may be called from any thread.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None):
        self.path = Path(path) if path is not None else default_db_path()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = Database(_connect(self.path))
            db.enable_wal()
            db.execute("PRAGMA synchronous=NORMAL")   # as the writer: no fsync per commit under WAL
            schema.apply(db)
            db.conn.close()
        except (OSError, sqlite3.Error) as e:
            raise StoreError(f"results database {self.path}: {e}") from e
        self._queue: queue.Queue[Any] = queue.Queue()
        self._error: BaseException | None = None
        self._error_lock = threading.Lock()
        self._closed = False
        self._thread = threading.Thread(target=self._writer_main, name="boo-store-writer", daemon=True)
        self._thread.start()
        # A daemon thread never blocks interpreter exit; this hook still drains the queue if the caller forgot
        # close(), so queued results are not lost on a normal exit.
        self._atexit = _close_at_exit(weakref.ref(self))
        atexit.register(self._atexit)

    # --- writes ------------------------------------------------------------------------------------------

    def start_run(self, *, command_line: str, target: str, config: dict[str, Any],
                  environment: dict[str, Any]) -> int:
        """Record a new run (status running) and return its id."""
        return self._call("start_run", command_line, target, config, environment)

    def record_result(self, run_id: int, result: JobResult) -> None:
        """Queue the current state of `result` (a snapshot is taken now). Upsert by (run_id, job_id): write a
        job when queued, again as it progresses, and once more when final; its samples are replaced each time."""
        self._put(("result", run_id, _snapshot(result)))

    def register_variant(self, run_id: int, name: str, *, flags: list[str] | tuple[str, ...] = (),
                         spec_text: str | None = None, details: dict[str, Any] | None = None) -> None:
        """Describe variant `name` of this run (optional): its flags, tuning spec CONTENT and any detail, so the
        results point at exactly what was measured. Without it a variant is recorded by name only."""
        self._put(("variant", run_id, name, variant_row(name, flags=list(flags), spec_text=spec_text,
                                                        details=details)))

    def register_command(self, text: str, *, op: str | None = None, func_name: str | None = None,
                         signature: dict[str, Any] | None = None) -> None:
        """Attach a command's parsed signature (OpSignature.describe()) to its row (optional)."""
        self._put(("command", text, op, func_name, signature))

    def finish_run(self, run_id: int, status: str) -> None:
        """Mark the run finished with `status` (done, failed, interrupted or cancelled), after every result
        queued before it has been written."""
        if status not in RUN_STATUSES:
            raise ValueError(f"run status {status!r} is not one of {', '.join(RUN_STATUSES)}")
        self._call("finish_run", run_id, status)

    def resume_run(self, run_id: int) -> None:
        """Set a stopped run back to running (for --resume into the same run)."""
        self._call("resume_run", run_id)

    def mark_interrupted(self, run_id: int) -> int:
        """Repair a run whose process died: every job not in a final status becomes interrupted, and the run
        (if still marked running) becomes interrupted. Returns how many jobs changed."""
        return self._call("mark_interrupted", run_id)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything queued so far is written. Returns False if `timeout` expired first.
        Raises StoreError if a write failed since the last flush."""
        done = threading.Event()
        self._put(("flush", done))
        ok = self._wait(done, timeout)
        self._raise_pending_error()
        return ok

    def close(self) -> None:
        """Flush, stop the writer thread, and raise any write error that was not reported yet."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self._atexit)
        self._queue.put(_STOP)
        while self._thread.is_alive():
            self._thread.join(0.5)
        self._raise_pending_error()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # --- reads (any thread) ------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _reader(self) -> Iterator[sqlite3.Connection]:
        try:
            conn = _connect(self.path)
        except sqlite3.Error as e:
            raise StoreError(f"results database {self.path}: {e}") from e
        try:
            yield conn
        except sqlite3.Error as e:
            raise StoreError(f"results database {self.path}: {e}") from e
        finally:
            conn.close()

    def list_runs(self, limit: int = 50) -> list[dict[str, Any]]:
        """Newest first: run columns plus host, n_results, ok (done) and failed counts."""
        with self._reader() as conn:
            return queries.list_runs(conn, limit)

    def run_info(self, run_id: int) -> dict[str, Any]:
        """One run's columns, counts and its environment dict. StoreError if there is no such run."""
        with self._reader() as conn:
            info = queries.run_info(conn, run_id)
        if info is None:
            raise StoreError(f"no run {run_id} in {self.path}")
        return info

    def load_results(self, run_id: int) -> list[JobResult]:
        """Every result of the run, rebuilt completely (samples included), in first-recorded order."""
        with self._reader() as conn:
            return queries.load_results(conn, run_id)

    def finished_job_ids(self, run_id: int) -> set[str]:
        """Jobs of the run that are done or failed: what --resume skips."""
        with self._reader() as conn:
            return queries.finished_job_ids(conn, run_id)

    def last_run_id(self) -> int | None:
        with self._reader() as conn:
            return queries.last_run_id(conn)

    # --- plumbing ----------------------------------------------------------------------------------------

    def _put(self, item: Any) -> None:
        if self._closed:
            raise StoreError(f"results database {self.path} is closed")
        self._queue.put(item)

    def _call(self, op: str, *args: Any) -> Any:
        fut: Future[Any] = Future()
        self._put((op, fut, *args))
        while not fut.done():
            if not self._thread.is_alive():
                self._raise_pending_error()
                raise StoreError(f"results database {self.path}: the writer thread stopped")
            try:
                return self._result_of(fut, 0.5)
            except TimeoutError:
                continue
        return self._result_of(fut, None)

    def _result_of(self, fut: Future[Any], timeout: float | None) -> Any:
        try:
            return fut.result(timeout)
        except (TimeoutError, StoreError):
            raise
        except Exception as e:
            raise StoreError(f"results database {self.path}: {e}") from e

    def _wait(self, event: threading.Event, timeout: float | None) -> bool:
        step = 0.5 if timeout is None else min(0.5, timeout)
        waited = 0.0
        while not event.wait(step):
            waited += step
            if not self._thread.is_alive():
                self._raise_pending_error()
                raise StoreError(f"results database {self.path}: the writer thread stopped")
            if timeout is not None and waited >= timeout:
                return False
        return True

    def _raise_pending_error(self) -> None:
        with self._error_lock:
            err, self._error = self._error, None
        if err is not None:
            raise StoreError(f"results database {self.path}: write failed: {err}") from err

    def _writer_main(self) -> None:
        try:
            writer = _Writer(self.path)
        except Exception as e:   # reported by the next flush/close/start_run instead of a silent dead thread
            self._record_error(e, "opening the write connection")
            return
        try:
            while True:
                batch = [self._queue.get()]
                while True:   # drain what else is waiting: repeated updates of one job collapse to the last
                    try:
                        batch.append(self._queue.get_nowait())
                    except queue.Empty:
                        break
                stop = self._process(writer, batch)
                if stop:
                    return
        finally:
            writer.close()

    def _process(self, writer: _Writer, batch: list[Any]) -> bool:
        pending: dict[tuple[int, str], JobResult] = {}

        def write_pending() -> None:
            for (run_id, _), result in pending.items():
                self._guard(writer.write_result, run_id, result)
            pending.clear()

        for item in batch:
            if item is _STOP:
                write_pending()
                return True
            op = item[0]
            if op == "result":
                _, run_id, result = item
                key = (run_id, result.job_id)
                pending.pop(key, None)   # keep the LAST update, at its position
                pending[key] = result
                continue
            write_pending()
            if op == "flush":
                item[1].set()
            elif op in ("variant", "command"):
                self._guard(getattr(writer, op), *item[1:])
            else:
                fut = item[1]
                try:
                    fut.set_result(getattr(writer, op)(*item[2:]))
                except Exception as e:   # the caller waits on this one: it gets the error directly
                    log.debug("results store %s: %s failed: %s", self.path, op, e)
                    fut.set_exception(e)
        write_pending()
        return False

    def _guard(self, fn: Any, *args: Any) -> None:
        try:
            fn(*args)
        except Exception as e:
            self._record_error(e, fn.__name__)

    def _record_error(self, e: BaseException, what: str) -> None:
        log.error("results store %s: %s failed: %s", self.path, what, e, exc_info=e)
        with self._error_lock:
            if self._error is None:
                self._error = e


def _snapshot(r: JobResult) -> JobResult:
    """A copy the caller may go on mutating: samples and nested records copied, ~30x cheaper than deepcopy on
    1000 samples (floats and strings are immutable, so a shallow list copy suffices)."""
    return dataclasses.replace(
        r,
        samples_us=list(r.samples_us),
        stats=copy.copy(r.stats),
        compile=copy.deepcopy(r.compile),
        numerics=copy.deepcopy(r.numerics),
    )


def _close_at_exit(ref: weakref.ref[Store]) -> Any:
    def hook() -> None:
        store = ref()
        if store is not None:
            try:
                store.close()
            except StoreError as e:
                log.error("%s", e)
    return hook


class _Writer:
    """Owns the write connection; used only on the writer thread."""

    def __init__(self, path: Path):
        self.path = path
        self.conn = _connect(path)
        self.conn.execute("PRAGMA synchronous=NORMAL")   # with WAL: durable across a process kill, far faster
        self.conn.execute("PRAGMA foreign_keys=ON")      # a result for an unknown run is an error, not an orphan
        self.variants: dict[tuple[int, str], dict[str, Any]] = {}

    def close(self) -> None:
        self.conn.close()

    @contextlib.contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; IMMEDIATE takes the write lock up front so another process writing the same
        file makes us wait (busy timeout) rather than fail half-way."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            if self.conn.in_transaction:   # some errors (disk full) already rolled it back
                self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    # run lifecycle

    def start_run(self, command_line: str, target: str, config: dict[str, Any], environment: dict[str, Any]) -> int:
        from .. import __version__

        env = environment_row(environment)
        with self._tx() as c:
            env_id = self._upsert_returning_id(c, "environments", env, "hash")
            cur = c.execute(
                "INSERT INTO runs (started_at, status, command_line, tool_version, target, config, environment_id)"
                " VALUES (?, 'running', ?, ?, ?, ?, ?)",
                (_now_iso(), command_line, __version__, target, dumps(config), env_id),
            )
            return int(cur.lastrowid)

    def finish_run(self, run_id: int, status: str) -> None:
        with self._tx() as c:
            cur = c.execute("UPDATE runs SET status = ?, finished_at = ? WHERE id = ?", (status, _now_iso(), run_id))
            if cur.rowcount == 0:
                raise StoreError(f"no run {run_id} in {self.path}")

    def resume_run(self, run_id: int) -> None:
        with self._tx() as c:
            cur = c.execute("UPDATE runs SET status = 'running', finished_at = NULL WHERE id = ?", (run_id,))
            if cur.rowcount == 0:
                raise StoreError(f"no run {run_id} in {self.path}")

    def mark_interrupted(self, run_id: int) -> int:
        marks = ",".join("?" * len(FINAL_STATUSES))
        with self._tx() as c:
            if c.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
                raise StoreError(f"no run {run_id} in {self.path}")
            cur = c.execute(
                f"UPDATE results SET status = ? WHERE run_id = ? AND status NOT IN ({marks})",
                (INTERRUPTED, run_id, *FINAL_STATUSES),
            )
            c.execute(
                "UPDATE runs SET status = 'interrupted', finished_at = COALESCE(finished_at, ?)"
                " WHERE id = ? AND status = 'running'",
                (_now_iso(), run_id),
            )
            return cur.rowcount

    # descriptions

    def variant(self, run_id: int, name: str, row: dict[str, Any]) -> None:
        self.variants[(run_id, name)] = row

    def command(self, text: str, op: str | None, func_name: str | None, signature: dict[str, Any] | None) -> None:
        with self._tx() as c:
            self._command_id(c, text, op, func_name)
            if signature is not None:
                c.execute("UPDATE commands SET signature = ? WHERE text = ?", (dumps(signature), text))

    # results

    def write_result(self, run_id: int, r: JobResult) -> None:
        with self._tx() as c:
            command_id = self._command_id(c, r.command, r.op, r.func_name)
            variant_id = self._variant_id(c, run_id, r.variant)
            old = c.execute("SELECT id, kernel_id FROM results WHERE run_id = ? AND job_id = ?",
                            (run_id, r.job_id)).fetchone()
            kernel_id = self._write_kernel(c, r, variant_id, old["kernel_id"] if old else None)
            row = result_row(r)
            row.update(run_id=run_id, command_id=command_id, variant_id=variant_id, kernel_id=kernel_id)
            cols = list(row)
            updates = ", ".join(f"{k} = excluded.{k}" for k in cols if k not in ("run_id", "job_id"))
            result_id = c.execute(
                f"INSERT INTO results ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
                f" ON CONFLICT (run_id, job_id) DO UPDATE SET {updates} RETURNING id",
                [row[k] for k in cols],
            ).fetchone()[0]
            c.execute("DELETE FROM samples WHERE result_id = ?", (result_id,))
            if r.samples_us:
                c.executemany("INSERT INTO samples (result_id, idx, latency_us) VALUES (?, ?, ?)",
                              ((result_id, i, float(s)) for i, s in enumerate(r.samples_us)))

    def _variant_id(self, c: sqlite3.Connection, run_id: int, name: str) -> int:
        """The registered description of this run's variant; else the one this run used before under that name
        (a resumed run in a new process need not register again); else a row with the name only."""
        vrow = self.variants.get((run_id, name))
        if vrow is None:
            row = c.execute("SELECT v.id FROM results r JOIN variants v ON v.id = r.variant_id"
                            " WHERE r.run_id = ? AND v.name = ? ORDER BY r.id DESC LIMIT 1", (run_id, name)).fetchone()
            if row is not None:
                return int(row[0])
            vrow = variant_row(name)
        return self._upsert_returning_id(c, "variants", vrow, "content_hash")

    def _write_kernel(self, c: sqlite3.Connection, r: JobResult, variant_id: int, old_id: int | None) -> int | None:
        krow = kernel_row(r, variant_id)
        if krow is None:
            if old_id is not None:
                c.execute("UPDATE results SET kernel_id = NULL WHERE id IN "
                          "(SELECT id FROM results WHERE kernel_id = ?)", (old_id,))
                c.execute("DELETE FROM kernels WHERE id = ?", (old_id,))
            return None
        cols = list(krow)
        if old_id is not None:
            c.execute(f"UPDATE kernels SET {', '.join(f'{k} = ?' for k in cols)} WHERE id = ?",
                      [krow[k] for k in cols] + [old_id])
            return old_id
        cur = c.execute(f"INSERT INTO kernels ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                        [krow[k] for k in cols])
        return int(cur.lastrowid)

    @staticmethod
    def _command_id(c: sqlite3.Connection, text: str, op: str | None, func_name: str | None) -> int:
        c.execute("INSERT INTO commands (text, op, func_name) VALUES (?, ?, ?) ON CONFLICT (text) DO NOTHING",
                  (text, op, func_name))
        return int(c.execute("SELECT id FROM commands WHERE text = ?", (text,)).fetchone()[0])

    @staticmethod
    def _upsert_returning_id(c: sqlite3.Connection, table: str, row: dict[str, Any], unique: str) -> int:
        """Insert `row` unless a row with the same `unique` value exists; the id either way."""
        cols = list(row)
        c.execute(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
                  f" ON CONFLICT ({unique}) DO NOTHING", [row[k] for k in cols])
        return int(c.execute(f"SELECT id FROM {table} WHERE {unique} = ?", (row[unique],)).fetchone()[0])
