"""Results store: SQLite (the sqlite3 module; sqlite-utils runs the migrations), WAL, one writer thread fed by a queue,
and read queries for history, comparison and resume. `datasette boo-results.db` browses it as-is."""
from __future__ import annotations

from .store import DB_ENV_VAR, DEFAULT_DB_NAME, RUN_STATUSES, Store, StoreError, StoreWriteError, default_db_path

__all__ = ["DB_ENV_VAR", "DEFAULT_DB_NAME", "RUN_STATUSES", "Store", "StoreError", "StoreWriteError",
           "default_db_path"]
