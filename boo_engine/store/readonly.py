"""Opening a results database only to read it (compare, merge, trends): never created, never migrated in place.

A file is ours when it holds sqlite-utils' `_sqlite_migrations` table with the `boo_results` migration set and
every migration it lists is one of ours. Then:
- the same migrations as ours: read as it is;
- fewer (an older boo-tui wrote it): a private copy is migrated and read, the file itself is left untouched;
- one we do not know (a newer boo-tui wrote it), or not ours at all, or not SQLite / damaged: `SchemaError`, one
  line naming the file (a usage error, exit 2).
"""
from __future__ import annotations

import contextlib
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path

from sqlite_utils import Database

from . import schema
from .connection import StoreError

MIGRATION_SET = "boo_results"


class SchemaError(StoreError):
    """A database that is not a boo-tui results database, is damaged, or was written by a newer boo-tui."""


def our_migrations() -> list[str]:
    """The names of our migrations, in order (m001_initial ...)."""
    return [m.name for m in schema.migrations._migrations]


def applied_migrations(conn: sqlite3.Connection, path: Path) -> list[str]:
    """The `boo_results` migrations the file has applied; SchemaError when it is not ours or cannot be read."""
    try:
        has_table = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_sqlite_migrations'").fetchone()
        if not has_table:
            raise SchemaError(f"{path} is not a boo-tui results database (no migrations table)")
        rows = conn.execute("SELECT name FROM _sqlite_migrations WHERE migration_set = ? ORDER BY id",
                            (MIGRATION_SET,)).fetchall()
    except sqlite3.DatabaseError as e:
        raise SchemaError(f"{path} is not a readable SQLite database ({e})") from None
    names = [r[0] for r in rows]
    if not names:
        raise SchemaError(f"{path} is not a boo-tui results database (no {MIGRATION_SET} migrations)")
    unknown = [n for n in names if n not in our_migrations()]
    if unknown:
        raise SchemaError(f"{path} was written by a newer boo-tui (schema {unknown[-1]}, this one knows up to "
                          f"{our_migrations()[-1]}): use that version")
    return names


def writable_schema(conn: sqlite3.Connection, path: Path) -> None:
    """Refuse, before any write, a file a newer boo-tui wrote or a SQLite file that is not ours (tables, but no
    migrations of ours): SchemaError, one line. A new or empty file, or one of ours up to our schema, passes."""
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()]
    except sqlite3.DatabaseError as e:
        raise SchemaError(f"{path} is not a readable SQLite database ({e})") from None
    if tables:
        applied_migrations(conn, path)


def check_schema(path: Path) -> bool:
    """Whether `path` is a results database of our exact schema (False: an older one, which a copy can migrate).
    SchemaError when it is missing, not ours, damaged or newer."""
    if not path.is_file():
        raise SchemaError(f"no results database at {path}")
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as e:
        raise SchemaError(f"{path}: cannot open ({e})") from None
    try:
        names = applied_migrations(conn, path)
    finally:
        conn.close()
    return names == our_migrations()


@contextlib.contextmanager
def current_copy(path: str | Path) -> Iterator[Path]:
    """A path to the results database `path` in our current schema: `path` itself when it is current, a migrated
    private copy (removed afterwards) when it is older. SchemaError when it is missing, not ours, damaged or
    newer. The file at `path` is never written."""
    path = Path(path)
    if check_schema(path):
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="boo-migrate-") as tmp:
        copy = Path(tmp) / path.name
        _copy(path, copy)
        db = Database(sqlite3.connect(str(copy)))
        schema.apply(db)
        db.conn.close()
        yield copy


@contextlib.contextmanager
def open_readonly(path: str | Path) -> Iterator[sqlite3.Connection]:
    """A read connection (rows by column name) to the results database at `path`, of our current schema (see
    `current_copy`). SchemaError otherwise, or when the file turns out damaged while read."""
    path = Path(path)
    with current_copy(path) as source:
        # mode=ro never creates or migrates; a WAL file beside it is still read (a run being written is seen
        # up to its last commit)
        conn = sqlite3.connect(f"file:{source}?mode=ro", uri=True, timeout=30.0)
        conn.row_factory = sqlite3.Row
        try:
            yield conn
        except sqlite3.DatabaseError as e:
            raise SchemaError(f"{path}: {e}") from None
        finally:
            conn.close()


def _copy(src: Path, dst: Path) -> None:
    """A consistent copy of a live SQLite file (its WAL included), through SQLite's backup API."""
    s = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
    d = sqlite3.connect(str(dst))
    try:
        s.backup(d)
    finally:
        d.close()
        s.close()


def copy_database(src: Path, dst: Path) -> None:
    """`src` copied to `dst` through the backup API (consistent even while another process writes it)."""
    _copy(src, dst)


__all__ = ["SchemaError", "applied_migrations", "check_schema", "copy_database", "current_copy", "open_readonly",
           "our_migrations", "writable_schema"]
