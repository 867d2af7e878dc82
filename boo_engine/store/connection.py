"""How every connection to the results file is opened (the writer's and each reader's), and the error the store
raises when the file cannot be opened, read or written."""
from __future__ import annotations

import sqlite3
from pathlib import Path

from ..errors import BooError

# Another process writing the same file holds the write lock for one transaction: wait for it this long.
BUSY_TIMEOUT_S = 30.0


class StoreError(BooError):
    """The results database cannot be opened, read or written. The message names the file."""


def connect(path: Path) -> sqlite3.Connection:
    """A connection that waits for another writer (busy timeout) and returns rows addressable by column name."""
    conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S)
    conn.row_factory = sqlite3.Row
    return conn
