"""The store's writer thread: how it drains the queue (its items are write_items.py's, the SQL is sql.py's).

Callers (`Store`) enqueue frozen items and return; the thread takes everything waiting at once, collapses
repeated `WriteResult`s of one job to the last one (a job is recorded when queued, as it progresses and when
final: only its newest state is worth a write), and writes the results that follow one another in groups of at
most GROUP_MAX, each group in ONE transaction and each result in it whole (row, kernel row, samples). A group
that fails for any reason but the file is written again one result per transaction, so a bad result fails alone.
Items that are not results keep their place: everything queued before a `Flush` or a call is written before it
is answered.

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

import logging
import queue
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import ParamSpec, TypeVar

from . import run_sql
from .connection import StoreError, StoreWriteError, unwritable_reason
from .sql import WAL_CHECKPOINT_PAGES, WAL_SIZE_LIMIT, WriteConnection
from .write_items import (
    GROUP_MAX,
    MAX_PENDING,
    ROWS,
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
    coalesce,
    weight,
)

log = logging.getLogger("boo_engine.store")
P = ParamSpec("P")
T = TypeVar("T")

__all__ = ["WAL_CHECKPOINT_PAGES", "WAL_SIZE_LIMIT", "WriteConnection", "WriterThread"]

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
        self._stored = 0                        # final results this writer committed (one per job)
        self._error_lock = threading.Lock()
        self._pending = 0                       # WriteResults queued and not taken yet (at most MAX_PENDING)
        self._room = threading.Condition()
        self._thread = threading.Thread(target=self._main, name="boo-store-writer", daemon=True)
        self._thread.start()

    def put(self, item: Item) -> None:
        """Queue `item`; rows (results, commands) wait while MAX_PENDING rows are queued (never once the writer
        stopped or failed: nothing would make room)."""
        rows = weight(item)
        if rows:
            with self._room:
                while self._pending >= MAX_PENDING and self.failure is None and self._thread.is_alive():
                    self._room.wait(0.5)
                self._pending += rows
        self._queue.put(item)

    def _take_batch(self) -> list[Item]:
        """Wait for an item, then take what else is waiting (at most MAX_PENDING items), and make room for as
        many results as it took: in one step, so that a waiting caller wakes once per batch, not once per item
        (two threads taking turns on the GIL per item made storing 2x slower)."""
        batch = [self._queue.get()]
        while len(batch) < MAX_PENDING:
            try:
                batch.append(self._queue.get_nowait())
            except queue.Empty:
                break
        taken = sum(weight(item) for item in batch)
        if taken:
            with self._room:
                self._pending -= taken
                self._room.notify_all()
        return batch

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
        except Exception as e:  # noqa: BLE001 (reported by the next flush/close/start_run, not a dead thread)
            if unwritable_reason(e) is not None:
                self._fail(e)
            else:
                self._record_error(e, "opening the write connection")
            self._drain_failed()
            return
        try:
            while True:   # a batch of what is waiting: repeated updates of a job in it collapse to the last
                if self._process(conn, self._take_batch()):
                    return
        finally:
            conn.close()

    def _drain_failed(self) -> None:
        """No connection: answer what comes (calls get the error, flushes are released) until a Stop."""
        while True:
            for item in self._take_batch():
                if isinstance(item, Stop):
                    return
                if isinstance(item, Flush):
                    item.done.set()
                elif isinstance(item, (StartRun, FinishRun, ResumeRun, MarkInterrupted, Execute)):
                    item.reply.set_exception(self.failure or StoreError(f"results database {self.path}: not open"))

    def _process(self, conn: WriteConnection, batch: list[Item]) -> bool:
        """Write one drained batch in order, then checkpoint the WAL; True once a Stop was met."""
        wrote = False
        group: list[WriteResult | RegisterCommand] = []   # consecutive rows, written together
        for item in coalesce(batch):
            if isinstance(item, ROWS):
                if self.failure is None:   # else the file takes no more writes: the failure was reported once
                    wrote = True
                    group.append(item)
                    if len(group) >= GROUP_MAX:
                        self._write_group(conn, group)
                        group = []
                continue
            if group:
                self._write_group(conn, group)
                group = []
            stop, wrote = self._apply(conn, item, wrote)
            if stop:
                return True
        if group:
            self._write_group(conn, group)
        self._checkpoint(conn, wrote)
        return False

    def _apply(self, conn: WriteConnection, item: Item, wrote: bool) -> tuple[bool, bool]:
        """One item that is not a row, in its place in the batch: (a Stop was met, whether the batch wrote since
        the last checkpoint)."""
        if self.failure is not None and isinstance(item, (RegisterVariant, FinishQueued, WriteNew)):
            return False, wrote
        match item:
            case WriteNew():
                self._write_new(conn, item)
                return False, True
            case Stop():
                self._checkpoint(conn, wrote)
                return True, wrote
            case Flush(done=done):
                wrote = self._checkpoint(conn, wrote)
                done.set()
            case RegisterVariant(run_id=run_id, name=name, row=row):
                self._guard("variant", conn.variant, run_id, name, row)
            case FinishQueued(run_id=run_id, status=status, error=error, finished_at=finished_at):
                self._guard("finish_queued", conn.execute,
                            lambda c: run_sql.finish_queued(c, run_id, status, error, finished_at))
                return False, True
            case StartRun() | FinishRun() | ResumeRun() | MarkInterrupted() | Execute():
                self._answer(conn, item)
                return False, True
        return False, wrote

    def _write_group(self, conn: WriteConnection, group: list[WriteResult | RegisterCommand]) -> None:
        """Write consecutive rows in one transaction; when that fails for a reason other than the file, each in
        its own (the bad one's error recorded, the others stored)."""
        if self.failure is not None:
            return
        stored = 0   # how the final results stored change once this commits
        try:
            with conn.transaction() as c:
                for item in group:
                    if isinstance(item, WriteResult):
                        stored += conn.result_in(c, item.run_id, item.result)
                    else:
                        conn.command_in(c, item.text, item.op, item.func_name, item.signature)
        except Exception as e:  # noqa: BLE001 (the writer thread records every failure, never dies of one)
            if unwritable_reason(e) is not None:
                self._fail(e)
            elif len(group) == 1:
                self._record_error(e, "write_result" if isinstance(group[0], WriteResult) else "command")
            else:
                for item in group:
                    self._write_group(conn, [item])
            return
        self._stored += stored

    def _write_new(self, conn: WriteConnection, item: WriteNew) -> None:
        """New rows in one transaction, a few statements for all; when that fails for a reason other than the file
        (a row the run has already), each as its own item would be written."""
        try:
            with conn.transaction() as c:
                finals = conn.insert_new(c, item.run_id, item.commands, item.rows)
        except Exception as e:  # noqa: BLE001 (the writer thread records every failure, never dies of one)
            if unwritable_reason(e) is not None:
                self._fail(e)
            else:
                self._write_group(conn, item.items)
            return
        self._stored += finals

    def _checkpoint(self, conn: WriteConnection, wrote: bool) -> bool:
        """Checkpoint the WAL into the database file after writes (a full disk shows here too); always False:
        nothing is left unwritten."""
        if wrote and self.failure is None:
            self._guard("checkpoint", conn.checkpoint)
        return False

    def _answer(self, conn: WriteConnection, call: Call) -> None:
        """Run a call and hand its result or error to the caller waiting on `reply`."""
        if self.failure is not None:
            call.reply.set_exception(self.failure)
            return
        what = type(call).__name__
        match call:
            case StartRun():
                self._reply(conn, what, call.reply, lambda c: run_sql.start_run(
                    c, call.command_line, call.target, call.config, call.environment))
            case FinishRun():
                self._reply(conn, what, call.reply,
                            lambda c: run_sql.finish_run(c, call.run_id, call.status, conn.path))
            case ResumeRun():
                self._reply(conn, what, call.reply, lambda c: run_sql.resume_run(c, call.run_id, conn.path))
            case MarkInterrupted():
                self._reply(conn, what, call.reply, lambda c: run_sql.mark_interrupted(c, call.run_id, conn.path))
            case Execute():
                self._reply(conn, what, call.reply, call.fn)

    def _reply(self, conn: WriteConnection, what: str, reply: Future[T], fn: Callable[[sqlite3.Connection], T]) -> None:
        """Run `fn` in one transaction and hand its value or error to the caller waiting on `reply`."""
        try:
            value = conn.execute(fn)
        except Exception as e:  # noqa: BLE001 (the caller waits on this one: it gets the error directly)
            log.debug("results store %s: %s failed: %s", self.path, what, e)
            if unwritable_reason(e) is not None:
                self._fail(e)
                reply.set_exception(self.failure or e)
            else:
                reply.set_exception(e)
        else:
            reply.set_result(value)

    def _guard(self, what: str, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T | None:
        """`fn(*args, **kwargs)`'s value; None when it failed (the error recorded, or the store failed)."""
        try:
            return fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 (the writer thread records every failure, never dies of one)
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
        self.failure = StoreWriteError(self.path, unwritable_reason(e) or str(e), self._stored)
        self.failure.__cause__ = e
        if self._on_failure is not None:
            try:
                self._on_failure(self.failure)
            except Exception:
                log.exception("results store %s: on_failure failed", self.path)

    def _record_error(self, e: BaseException, what: str) -> None:
        log.error("results store %s: %s failed: %s", self.path, what, e, exc_info=e)
        with self._error_lock:
            if self._error is None:
                self._error = e
