"""The store on a PostgreSQL server (`postgresql://user:password@host:port/database`).

The tables are SQLite's (see `core.store.schema`), their types translated, plus a `rowid`
column where the store orders by SQLite's row ids; the table `optlab_store` holds what a
SQLite file's header holds: that the database is the lab's, and its schema version. A
database with other tables and without that table is refused, untouched, as a foreign
SQLite file is. Every write transaction first takes the store's advisory lock
(`WRITE_LOCK`), so writers take turns as on SQLite, and waits for it at most the store's
patience (`lock_timeout`). The engine that serves the store holds `ENGINE_LOCK` for its
whole life, from whichever machine.

Both locks are keyed by the lab and the schema, so stores in two schemas of one database
(`?options=-csearch_path%3Dname` in the URL) are as independent as two SQLite files.
"""

import contextlib
import functools
import re
from collections.abc import Iterator, Sequence
from contextlib import closing
from typing import Any, Final

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import TransactionStatus

from core.redaction import redacted
from core.store.connections import Cursor, translated
from core.store.errors import DatabaseError, StoreError
from core.store.paths import shown
from core.store.schema import (
    APPLICATION_ID,
    DDL,
    MIGRATIONS,
    SCHEMA_VERSION,
    check_version,
    fill,
)

#: The table that marks a database as the lab's store, with its schema version.
MARK_TABLE: Final = "optlab_store"

#: Seconds to wait for the server to answer a new connection.
CONNECT_SECONDS: Final = 10

#: The store's write lock, held by a write transaction until it ends.
WRITE_LOCK: Final = f"pg_advisory_xact_lock({APPLICATION_ID}, hashtext(current_schema()))"
#: The lock of the engine that serves the store, tried and then held by a session.
ENGINE_LOCK: Final = f"pg_try_advisory_lock({APPLICATION_ID + 1}, hashtext(current_schema()))"

# SQLite's column types, as PostgreSQL spells them.
_TYPES: Final = (
    (r"\bINTEGER PRIMARY KEY\b", "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"),
    (r"\bINTEGER\b", "BIGINT"),
    (r"\bREAL\b", "DOUBLE PRECISION"),
    (r"\bBLOB\b", "BYTEA"),
)

# What a new database gets besides SQLite's first tables: the row ids that SQLite has
# implicitly, and the mark.
_CREATE: Final = (
    "ALTER TABLE runs ADD COLUMN rowid BIGINT GENERATED ALWAYS AS IDENTITY",
    "ALTER TABLE metric_chunks ADD COLUMN rowid BIGINT GENERATED ALWAYS AS IDENTITY",
    f"CREATE TABLE {MARK_TABLE} (application BIGINT NOT NULL, schema_version INTEGER NOT NULL)",
    f"INSERT INTO {MARK_TABLE} VALUES ({APPLICATION_ID}, 1)",
)

# Connection failures, a server shutting down, a full disk and a lock held too long are
# all operational errors: they may pass.
_translated = functools.partial(
    translated, psycopg.Error, psycopg.IntegrityError, psycopg.OperationalError
)


class PostgresConnection:
    """A `core.store.connections.Connection` to a store's PostgreSQL database."""

    clock = "extract(epoch FROM clock_timestamp())"  # the server's: every host shares it

    def __init__(self, url: str, timeout: float) -> None:
        with _connecting(url):
            # The URL's own options (e.g. `?options=-csearch_path%3Dlab`) are kept.
            options = conninfo_to_dict(url).get("options") or ""
            self._conn = psycopg.connect(
                url,
                autocommit=True,  # transactions are explicit, as on SQLite
                connect_timeout=CONNECT_SECONDS,
                options=f"{options} -c lock_timeout={round(timeout * 1000)}".strip(),
            )

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        with _translated():
            # Binary results: blobs come as they are, not as hex text to decode.
            return self._conn.execute(_placeholders(sql), params, binary=True)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with _translated(), self._conn.cursor() as cursor:
            cursor.executemany(_placeholders(sql), rows)

    def begin(self) -> None:
        self.execute("BEGIN")
        self.execute(f"SELECT {WRITE_LOCK}")

    def commit(self) -> None:
        self.execute("COMMIT")

    def rollback(self) -> None:
        if self.in_transaction and self.usable:
            # If the connection broke meanwhile, the server ends the transaction itself.
            with contextlib.suppress(DatabaseError):
                self.execute("ROLLBACK")

    @property
    def in_transaction(self) -> bool:
        status = self._conn.info.transaction_status
        return status in (TransactionStatus.INTRANS, TransactionStatus.INERROR)

    @property
    def usable(self) -> bool:
        return not (self._conn.closed or self._conn.broken)

    def close(self) -> None:
        self._conn.close()


