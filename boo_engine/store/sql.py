"""The SQL the store's writer thread runs: `WriteConnection`, used only on that thread (see writer.py).

Results are written in groups: `write_results` writes every result of a group (the writer hands it what it
drained at once, at most write_items.GROUP_MAX) in ONE transaction, each result whole (row, kernel row, samples). A
process killed at any instant still leaves each result's previous or new version, never half of one, and a
commit per group instead of per result (a commit may checkpoint the WAL: an fsync) is what lets 200,000 rows of
a commands file be stored in seconds rather than minutes.

Every result costs a fixed number of statements, however many rows the file holds: the ids of a run's variants
and of recently written commands are remembered (rows of `variants` and `commands` are never deleted, nor their
ids changed, so another writer of the same file cannot make them stale), and a rollback forgets them all (an id
remembered inside the transaction may have rolled back with it).
"""
from __future__ import annotations

import contextlib
import datetime
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ..results import FINAL_STATUSES, JobResult
from .connection import StoreError, connect
from .rows import BARE_COLUMNS, BARE_STATUS, Row, kernel_row, result_row, variant_row

T = TypeVar("T")

#: where a bare row holds its func_name
BARE_FUNC_NAME = 3 + BARE_COLUMNS.index("func_name")

#: SQLite checkpoints the WAL at the first commit that leaves it over this many pages (its default: 1000)
WAL_CHECKPOINT_PAGES = 16
#: the WAL file is cut back to this size whenever it restarts after a checkpoint
WAL_SIZE_LIMIT = 128 * 1024
#: the write connection's page cache (KiB; SQLite's default is 2,000): the indexes of a run of 400,000 rows are
#: far bigger, and a bulk insert dirties pages all over them
WRITE_CACHE_KIB = 16384
#: command ids remembered at most (then forgotten all at once): a file of distinct lines must not grow this
COMMAND_IDS_KEPT = 4096


def upsert_returning_id(c: sqlite3.Connection, table: str, row: Row, unique: str) -> int:
    """Insert `row` unless a row with the same `unique` value exists; the id either way."""
    cols = list(row)
    c.execute(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
              f" ON CONFLICT ({unique}) DO NOTHING", [row[k] for k in cols])
    return int(c.execute(f"SELECT id FROM {table} WHERE {unique} = ?", (row[unique],)).fetchone()[0])


def inserted_id(cur: sqlite3.Cursor) -> int:
    """The id of the row the INSERT on `cur` just made (sqlite3 types it optional: None before any insert)."""
    if cur.lastrowid is None:
        raise StoreError("an INSERT returned no row id")
    return cur.lastrowid


def now_iso() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")


