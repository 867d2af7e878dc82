"""The results store: a SQLite file written by ONE background thread, read by anyone.

Why a writer thread: sqlite connections belong to the thread that opened them, a measurement loop must never
wait on disk, and SQLite allows one writer at a time anyway. Callers enqueue snapshots of their results; the
writer drains the queue, collapses repeated updates of the same job, and writes each result (row, kernel row,
samples) in ONE transaction, so a process killed at any instant leaves either the previous or the new version of
a result, never half of one (WAL + synchronous=NORMAL: a commit survives the process being killed).
Writer errors are logged at once and raised from the next `flush()` / `close()`, never swallowed. A file that
cannot be written any more (disk full, I/O error, read-only) fails the store once: `failure` (a
`StoreWriteError`, one line naming the file and how many results it holds) is handed to `on_failure`, raised by
`flush()` and every call, and later writes are dropped.

This module is the callers' side (the API, the reads, waiting for the writer); the thread, its queue items and
its SQL are in `writer.py`.
"""
from __future__ import annotations

import atexit
import contextlib
import copy
import dataclasses
import logging
import os
import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from sqlite_utils import Database

from .. import locations
from ..results import JobResult, RunStatus
from . import queries, schema
from .connection import BUSY_TIMEOUT_S, StoreError, StoreWriteError, connect
from .readonly import SchemaError, writable_schema
from .rows import bare_row, dumps, variant_row
from .write_items import (
    Call,
    Execute,
    FinishQueued,
    FinishRun,
    Flush,
    Item,
    MarkInterrupted,
    RegisterCommand,
    RegisterVariant,
    ResumeRun,
    StartRun,
    Stop,
    WriteNew,
    WriteResult,
)
from .writer import WriterThread

log = logging.getLogger("boo_engine.store")
T = TypeVar("T")

DEFAULT_DB_NAME = locations.DEFAULT_DB_NAME
DB_ENV_VAR = locations.DB_ENV
RUN_STATUSES = tuple(RunStatus)
__all__ = ["BUSY_TIMEOUT_S", "DB_ENV_VAR", "DEFAULT_DB_NAME", "RUN_STATUSES", "Store", "StoreError",
           "StoreWriteError", "default_db_path"]


def default_db_path() -> Path:
    """`$BOO_DB` if set, else `boo-results.db` in the current directory (the --db option overrides both)."""
    return locations.db_path()


