"""The one transaction layer under every part of the store: where it lives, its pooled
connections, reads and write transactions with the database's errors named, the writes
kept for later while the database refuses them, and the folders beside it.

The two databases differ only below this layer: `core.store.sqlite` and
`core.store.postgres` open them, and each `Connection` speaks the store's SQL (`?`
placeholders, `greatest`, its `clock`). A part of the store (`Part`) holds a `Database`
and runs its statements through `read` and `write`.
"""

import functools
import threading
from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from core.store import modes, schema
from core.store.connections import Connection, ConnectionPool
from core.store.errors import ConstraintError, DatabaseError, StoreError
from core.store.paths import (
    Location,
    canonical,
    default_location,
    files_base,
    is_url,
    run_folder,
    shown,
)
from core.store.sqlite import SqliteConnection

#: Seconds a write waits while another process holds the store's write lock.
LOCK_PATIENCE = 60.0


def in_list(count: int) -> str:
    """The placeholders of an `IN (...)` list of `count` values; PostgreSQL has no empty
    `IN ()`, so for none, a value never written stands in."""
    return ", ".join("?" * count) or "''"


class Database:
    """A store's database, SQLite file or PostgreSQL, shared by the threads of a process.

    Every `read` and `write` takes a pooled connection for its own use (see
    `core.store.connections`), so readers never wait for a writer. The database's errors
    (a full disk, a read-only file, a lock held too long, a server gone) come out as
    `StoreError`s naming the store.
    """

    def __init__(self, location: Location | None = None, *, timeout: float = LOCK_PATIENCE) -> None:
        """Open (or create) the store at `location`, a file's path or a `postgresql://`
        URL (see `paths.canonical`, which refuses any other URL before anything is
        created); by default `paths.default_location()`. Its files, and those beside it,
        are made for their owner alone, or its group too (see `modes`).

        `timeout` is how long a write waits for another connection's write lock
        (retrying with growing pauses, as SQLite's busy handler does) before it fails.
        """
        #: Where the store is: a path or a URL (for another process to open).
        self.location = canonical(default_location() if location is None else location)
        #: The location as messages show it (without a URL's password).
        self.name = shown(self.location)
        #: The path its side files are named after (see `paths.files_base`).
        self.path = files_base(self.location)
        modes.sharing()  # a bad OPTLAB_SHARED is refused before any file is made
        open_connection: Callable[[], Connection]
        if is_url(self.location):
            from core.store import postgres  # imports the driver only for such a store

            postgres.prepare(self.location, timeout)
            open_connection = functools.partial(postgres.PostgresConnection, self.location, timeout)
        else:
            schema.prepare(self.path, timeout)
            open_connection = functools.partial(SqliteConnection, self.path, timeout)
        #: The connections; a metrics writer takes its transactions here directly, and
        #: handles their errors itself (see `core.store.writer`).
        self.pool = ConnectionPool(open_connection, self.name)
        self._deferred_lock = threading.Lock()
        # key -> (statement, parameters) refused for now, oldest first
        self._deferred: dict[Hashable, tuple[str, tuple[Any, ...]]] = {}

    # Reading and writing

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A pooled connection in autocommit mode; the database's errors become
        `StoreError`s naming the store."""
        try:
            with self.pool.connection() as conn:
                yield conn
        except DatabaseError as exc:
            raise StoreError(f"cannot read {self.name}: {exc}") from exc

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A write transaction, after the deferred writes; the database's errors become
        `StoreError`s naming the store, except broken constraints (the caller's)."""
        self.write_deferred()
        try:
            with self.pool.transaction() as conn:
                yield conn
        except ConstraintError:
            raise
        except DatabaseError as exc:
            raise StoreError(f"cannot write to {self.name}: {exc}") from exc

    # Writes kept while the database refuses them

    def defer(self, key: Hashable, sql: str, params: Sequence[Any]) -> None:
        """Keep a write that the database refused for now (see `DatabaseError.transient`),
        to run before the next write, or on `close`; it replaces the one kept for `key`."""
        with self._deferred_lock:
            self._deferred[key] = (sql, tuple(params))

    def deferred(self, key: Hashable) -> tuple[Any, ...] | None:
        """The parameters of the write kept for `key`, None if there is none."""
        with self._deferred_lock:
            kept = self._deferred.get(key)
        return None if kept is None else kept[1]

    def forget_deferred(self, key: Hashable) -> None:
        """Drop the write kept for `key`, if any: what it wrote is moot."""
        with self._deferred_lock:
            self._deferred.pop(key, None)

    def write_deferred(self) -> None:
        """Run the kept writes, oldest first, up to the first that fails again."""
        with self._deferred_lock:
            kept = list(self._deferred.items())
        for key, write in kept:
            try:
                with self.pool.transaction() as conn:
                    conn.execute(*write)
            except (DatabaseError, StoreError):
                return
            with self._deferred_lock:
                if self._deferred.get(key) is write:  # not replaced meanwhile
                    del self._deferred[key]

    def close(self) -> None:
        """Run the kept writes (if the database now takes them), then close every
        connection; idempotent."""
        self.write_deferred()
        self.pool.close()

    # Folders beside the database

    def checkpoint_folder(self, run_id: str) -> Path:
        """Where the run's checkpoints, and the files kept beside them, live:
        `<store>.checkpoints/<run id>/` beside the store's file (see
        `core.engine.checkpoints`). Raises `InvalidInput` naming `run_id` for an id that
        could lead anywhere else (see `paths.run_folder`)."""
        return run_folder(self.path.with_name(f"{self.path.stem}.checkpoints"), run_id)

    @property
    def datasets_folder(self) -> Path:
        """Where datasets uploaded from the dashboard are kept: `<store>.datasets/` beside
        the store's file (see `core.data.files.keep`)."""
        return self.path.with_name(f"{self.path.stem}.datasets")


class Part:
    """A part of the store: methods over one `Database`, which it shares with the others
    (see `core.store.store.Store`)."""

    def __init__(self, db: Database) -> None:
        self.db = db