@contextlib.contextmanager
def _connecting(url: str) -> Iterator[None]:
    """`_translated`, its errors without the secrets of `url`: libpq quotes the part of a
    URL that it cannot parse, a password as well (`invalid percent-encoded token:
    "50%off"`)."""
    try:
        with _translated():
            yield
    except DatabaseError as exc:
        message = redacted(str(exc), url)
        if message == str(exc):
            raise
        # Not chained: the driver's error, which quotes the secret, stays out of tracebacks.
        raise DatabaseError(message, transient=exc.transient) from None


def prepare(url: str, timeout: float) -> None:
    """Make sure the database at `url` is a store of the current schema; create its
    tables if it has none. Raises `StoreError` for a server that cannot be reached, a
    database of another application, or a store of a newer schema version, leaving it
    untouched."""
    name = shown(url)
    try:
        with closing(PostgresConnection(url, timeout)) as conn:
            conn.begin()  # another process may be creating the tables right now
            try:
                version = _inspect(conn, name)
                for statement in _upgrade(version):
                    conn.execute(statement)
                fill(conn, version)
                conn.commit()
            finally:
                conn.rollback()
    except DatabaseError as exc:
        raise StoreError(f"cannot use the store {name}: {exc}") from exc


def hold_engine_lock(url: str) -> PostgresConnection | None:
    """A connection that holds the store's engine lock until it closes (or its process
    ends); None if another session holds it."""
    conn = PostgresConnection(url, CONNECT_SECONDS)
    if conn.execute(f"SELECT {ENGINE_LOCK}").fetchone()[0]:
        return conn
    conn.close()
    return None


def translate(statement: str) -> str | None:
    """A statement of SQLite's schema as PostgreSQL takes it; None for a `PRAGMA`, which
    has no counterpart (the mark table holds what they set)."""
    if statement.lstrip().upper().startswith("PRAGMA"):
        return None
    for pattern, replacement in _TYPES:
        statement = re.sub(pattern, replacement, statement)
    return statement


def _upgrade(version: int) -> list[str]:
    """The statements that take a store of schema `version` (0: none) to the current."""
    statements = list(DDL) + list(_CREATE) if version == 0 else []
    for step in range(max(version, 1), SCHEMA_VERSION):
        statements.extend(MIGRATIONS[step])
    if version < SCHEMA_VERSION:
        statements.append(f"UPDATE {MARK_TABLE} SET schema_version = {SCHEMA_VERSION}")
    return [sql for sql in map(translate, statements) if sql is not None]


def _inspect(conn: PostgresConnection, name: str) -> int:
    """The store's schema version, or 0 if the database has no tables; raise if it is
    not the lab's, or newer than this lab."""
    tables = {
        table
        for (table,) in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
        ).fetchall()
    }
    if MARK_TABLE not in tables:
        if tables:
            raise StoreError(
                f"{name} holds tables of another application ({', '.join(sorted(tables))}), "
                "not an Optimizer Lab store; refusing to use it"
            )
        return 0
    mark = conn.execute(f"SELECT application, schema_version FROM {MARK_TABLE}").fetchone()
    if mark is None or mark[0] != APPLICATION_ID:
        raise StoreError(f"{name} is a damaged Optimizer Lab store: its {MARK_TABLE} is wrong")
    return check_version(mark[1], tables, name)


@functools.lru_cache(maxsize=256)
def _placeholders(sql: str) -> str:
    """`sql` with psycopg's `%s` placeholders for the store's `?`."""
    if "%" in sql:
        raise ValueError(f"the store's SQL must not hold '%': {sql}")
    return sql.replace("?", "%s")
