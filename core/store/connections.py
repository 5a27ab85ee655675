"""A pool of database connections shared by the threads of one store, whichever the
database.

Each connection is used by one thread at a time (it is checked out for one operation and
returned), so threads never share a statement or a transaction, and readers never queue
behind a writer (SQLite in WAL mode and PostgreSQL both let them read the last committed
state while another connection writes). A write transaction is the only writer of the
whole store until it ends (`Connection.begin`), as SQLite's write lock makes it: what
reads and then writes (marking interrupted runs, merging a run's chunks) needs no more
care on PostgreSQL. The pool grows to the number of threads that use it at once; a
connection that broke (a server that went away) is closed rather than reused.
"""

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from core.store.errors import ConstraintError, DatabaseError, StoreError

#: Idle connections kept open for reuse; more are closed when returned.
MAX_IDLE = 8


class Cursor(Protocol):
    """What a statement returns: its rows, and how many rows it changed."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Connection(Protocol):
    """One connection in autocommit mode, with `?` placeholders, raising the store's
    `DatabaseError`s (see `core.store.sqlite` and `core.store.postgres`)."""

    #: The database's clock in SQL, as Unix seconds: what heartbeats are written and
    #: judged by, one clock for every host that shares the store.
    clock: str

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor: ...

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None: ...

    def begin(self) -> None:
        """Start a write transaction, waiting (up to the store's patience) until no other
        connection to the store writes."""

    def commit(self) -> None: ...

    def rollback(self) -> None:
        """Roll back the transaction, if any; never raises."""

    @property
    def in_transaction(self) -> bool: ...

    @property
    def usable(self) -> bool:
        """Whether the connection can serve another operation."""

    def close(self) -> None: ...


class ConnectionPool:
    """Hands out connections to one store, opening more (with `open`) when all are in
    use."""

    def __init__(self, open: Callable[[], Connection], name: str) -> None:
        self.name = name
        self._open = open
        self._lock = threading.Lock()  # guards _idle and _closed
        self._idle: list[Connection] = []
        self._closed = False

    @contextmanager
    def connection(self) -> Iterator[Connection]:
        """A connection for this thread alone, in autocommit mode, until the block ends."""
        conn = self._acquire()
        try:
            yield conn
        finally:
            self._release(conn)

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """A connection inside a write transaction, committed if the block ends normally."""
        with self.connection() as conn:
            try:
                conn.begin()
                yield conn
                conn.commit()
            finally:
                if conn.in_transaction:  # the block, the commit or waiting to begin failed
                    conn.rollback()

    def close(self) -> None:
        """Close idle connections now and busy ones as they are returned; idempotent."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def _acquire(self) -> Connection:
        with self._lock:
            if self._closed:
                raise StoreError(f"the store {self.name} is closed")
            if self._idle:
                return self._idle.pop()
        return self._open()

    def _release(self, conn: Connection) -> None:
        with self._lock:
            if not self._closed and conn.usable and len(self._idle) < MAX_IDLE:
                self._idle.append(conn)
                return
        conn.close()


@contextmanager
def translated(
    error: type[Exception], constraint: type[Exception], transient: type[Exception]
) -> Iterator[None]:
    """Raise a driver's `error`s as the store's: `constraint` ones as `ConstraintError`,
    `transient` ones as transient `DatabaseError`s, the others as lasting ones."""
    try:
        yield
    except constraint as exc:
        raise ConstraintError(str(exc)) from exc
    except transient as exc:
        raise DatabaseError(str(exc), transient=True) from exc
    except error as exc:
        raise DatabaseError(str(exc), transient=False) from exc
