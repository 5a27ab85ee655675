"""A pool of SQLite connections shared by the threads of one store.

Each connection is used by one thread at a time (it is checked out for one operation and
returned), so threads never share a statement or a transaction, and readers never queue
behind a writer: in WAL mode SQLite lets them read the last committed state while another
connection writes. Writers take SQLite's write lock up front (`BEGIN IMMEDIATE`) and wait
up to `timeout` seconds for it. The pool grows to the number of threads that use it at
once; connections are opened with `check_same_thread=False` so that `close` may close them
from any thread.
"""

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from core.store.errors import StoreError
from core.store.schema import connect

#: Idle connections kept open for reuse; more are closed when returned.
MAX_IDLE = 8


class ConnectionPool:
    """Hands out connections to one database file, opening more when all are in use."""

    def __init__(self, path: Path, timeout: float) -> None:
        self.path = path
        self.timeout = timeout
        self._lock = threading.Lock()  # guards _idle and _closed
        self._idle: list[sqlite3.Connection] = []
        self._closed = False

    @contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        """A connection for this thread alone, in autocommit mode, until the block ends."""
        conn = self._acquire()
        try:
            yield conn
        finally:
            self._release(conn)

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A connection inside a write transaction, committed if the block ends normally."""
        with self.connection() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            finally:
                if conn.in_transaction:  # the block or the commit failed
                    conn.execute("ROLLBACK")

    def close(self) -> None:
        """Close idle connections now and busy ones as they are returned; idempotent."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def _acquire(self) -> sqlite3.Connection:
        with self._lock:
            if self._closed:
                raise StoreError(f"the store {self.path} is closed")
            if self._idle:
                return self._idle.pop()
        return connect(self.path, self.timeout)

    def _release(self, conn: sqlite3.Connection) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < MAX_IDLE:
                self._idle.append(conn)
                return
        conn.close()
