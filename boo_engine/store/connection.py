"""How every connection to the results file is opened (the writer's and each reader's), and the error the store
raises when the file cannot be opened, read or written."""
from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

from ..errors import BooError

# Another process writing the same file holds the write lock for one transaction: wait for it this long.
BUSY_TIMEOUT_S = 30.0


class StoreError(BooError):
    """The results database cannot be opened, read or written. The message names the file."""


class StoreWriteError(StoreError):
    """The file can no longer be written (disk full, I/O error, read-only): the run cannot go on storing
    results. Its message is the one line a front end shows: the file, the reason, how many results of this
    session made it into the file, and what to do."""

    def __init__(self, path: Path, reason: str, stored: int) -> None:
        hint = "make it writable" if reason == "read-only" else "free space"
        super().__init__(f"the results database at {path} cannot be written: {reason}; {stored} results stored; "
                         f"{hint} and run --resume")
        self.path = path
        self.reason = reason
        self.stored = stored


# SQLite's primary result codes (an extended code carries its primary one in the low byte)
_SQLITE_REASONS = {13: "disk full", 10: "I/O error", 8: "read-only", 14: "cannot open the file"}
_ERRNO_REASONS = {errno.ENOSPC: "disk full", errno.EDQUOT: "disk quota exceeded", errno.EFBIG: "file too large",
                  errno.EROFS: "read-only", errno.EIO: "I/O error"}


def unwritable_reason(e: BaseException) -> str | None:
    """Why `e` means the file cannot be written at all (disk full, I/O error, read-only), or None for any other
    error (a bug, a constraint, a busy lock)."""
    if isinstance(e, sqlite3.Error):
        code = getattr(e, "sqlite_errorcode", None)
        return None if code is None else _SQLITE_REASONS.get(code & 0xFF)
    if isinstance(e, OSError):
        return _ERRNO_REASONS.get(e.errno or 0)
    return None


def connect(path: Path) -> sqlite3.Connection:
    """A connection that waits for another writer (busy timeout) and returns rows addressable by column name."""
    conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S)
    conn.row_factory = sqlite3.Row
    return conn