def prepare_database(path: Path) -> None:
    """Make `path` a results database this boo-tui can write (created, migrated, in WAL mode), before the writer
    thread opens it; StoreError (one line) when it cannot be."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        db = Database(connect(path))
        # Never write into a file a newer boo-tui made (its rows would be half understood and its migrations
        # skipped) or into someone else's SQLite file (not even its journal mode): the refusal compare and merge
        # give, one line.
        writable_schema(db.conn, path)
        db.enable_wal()
        db.execute("PRAGMA synchronous=NORMAL")   # as the writer: no fsync per commit under WAL
        schema.apply(db)
        db.conn.close()
    except SchemaError as e:
        raise StoreError(str(e)) from None
    except (OSError, sqlite3.Error) as e:
        raise StoreError(f"results database {path}: {e}") from e


class Store:
    """Results database at `path` (default: `default_db_path()`).

    Opening creates the parent directory, applies pending migrations, enables WAL and starts the writer thread.
    Writes (`record_result`, `register_variant`, `register_command`) are queued and return at once;
    `start_run`, `finish_run`, `resume_run`, `mark_interrupted` wait for the writer and raise its error.
    Reads open their own connection and may be called from any thread.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *,
                 on_failure: Callable[[StoreWriteError], None] | None = None):
        """`on_failure`: told once, from the writer thread, when the file stops taking writes (see `failure`)."""
        self.path = Path(path) if path is not None else default_db_path()
        prepare_database(self.path)
        self._closed = False
        self._on_failure = on_failure
        self._writer = WriterThread(self.path, on_failure)
        # A daemon thread never blocks interpreter exit; this hook still drains the queue if the caller forgot
        # close(), so queued results are not lost on a normal exit.
        self._atexit = _close_at_exit(weakref.ref(self))
        atexit.register(self._atexit)

    @property
    def failure(self) -> StoreWriteError | None:
        """Set once the file could not take a write (disk full, I/O error, read-only): nothing more is written."""
        return self._writer.failure

    # --- writes ------------------------------------------------------------------------------------------

    def start_run(self, *, command_line: str, target: str, config: dict[str, Any],
                  environment: dict[str, Any]) -> int:
        """Record a new run (status running) and return its id."""
        call = StartRun(command_line, target, config, environment)
        self._call(call)
        return call.reply.result()

    def record_result(self, run_id: int, result: JobResult) -> None:
        """Queue the current state of `result` (a snapshot is taken now). Upsert by (run_id, job_id): write a
        job when queued, again as it progresses, and once more when final; its samples are replaced each time."""
        self._put(WriteResult(run_id, _snapshot(result)))

    def record_new(self, run_id: int, results: Sequence[JobResult],
                   commands: Sequence[tuple[str, str | None, str | None, str | None]] = ()) -> None:
        """Queue the first rows of jobs the run has none of yet (a start() storing the jobs of a big commands
        file), in order, after the commands they measure (text, op, func_name, signature JSON: `rows.dumps`). The
        results that only say what their job is (queued, or failed before it ran: `rows.bare_row`, a tuple of
        immutable values, which is their snapshot) go in bulk: a few statements for all of them, where
        `record_result` takes 3-4 a row and a snapshot. Any other result is queued as record_result queues it. A
        row the run has after all is written as record_result would write it (slower, not wrong)."""
        pending: list[tuple[Any, ...]] = []
        described = tuple(commands)
        for result in results:
            bare = bare_row(result)
            if bare is not None:
                pending.append(bare)
                continue
            if pending or described:
                self._put(WriteNew(run_id, described, tuple(pending)))
                pending, described = [], ()
            self.record_result(run_id, result)
        if pending or described:
            self._put(WriteNew(run_id, described, tuple(pending)))

    def finish_queued(self, run_id: int, status: str, error: str, finished_at: float) -> None:
        """Queue: every result of the run whose row says queued (after the writes queued before this) ends
        `status`, with `error` and `finished_at`, in one statement (jobs that never left the queue)."""
        self._put(FinishQueued(run_id, status, error, finished_at))

    def register_variant(self, run_id: int, name: str, *, flags: list[str] | tuple[str, ...] = (),
                         spec_text: str | None = None, details: dict[str, Any] | None = None) -> None:
        """Describe variant `name` of this run (optional): its flags, tuning spec CONTENT and any detail, so the
        results point at exactly what was measured. Without it a variant is recorded by name only."""
        self._put(RegisterVariant(run_id, name, variant_row(name, flags=list(flags), spec_text=spec_text,
                                                            details=details)))

    def register_command(self, text: str, *, op: str | None = None, func_name: str | None = None,
                         signature: dict[str, Any] | None = None) -> None:
        """Attach a command's parsed signature (OpSignature.describe()) to its row (optional)."""
        self._put(RegisterCommand(text, op, func_name, dumps(signature)))

    def finish_run(self, run_id: int, status: str) -> None:
        """Mark the run finished with `status` (done, failed, interrupted or cancelled), after every result
        queued before it has been written."""
        if status not in RUN_STATUSES:
            raise ValueError(f"run status {status!r} is not one of {', '.join(RUN_STATUSES)}")
        self._call(FinishRun(run_id, RunStatus(status)))

    def resume_run(self, run_id: int) -> None:
        """Set a stopped run back to running (for --resume into the same run)."""
        self._call(ResumeRun(run_id))

    def mark_interrupted(self, run_id: int) -> int:
        """Repair a run whose process died: every job not in a final status becomes interrupted, and the run
        (if still marked running) becomes interrupted. Returns how many jobs changed."""
        call = MarkInterrupted(run_id)
        self._call(call)
        return call.reply.result()

    def execute(self, what: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run `fn(connection)` in one write transaction on the writer thread (after everything queued before
        it) and return its value: for tables the writer has no verb for (the tuner's). `what` names it in errors."""
        call = Execute(what, fn)
        self._call(call)
        return call.reply.result()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything queued so far is written. Returns False if `timeout` expired first.
        Raises StoreError if a write failed since the last flush."""
        done = threading.Event()
        self._put(Flush(done))
        ok = self._wait(done, timeout)
        self._raise_pending_error()
        if self.failure is not None:
            raise self.failure
        return ok

    def close(self) -> None:
        """Flush, stop the writer thread, and raise any write error that was not reported yet."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self._atexit)
        self._writer.put(Stop())
        while self._writer.is_alive():
            self._writer.join(0.5)
        self._raise_pending_error()
        if self.failure is not None and self._on_failure is None:   # nobody was told yet
            raise self.failure

    def __enter__(self) -> Store:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # --- reads (any thread) ------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _reader(self) -> Iterator[sqlite3.Connection]:
        try:
            conn = connect(self.path)
        except sqlite3.Error as e:
            raise StoreError(f"results database {self.path}: {e}") from e
        try:
            yield conn
        except sqlite3.Error as e:
            raise StoreError(f"results database {self.path}: {e}") from e
        finally:
            conn.close()

    def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """`fn` on a connection of its own (any thread), its errors as StoreError: e.g. `store.stream`'s chunks."""
        with self._reader() as conn:
            return fn(conn)

    def list_runs(self, limit: int = 50) -> list[queries.RunRow]:
        """Newest first: run columns plus host, n_results, ok (done) and failed counts."""
        with self._reader() as conn:
            return queries.list_runs(conn, limit)

    def run_info(self, run_id: int) -> queries.RunInfo:
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

    def run_commands(self, run_id: int) -> list[tuple[str, str | None, int | None, float | None, float | None]]:
        """The commands the run measured (text, source "file:line" or None, calls, share, captured_us: the weights
        its commands file gave, or None), in the order first recorded."""
        with self._reader() as conn:
            return queries.run_commands(conn, run_id)

    def last_run_id(self) -> int | None:
        with self._reader() as conn:
            return queries.last_run_id(conn)

    def peaks(self, machine_key: str, target: str) -> list[queries.PeakRow]:
        """The newest stored peaks of a machine (`limits/`): one row per kind and dtype, from its latest
        measurement (or raise); [] when none."""
        with self._reader() as conn:
            return queries.peaks(conn, machine_key, target)

    def save_peaks(self, rows: list[queries.PeakRow], run_id: int | None = None) -> None:
        """Store a machine's peaks (rows of the `peaks` table; `run_id`'s environment recorded with them), on
        the writer thread, and wait until they are written."""
        self.execute("peaks", lambda conn: queries.insert_peaks(conn, rows, run_id))

    # --- plumbing ----------------------------------------------------------------------------------------

    def _put(self, item: Item) -> None:
        if self._closed:
            raise StoreError(f"results database {self.path} is closed")
        if self.failure is not None and isinstance(item, (WriteResult, WriteNew, RegisterVariant, RegisterCommand,
                                                          FinishQueued)):
            return   # the file takes no more writes; the failure was reported
        self._writer.put(item)

    def _call(self, call: Call) -> None:
        """Queue `call` and wait for the writer's answer (its error raised here, as a StoreError): its value is
        then `call.reply.result()`."""
        self._put(call)
        while not call.reply.done():
            if not self._writer.is_alive():
                self._raise_pending_error()
                raise StoreError(f"results database {self.path}: the writer thread stopped")
            try:
                self._answered(call, 0.5)
                return
            except TimeoutError:
                continue
        self._answered(call, None)

    def _answered(self, call: Call, timeout: float | None) -> None:
        """Wait up to `timeout` for the writer's answer to `call` (TimeoutError: none yet); its error raised."""
        try:
            call.reply.result(timeout)
        except (TimeoutError, StoreError):   # StoreWriteError included: its one line is the message
            raise
        except Exception as e:
            raise StoreError(f"results database {self.path}: {e}") from e

    def _wait(self, event: threading.Event, timeout: float | None) -> bool:
        step = 0.5 if timeout is None else min(0.5, timeout)
        waited = 0.0
        while not event.wait(step):
            waited += step
            if not self._writer.is_alive():
                self._raise_pending_error()
                raise StoreError(f"results database {self.path}: the writer thread stopped")
            if timeout is not None and waited >= timeout:
                return False
        return True

    def _raise_pending_error(self) -> None:
        err = self._writer.take_error()
        if err is not None:
            raise StoreError(f"results database {self.path}: write failed: {err}") from err


def _snapshot(r: JobResult) -> JobResult:
    """A copy the caller may go on mutating: samples and nested records copied, ~30x cheaper than deepcopy on
    1000 samples (floats and strings are immutable, so a shallow list copy suffices)."""
    return dataclasses.replace(
        r,
        samples_us=list(r.samples_us),
        cpu_us=list(r.cpu_us),
        rounds=list(r.rounds),
        stats=copy.copy(r.stats),
        compile=copy.deepcopy(r.compile),
        numerics=copy.deepcopy(r.numerics),
    )


def _close_at_exit(ref: weakref.ref[Store]) -> Callable[[], None]:
    def hook() -> None:
        store = ref()
        if store is not None:
            try:
                store.close()
            except StoreError as e:
                log.error("%s", e)
    return hook
