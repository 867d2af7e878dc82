"""The store's writer thread: the queue items it takes, how it drains them, and the SQL it writes them with.

Callers (`Store`) enqueue frozen items and return; the thread takes everything waiting at once, collapses
repeated `WriteResult`s of one job to the last one (a job is recorded when queued, as it progresses and when
final: only its newest state is worth a write), and writes each result (row, kernel row, samples) in ONE
transaction. Items that are not results keep their place: everything queued before a `Flush` or a call is
written before it is answered.

Errors: a call's error goes back to its caller through its `reply` future; any other write error is logged at
once and kept for the next `Store.flush()` / `close()` to raise (`take_error`), never swallowed.
A write the file cannot take at all (disk full, I/O error, read-only: `unwritable_reason`) is different: the
first one becomes the writer's `failure` (a `StoreWriteError`, one line, no traceback), is handed to
`on_failure` at once, and every later write is dropped and every later call answered with it: the transaction
that failed rolled back, so the file holds exactly the results committed before it.

The WAL stays small: SQLite checkpoints it whenever it passes WAL_CHECKPOINT_PAGES (`wal_autocheckpoint`), the
writer checkpoints it after each drained batch (before a Flush is answered), and `journal_size_limit` cuts the
file back when it restarts: it holds a few results, not the whole run.
"""
from __future__ import annotations

import contextlib
import datetime
import logging
import queue
import sqlite3
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..results import FINAL_STATUSES, INTERRUPTED, JobResult, RunStatus
from .connection import StoreError, StoreWriteError, connect, unwritable_reason
from .owner import owner_row
from .rows import dumps, environment_row, kernel_row, result_row, variant_row

log = logging.getLogger("boo_engine.store")

#: SQLite checkpoints the WAL at the first commit that leaves it over this many pages (its default: 1000)
WAL_CHECKPOINT_PAGES = 16
#: the WAL file is cut back to this size whenever it restarts after a checkpoint
WAL_SIZE_LIMIT = 128 * 1024


# ---- queue items ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class WriteResult:
    """Upsert the (snapshot of the) result; a later WriteResult of the same job in the same drain replaces it."""

    run_id: int
    result: JobResult


@dataclass(frozen=True)
class RegisterVariant:
    run_id: int
    name: str
    row: dict[str, Any]                 # rows.variant_row()


@dataclass(frozen=True)
class RegisterCommand:
    text: str
    op: str | None
    func_name: str | None
    signature: dict[str, Any] | None


@dataclass(frozen=True)
class Flush:
    """Set `done` once everything queued before it is written."""

    done: threading.Event


@dataclass(frozen=True)
class Stop:
    """Write what is pending and end the thread."""


# Calls: the caller waits on `reply`, which gets the writer's return value or its exception.

@dataclass(frozen=True)
class StartRun:
    command_line: str
    target: str
    config: dict[str, Any]
    environment: dict[str, Any]
    reply: Future[Any] = field(default_factory=Future, compare=False)


@dataclass(frozen=True)
class FinishRun:
    run_id: int
    status: RunStatus
    reply: Future[Any] = field(default_factory=Future, compare=False)


@dataclass(frozen=True)
class ResumeRun:
    run_id: int
    reply: Future[Any] = field(default_factory=Future, compare=False)


@dataclass(frozen=True)
class MarkInterrupted:
    run_id: int
    reply: Future[Any] = field(default_factory=Future, compare=False)


@dataclass(frozen=True)
class Execute:
    """Run `fn(connection)` in one write transaction (tables the writer has no verb for: the tuner's)."""

    what: str
    fn: Callable[[sqlite3.Connection], Any]
    reply: Future[Any] = field(default_factory=Future, compare=False)


Call = StartRun | FinishRun | ResumeRun | MarkInterrupted | Execute
Item = WriteResult | RegisterVariant | RegisterCommand | Flush | Stop | Call


def coalesce(batch: list[Item]) -> list[Item]:
    """`batch` with repeated WriteResults of one job collapsed to the last, at the last one's position; a
    collapse never crosses another item, so what was queued before a Flush, a call or a Stop is written before it.
    """
    out: list[Item] = []
    pending: dict[tuple[int, str], WriteResult] = {}
    for item in batch:
        if isinstance(item, WriteResult):
            key = (item.run_id, item.result.job_id)
            pending.pop(key, None)   # keep the LAST update, at its position
            pending[key] = item
        else:
            out.extend(pending.values())
            pending.clear()
            out.append(item)
    out.extend(pending.values())
    return out


# ---- the thread -------------------------------------------------------------------------------------------