class WriteConnection:
    """Owns the write connection; used only on the writer thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conn = connect(path)
        self.opened_at = time.time()   # results finished before come from an earlier process (a resumed run)
        self.conn.execute("PRAGMA synchronous=NORMAL")   # with WAL: durable across a process kill, far faster
        self.conn.execute("PRAGMA foreign_keys=ON")      # a result for an unknown run is an error, not an orphan
        self.conn.execute(f"PRAGMA wal_autocheckpoint={WAL_CHECKPOINT_PAGES}")
        self.conn.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")
        self.conn.execute(f"PRAGMA cache_size={-WRITE_CACHE_KIB}")   # 200,000 queued rows: 8% faster to store
        self.variants: dict[tuple[int, str], Row] = {}              # registered descriptions
        self._variant_ids: dict[tuple[int, str], int] = {}          # (run, name) -> variants.id
        self._command_ids: dict[str, int] = {}                      # text -> commands.id (the recent ones)
        self._upsert_sql: dict[tuple[str, ...], str] = {}           # the results upsert, per column list
        self._null_columns: frozenset[str] | None = None

    def checkpoint(self) -> None:
        """Copy the WAL into the database file without waiting for readers; the WAL restarts (cut back to
        WAL_SIZE_LIMIT) at the next write."""
        self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    def close(self) -> None:
        self.conn.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; IMMEDIATE takes the write lock up front so another process writing the same
        file makes us wait (busy timeout) rather than fail half-way."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
            self.conn.execute("COMMIT")   # a full disk may show only here: then it rolls back as well
        except BaseException:
            self._variant_ids.clear()     # an id remembered in this transaction may be gone with it
            self._command_ids.clear()
            if self.conn.in_transaction:   # some errors (disk full) already rolled it back
                with contextlib.suppress(sqlite3.Error):   # the first error is the one to report
                    self.conn.execute("ROLLBACK")
            raise

    def execute(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        with self.transaction() as c:
            return fn(c)

    # descriptions

    def variant(self, run_id: int, name: str, row: Row) -> None:
        self.variants[(run_id, name)] = row
        self._variant_ids.pop((run_id, name), None)   # the next result looks up (or makes) this description's row

    def command_in(self, c: sqlite3.Connection, text: str, op: str | None, func_name: str | None,
                   signature: str | None) -> None:
        """Register a command (its signature, when known: it replaces the one stored) in the transaction `c` is
        in; op and func_name stay those of its first sight."""
        if signature is None:
            self._command_id(c, text, op, func_name)
            return
        found = int(c.execute("INSERT INTO commands (text, op, func_name, signature) VALUES (?, ?, ?, ?)"
                              " ON CONFLICT (text) DO UPDATE SET signature = excluded.signature RETURNING id",
                              (text, op, func_name, signature)).fetchone()[0])
        self._remember_command(text, found)

    # results

    def write_results(self, results: Iterable[tuple[int, JobResult]]) -> int:
        """Upsert every (run id, result) in ONE transaction; how the final results stored changed (`result_in`)."""
        with self.transaction() as c:
            return sum(self.result_in(c, run_id, r) for run_id, r in results)

    def write_result(self, run_id: int, r: JobResult) -> int:
        """One result in its own transaction."""
        return self.write_results([(run_id, r)])

    def result_in(self, c: sqlite3.Connection, run_id: int, r: JobResult) -> int:
        """Upsert one result in the transaction `c` is in. Returns how it changes the number of final results this
        connection stored (the writer's count, which a failure reports; counted, not remembered per job, so it
        takes no memory per row): +1 for a final result over no row or one not final, -1 for a result not final
        over a final one this connection stored (a job measured again), else 0."""
        command_id = self._command_id(c, r.command, r.op, r.func_name)
        variant_id = self._variant_id(c, run_id, r.variant)
        old = c.execute("SELECT id, kernel_id, status, finished_at FROM results WHERE run_id = ? AND job_id = ?",
                        (run_id, r.job_id)).fetchone()
        kernel_id = self._write_kernel(c, r, variant_id, old["kernel_id"] if old else None)
        row = result_row(r)
        row.update(run_id=run_id, command_id=command_id, variant_id=variant_id, kernel_id=kernel_id)
        keys = tuple(row)
        null_default = self._null_default(c)   # a NULL left out is inserted as NULL: binding it cost ~0.2 us
        cols = tuple(k for k in keys if row[k] is not None or k not in null_default)
        result_id = c.execute(self._upsert(keys, cols), [row[k] for k in cols]).fetchone()[0]
        if old is not None or r.samples_us:   # a new row without samples has none to replace
            c.execute("DELETE FROM samples WHERE result_id = ?", (result_id,))
        if r.samples_us and len(r.cpu_us) == len(r.samples_us):
            c.executemany("INSERT INTO samples (result_id, idx, latency_us, cpu_us) VALUES (?, ?, ?, ?)",
                          ((result_id, i, float(s), float(t))
                           for i, (s, t) in enumerate(zip(r.samples_us, r.cpu_us))))
        elif r.samples_us:
            c.executemany("INSERT INTO samples (result_id, idx, latency_us) VALUES (?, ?, ?)",
                          ((result_id, i, float(s)) for i, s in enumerate(r.samples_us)))
        was_final = old is not None and old["status"] in FINAL_STATUSES
        if r.status in FINAL_STATUSES:
            return 0 if was_final else 1
        # a final row replaced by a job measured again: it counted if this connection stored it (a resumed run's
        # finished jobs were stored before it opened)
        return -1 if was_final and (old["finished_at"] or 0.0) >= self.opened_at else 0

    def insert_new(self, c: sqlite3.Connection, run_id: int,
                   commands: Sequence[tuple[str, str | None, str | None, str | None]],
                   rows: Sequence[tuple[Any, ...]]) -> int:
        """Register `commands` (text, op, func_name, signature JSON) and insert `rows` (`rows.bare_row`: results of jobs
        the run has no row for yet, each only saying what its job is) in the transaction `c` is in: a few
        statements for them all, where `result_in` takes 3-4 a row. A row the run has already fails the whole
        insert (sqlite3.IntegrityError: the caller writes them one by one instead). Returns how many are final."""
        # every command before its first row, in the order the rows first name them (as one at a time would)
        given = {t: (t, op, f, sig) for t, op, f, sig in commands}
        first = {r[0]: r for r in rows}   # (a dict keeps the first row's place: the order they are first named)
        ordered = [given.pop(t) if t in given else (t, r[1], r[BARE_FUNC_NAME], None) for t, r in first.items()]
        ordered[:0] = given.values()   # (commands of no row here: first)
        c.executemany("INSERT INTO commands (text, op, func_name, signature) VALUES (?, ?, ?, ?) ON CONFLICT (text)"
                      " DO UPDATE SET signature = excluded.signature WHERE excluded.signature IS NOT NULL", ordered)
        variant_ids = {name: self._variant_id(c, run_id, name) for name in {r[2] for r in rows}}
        c.executemany(f"INSERT INTO results (run_id, command_id, variant_id, {', '.join(BARE_COLUMNS)})"
                      f" VALUES (?, (SELECT id FROM commands WHERE text = ?), ?, {', '.join('?' * len(BARE_COLUMNS))})",
                      ((run_id, r[0], variant_ids[r[2]], *r[3:]) for r in rows))
        return sum(1 for r in rows if r[BARE_STATUS] in FINAL_STATUSES)

    def _upsert(self, keys: tuple[str, ...], cols: tuple[str, ...]) -> str:
        """The upsert of a results row given `cols` of its `keys` (the others NULL): an existing row gets every
        one of `keys` (`excluded.` of a column left out is its default, NULL)."""
        sql = self._upsert_sql.get(cols)
        if sql is None:
            updates = ", ".join(f"{k} = excluded.{k}" for k in keys if k not in ("run_id", "job_id"))
            sql = self._upsert_sql[cols] = (
                f"INSERT INTO results ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
                f" ON CONFLICT (run_id, job_id) DO UPDATE SET {updates} RETURNING id")
        return sql

    def _null_default(self, c: sqlite3.Connection) -> frozenset[str]:
        """The results columns whose default is NULL (a row may leave them out when they are None)."""
        if self._null_columns is None:
            self._null_columns = frozenset(
                str(name) for name, default, notnull in
                c.execute("SELECT name, dflt_value, \"notnull\" FROM pragma_table_info('results')")
                if default is None and not notnull)
        return self._null_columns

    def _variant_id(self, c: sqlite3.Connection, run_id: int, name: str) -> int:
        """The registered description of this run's variant; else the one this run used before under that name
        (a resumed run in a new process need not register again); else a row with the name only. Looked up once
        per run and name: the lookup of a use before reads the run's results."""
        key = (run_id, name)
        known = self._variant_ids.get(key)
        if known is not None:
            return known
        vrow = self.variants.get(key)
        if vrow is None:
            row = c.execute("SELECT v.id FROM results r JOIN variants v ON v.id = r.variant_id"
                            " WHERE r.run_id = ? AND v.name = ? ORDER BY r.id DESC LIMIT 1", (run_id, name)).fetchone()
            if row is not None:
                self._variant_ids[key] = int(row[0])
                return int(row[0])
            vrow = variant_row(name)
        found = upsert_returning_id(c, "variants", vrow, "content_hash")
        self._variant_ids[key] = found
        return found

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
        return inserted_id(cur)

    def _command_id(self, c: sqlite3.Connection, text: str, op: str | None, func_name: str | None) -> int:
        known = self._command_ids.get(text)
        if known is not None:
            return known
        row = c.execute("INSERT INTO commands (text, op, func_name) VALUES (?, ?, ?) ON CONFLICT (text) DO NOTHING"
                        " RETURNING id", (text, op, func_name)).fetchone()   # no row when it existed
        if row is None:
            row = c.execute("SELECT id FROM commands WHERE text = ?", (text,)).fetchone()
        found = int(row[0])
        self._remember_command(text, found)
        return found

    def _remember_command(self, text: str, command_id: int) -> None:
        if len(self._command_ids) >= COMMAND_IDS_KEPT:
            self._command_ids.clear()
        self._command_ids[text] = command_id
