"""The store's connections to a SQLite file (see `core.store.schema` for its tables).

Writers take SQLite's write lock up front (`BEGIN IMMEDIATE`) and wait up to the store's
patience for it, as SQLite's busy handler does.
"""

import functools
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from core.store.connections import Cursor, translated
from core.store.schema import connect

# Operational errors (a lock held too long, a full disk, a read-only file) may pass.
_translated = functools.partial(
    translated, sqlite3.Error, sqlite3.IntegrityError, sqlite3.OperationalError
)


class SqliteConnection:
    """A `core.store.connections.Connection` to a store's SQLite file."""

    clock = "(julianday('now') - 2440587.5) * 86400.0"  # the Julian day of 1970-01-01

    def __init__(self, path: Path, timeout: float) -> None:
        self._conn = connect(path, timeout)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        with _translated():
            return self._conn.execute(sql, params)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with _translated():
            self._conn.executemany(sql, rows)

    def begin(self) -> None:
        self.execute("BEGIN IMMEDIATE")

    def commit(self) -> None:
        self.execute("COMMIT")

    def rollback(self) -> None:
        if self._conn.in_transaction:
            self._conn.execute("ROLLBACK")

    @property
    def in_transaction(self) -> bool:
        return self._conn.in_transaction

    @property
    def usable(self) -> bool:
        return True

    def close(self) -> None:
        self._conn.close()