class WriterThread:
    """The one thread that opens the write connection and drains the queue; started at construction."""

    def __init__(self, path: Path, on_failure: Callable[[StoreWriteError], None] | None = None) -> None:
        """`on_failure`: called once, on the writer thread, when the file stops taking writes (it must be quick
        and must not wait for the store)."""
        self.path = path
        self._queue: queue.Queue[Item] = queue.Queue()
        self._error: BaseException | None = None
        self.failure: StoreWriteError | None = None
        self._on_failure = on_failure
        self._stored: set[tuple[int, str]] = set()   # final results this writer committed
        self._error_lock = threading.Lock()
        self._thread = threading.Thread(target=self._main, name="boo-store-writer", daemon=True)
        self._thread.start()

    def put(self, item: Item) -> None:
        self._queue.put(item)

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def take_error(self) -> BaseException | None:
        """The first write error since the last call (then forgotten), or None."""
        with self._error_lock:
            err, self._error = self._error, None
        return err

    def _main(self) -> None:
        try:
            conn = WriteConnection(self.path)
        except Exception as e:   # reported by the next flush/close/start_run instead of a silent dead thread
            if unwritable_reason(e) is not None:
                self._fail(e)
            else:
                self._record_error(e, "opening the write connection")
            self._drain_failed()
            return
        try:
            while True:
                batch = [self._queue.get()]
                while True:   # drain what else is waiting: repeated updates of one job collapse to the last
                    try:
                        batch.append(self._queue.get_nowait())
                    except queue.Empty:
                        break
                if self._process(conn, batch):
                    return
        finally:
            conn.close()

    def _drain_failed(self) -> None:
        """No connection: answer what comes (calls get the error, flushes are released) until a Stop."""
        while True:
            item = self._queue.get()
            if isinstance(item, Stop):
                return
            if isinstance(item, Flush):
                item.done.set()
            elif isinstance(item, (StartRun, FinishRun, ResumeRun, MarkInterrupted, Execute)):
                item.reply.set_exception(self.failure or StoreError(f"results database {self.path}: not open"))

    def _process(self, conn: WriteConnection, batch: list[Item]) -> bool:
        """Write one drained batch in order, then checkpoint the WAL; True once a Stop was met."""
        wrote = False
        for item in coalesce(batch):
            if self.failure is not None and not isinstance(item, (Stop, Flush, StartRun, FinishRun, ResumeRun,
                                                                  MarkInterrupted, Execute)):
                continue   # the file takes no more writes: the failure was reported once, drop the rest
            match item:
                case WriteResult(run_id=run_id, result=result):
                    wrote = True
                    if self._guard("write_result", conn.write_result, run_id, result) is True:
                        self._stored.add((run_id, result.job_id))
                case Stop():
                    self._checkpoint(conn, wrote)
                    return True
                case Flush(done=done):
                    wrote = self._checkpoint(conn, wrote)
                    done.set()
                case RegisterVariant(run_id=run_id, name=name, row=row):
                    self._guard("variant", conn.variant, run_id, name, row)
                case RegisterCommand(text=text, op=op, func_name=func_name, signature=signature):
                    wrote = True
                    self._guard("command", conn.command, text, op, func_name, signature)
                case StartRun() | FinishRun() | ResumeRun() | MarkInterrupted() | Execute():
                    wrote = True
                    self._answer(conn, item)
        self._checkpoint(conn, wrote)
        return False

    def _checkpoint(self, conn: WriteConnection, wrote: bool) -> bool:
        """Checkpoint the WAL into the database file after writes (a full disk shows here too); always False:
        nothing is left unwritten."""
        if wrote and self.failure is None:
            self._guard("checkpoint", conn.checkpoint)
        return False

    def _answer(self, conn: WriteConnection, call: Call) -> None:
        """Run a call and hand its result or error to the caller waiting on `reply`."""
        value: Any = None
        if self.failure is not None:
            call.reply.set_exception(self.failure)
            return
        try:
            match call:
                case StartRun():
                    value = conn.start_run(call.command_line, call.target, call.config, call.environment)
                case FinishRun():
                    conn.finish_run(call.run_id, call.status)
                case ResumeRun():
                    conn.resume_run(call.run_id)
                case MarkInterrupted():
                    value = conn.mark_interrupted(call.run_id)
                case Execute():
                    value = conn.execute(call.fn)
        except Exception as e:   # the caller waits on this one: it gets the error directly
            log.debug("results store %s: %s failed: %s", self.path, type(call).__name__, e)
            if unwritable_reason(e) is not None:
                self._fail(e)
                call.reply.set_exception(self.failure or e)
            else:
                call.reply.set_exception(e)
        else:
            call.reply.set_result(value)

    def _guard(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)`'s value; None when it failed (the error recorded, or the store failed)."""
        try:
            return fn(*args)
        except Exception as e:
            if unwritable_reason(e) is not None:
                self._fail(e)
            else:
                self._record_error(e, what)
            return None

    def _fail(self, e: BaseException) -> None:
        """The first write the file could not take: from now on the store is failed (see the module doc)."""
        if self.failure is not None:
            return
        log.debug("results store %s: cannot write: %s", self.path, e)   # no traceback: it is no bug of ours
        self.failure = StoreWriteError(self.path, unwritable_reason(e) or str(e), len(self._stored))
        self.failure.__cause__ = e
        if self._on_failure is not None:
            try:
                self._on_failure(self.failure)
            except Exception:   # noqa: BLE001 - the listener's bug must not kill the writer
                log.exception("results store %s: on_failure failed", self.path)

    def _record_error(self, e: BaseException, what: str) -> None:
        log.error("results store %s: %s failed: %s", self.path, what, e, exc_info=e)
        with self._error_lock:
            if self._error is None:
                self._error = e


# ---- the SQL ----------------------------------------------------------------------------------------------

def _inserted_id(cur: sqlite3.Cursor) -> int:
    """The id of the row the INSERT on `cur` just made (sqlite3 types it optional: None before any insert)."""
    if cur.lastrowid is None:
        raise StoreError("an INSERT returned no row id")
    return cur.lastrowid


def _now_iso() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")


class WriteConnection:
    """Owns the write connection; used only on the writer thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conn = connect(path)
        self.conn.execute("PRAGMA synchronous=NORMAL")   # with WAL: durable across a process kill, far faster
        self.conn.execute("PRAGMA foreign_keys=ON")      # a result for an unknown run is an error, not an orphan
        self.conn.execute(f"PRAGMA wal_autocheckpoint={WAL_CHECKPOINT_PAGES}")
        self.conn.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")
        self.variants: dict[tuple[int, str], dict[str, Any]] = {}

    def checkpoint(self) -> None:
        """Copy the WAL into the database file without waiting for readers; the WAL restarts (cut back to
        WAL_SIZE_LIMIT) at the next write."""
        self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    def close(self) -> None:
        self.conn.close()

    @contextlib.contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; IMMEDIATE takes the write lock up front so another process writing the same
        file makes us wait (busy timeout) rather than fail half-way."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
            self.conn.execute("COMMIT")   # a full disk may show only here: then it rolls back as well
        except BaseException:
            if self.conn.in_transaction:   # some errors (disk full) already rolled it back
                with contextlib.suppress(sqlite3.Error):   # the first error is the one to report
                    self.conn.execute("ROLLBACK")
            raise

    def execute(self, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        with self._tx() as c:
            return fn(c)

    # run lifecycle

    def start_run(self, command_line: str, target: str, config: dict[str, Any], environment: dict[str, Any]) -> int:
        from .. import __version__

        env = environment_row(environment)
        with self._tx() as c:
            env_id = self._upsert_returning_id(c, "environments", env, "hash")
            owner = owner_row()
            cur = c.execute(
                "INSERT INTO runs (started_at, status, command_line, tool_version, target, config, environment_id,"
                " owner_pid, owner_host, owner_started) VALUES (?, 'running', ?, ?, ?, ?, ?, ?, ?, ?)",
                (_now_iso(), command_line, __version__, target, dumps(config), env_id,
                 owner["owner_pid"], owner["owner_host"], owner["owner_started"]),
            )
            return _inserted_id(cur)

    def finish_run(self, run_id: int, status: RunStatus) -> None:
        with self._tx() as c:
            cur = c.execute("UPDATE runs SET status = ?, finished_at = ? WHERE id = ?", (status, _now_iso(), run_id))
            if cur.rowcount == 0:
                raise StoreError(f"no run {run_id} in {self.path}")

    def resume_run(self, run_id: int) -> None:
        with self._tx() as c:
            owner = owner_row()   # this process owns the run now
            cur = c.execute("UPDATE runs SET status = 'running', finished_at = NULL, owner_pid = ?, owner_host = ?,"
                            " owner_started = ? WHERE id = ?",
                            (owner["owner_pid"], owner["owner_host"], owner["owner_started"], run_id))
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

    def write_result(self, run_id: int, r: JobResult) -> bool:
        """Upsert one result in one transaction; True when it was a final one (it counts as stored)."""
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
            if r.samples_us and len(r.cpu_us) == len(r.samples_us):
                c.executemany("INSERT INTO samples (result_id, idx, latency_us, cpu_us) VALUES (?, ?, ?, ?)",
                              ((result_id, i, float(s), float(t))
                               for i, (s, t) in enumerate(zip(r.samples_us, r.cpu_us))))
            elif r.samples_us:
                c.executemany("INSERT INTO samples (result_id, idx, latency_us) VALUES (?, ?, ?)",
                              ((result_id, i, float(s)) for i, s in enumerate(r.samples_us)))
        return r.status in FINAL_STATUSES

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
        return _inserted_id(cur)

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
