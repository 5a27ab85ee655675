"""The store's schema, and the check that a file is ours before anything writes to it.

A file is ours when its SQLite header carries `APPLICATION_ID`. A missing or empty file
becomes ours by getting the schema; anything else (not SQLite at all, or another
application's database) is refused with a `StoreError` before a single byte of it changes:
it is first inspected through a read-only connection, which can neither roll back a hot
journal nor checkpoint a WAL into it.
"""

import os
import sqlite3
from collections.abc import Iterable
from contextlib import closing
from pathlib import Path
from typing import Final

from core.store import modes, summaries
from core.store.connections import Connection
from core.store.errors import StoreError
from core.store.records import STATUSES

#: Stored in the header's application_id field: "OPLA", for Optimizer Lab.
APPLICATION_ID: Final = 0x4F504C41
#: Stored in the header's user_version field; raise it with every change to the tables,
#: and add the change to `MIGRATIONS`.
SCHEMA_VERSION: Final = 6

_STATUS_LIST = ", ".join(f"'{status}'" for status in STATUSES)

# The tables of the current schema; the first three are those of version 1.
TABLES: Final = ("runs", "metric_chunks", "events", "commands", "services", "metric_summaries")

DDL: Final = (
    f"""
    CREATE TABLE runs (
        id            TEXT PRIMARY KEY,
        name          TEXT NOT NULL,
        status        TEXT NOT NULL CHECK (status IN ({_STATUS_LIST})),
        config        TEXT NOT NULL,     -- JSON object
        created       REAL NOT NULL,     -- Unix time
        updated       REAL NOT NULL,
        started       REAL,              -- first time the status became 'running'
        finished      REAL,              -- set by finish()
        step          INTEGER NOT NULL DEFAULT 0,
        total_steps   INTEGER,
        epoch         INTEGER,
        error         TEXT,
        final_metrics TEXT,              -- JSON object, set by finish()
        owner         TEXT               -- the process that runs it (see core.store.owner)
    )
    """,
    """
    CREATE TABLE metric_chunks (
        run_id     TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        level      INTEGER NOT NULL,     -- 0 for a flush, L + 1 for a merge of level-L chunks
        first_step INTEGER NOT NULL,
        last_step  INTEGER NOT NULL,
        n_rows     INTEGER NOT NULL,
        keys       TEXT NOT NULL,        -- JSON array: the matrix's columns
        steps      BLOB NOT NULL,        -- n_rows little-endian int64, increasing
        payload    BLOB NOT NULL,        -- n_rows x len(keys) little-endian float64, row-major
        PRIMARY KEY (run_id, last_step)
    )
    """,
    """
    CREATE TABLE events (
        id      INTEGER PRIMARY KEY,
        run_id  TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        step    INTEGER NOT NULL,
        time    REAL NOT NULL,
        kind    TEXT NOT NULL,
        payload TEXT NOT NULL            -- JSON object
    )
    """,
    "CREATE INDEX events_by_run ON events (run_id, step)",
    f"PRAGMA application_id = {APPLICATION_ID}",
    "PRAGMA user_version = 1",
)

# What takes a store of version N to N + 1, by N; applied in order when a store opens.
MIGRATIONS: Final = {
    1: (
        # Commands to a run (stop, pause, knob changes...), written by any process and
        # carried out by the process that owns the run (see core.engine.commands).
        """
        CREATE TABLE commands (
            id      INTEGER PRIMARY KEY,
            run_id  TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            kind    TEXT NOT NULL,
            payload TEXT NOT NULL,       -- JSON object
            created REAL NOT NULL,
            handled REAL,                -- when the owner carried it out (or refused it)
            error   TEXT                 -- why it was refused
        )
        """,
        "CREATE INDEX commands_pending ON commands (run_id) WHERE handled IS NULL",
        # Processes that serve this store: engines (which take new runs) and dashboards.
        """
        CREATE TABLE services (
            owner     TEXT NOT NULL,     -- host:pid:start (see core.store.owner)
            role      TEXT NOT NULL,
            started   REAL NOT NULL,
            heartbeat REAL NOT NULL,
            info      TEXT NOT NULL,     -- JSON object
            PRIMARY KEY (owner, role)
        )
        """,
        "ALTER TABLE runs ADD COLUMN tags TEXT NOT NULL DEFAULT '[]'",  # a JSON array
        "ALTER TABLE runs ADD COLUMN speed REAL",  # steps per second while it trains
        "PRAGMA user_version = 2",
    ),
    2: (
        # A fork: the run it was forked from, and the checkpoint step it started from.
        "ALTER TABLE runs ADD COLUMN parent TEXT",
        "ALTER TABLE runs ADD COLUMN forked_at INTEGER",
        "PRAGMA user_version = 3",
    ),
    3: (
        # The machine (or Ray node) that trains the run.
        "ALTER TABLE runs ADD COLUMN node TEXT",
        "PRAGMA user_version = 4",
    ),
    4: (
        # Each run's metrics summarised at several resolutions (see core.store.summaries),
        # filled for the runs already stored by `summaries.backfill`.
        """
        CREATE TABLE metric_summaries (
            run_id     TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            level      INTEGER NOT NULL,  -- 1: BUCKET_ROWS rows, L + 1: FANOUT level-L buckets
            first_step INTEGER NOT NULL,
            last_step  INTEGER NOT NULL,
            keys       TEXT NOT NULL,     -- JSON array: the matrix's rows
            stats      BLOB NOT NULL,     -- len(keys) x 6 little-endian float64, row-major
            PRIMARY KEY (run_id, level, last_step)
        )
        """,
        "PRAGMA user_version = 5",
    ),
    5: (
        # Never written: the step and the run's steps per epoch say where it is.
        "ALTER TABLE runs DROP COLUMN epoch",
        "PRAGMA user_version = 6",
    ),
}

# What fills a table that a migration creates, by the version it migrates from: run in
# the migration's transaction, after its statements.
FILLS: Final = {4: summaries.backfill}


def fill(conn: Connection, version: int) -> None:
    """Run the fills of the migrations from `version` (0: a new store, which needs none)."""
    for step in range(max(version, 1), SCHEMA_VERSION):
        if step in FILLS:
            FILLS[step](conn)


def connect(path: Path, timeout: float, *, read_only: bool = False) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), usable from any thread.

    Args:
        path: The SQLite file.
        timeout: Seconds a statement waits for another connection's lock (SQLite's busy
            timeout) before it fails.
        read_only: Open the file read-only (`mode=ro`), without the settings a writer
            makes: to look at a file before anything may change it (`prepare` reads its
            schema version so, leaving another application's database untouched).
    """
    if read_only:
        target, uri = f"{path.resolve().as_uri()}?mode=ro", True
    else:
        target, uri = str(path), False
    try:
        conn = sqlite3.connect(
            target, timeout=timeout, isolation_level=None, check_same_thread=False, uri=uri
        )
        if not read_only:
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA synchronous = NORMAL")  # with WAL: durable except on power loss
            # PostgreSQL's two-argument maximum, so that one SQL text serves both backends.
            conn.create_function("greatest", 2, max, deterministic=True)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open {path}: {exc}") from exc
    return conn


def prepare(path: Path, timeout: float) -> None:
    """Make sure `path` is a store of the current schema in WAL mode; create it if needed.

    Creates the file and its folder (for their owner alone: see `core.store.modes`), and
    upgrades a store of an older schema. Raises `StoreError`
    for a file that is not SQLite, another application's database, or a store of a newer
    schema version, leaving it untouched.
    """
    try:
        modes.make_folder(path.parent)
        exists = path.exists() and path.stat().st_size > 0
    except OSError as exc:
        raise StoreError(f"cannot use {path}: {exc.strerror or exc}") from exc
    version = 0
    _check_writable(path)
    # A file that exists is read through SQLite alone: closing a descriptor of our own on
    # it would drop every POSIX lock this process holds on it (SQLite's are per process),
    # and a store open here already (an engine beside a dashboard's reader, in one
    # process) would then see another process take it for unused, check its WAL into the
    # file and reset it under this one's feet: "database disk image is malformed".
    if exists:
        with closing(connect(path, timeout, read_only=True)) as conn:
            version = _inspect(conn, path)
    else:
        try:
            modes.make_file(path)  # SQLite gives its -wal and -shm the file's mode
        except OSError as exc:
            raise StoreError(f"cannot create {path}: {exc.strerror or exc}") from exc
    with closing(connect(path, timeout)) as conn:
        if version < SCHEMA_VERSION:
            _upgrade(conn, path)
        _set_wal(conn, path)


def _upgrade(conn: sqlite3.Connection, path: Path) -> None:
    """Create the schema in an empty database, or migrate an older store, in one
    transaction."""
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Looked at again under the write lock: another process may have just done it.
            found = _inspect(conn, path)
            if found == 0:
                for statement in DDL:
                    conn.execute(statement)
            for step in range(max(found, 1), SCHEMA_VERSION):
                for statement in MIGRATIONS[step]:
                    conn.execute(statement)
            fill(conn, found)
            conn.execute("COMMIT")
        finally:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
    except sqlite3.Error as exc:
        raise StoreError(f"cannot create or upgrade the store in {path}: {exc}") from exc


def _check_writable(path: Path) -> None:
    # SQLite would say only "unable to open database file" (or, worse, take the file for
    # a damaged one): in WAL mode it must write the file and create two next to it.
    for target in (path, path.parent) if path.exists() else (path.parent,):
        if not os.access(target, os.W_OK):
            raise StoreError(
                f"cannot write {target} (a read-only file system, or no permission); the "
                "lab needs a writable store: copy it somewhere writable or set OPTLAB_STORE"
            )


def _inspect(conn: sqlite3.Connection, path: Path) -> int:
    """The store's schema version, or 0 if the database is empty; raise if it is not ours,
    damaged, or newer than this lab."""
    try:
        application_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = sorted(
            row[0]
            for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if not row[0].startswith("sqlite_")
        )
    except sqlite3.DatabaseError as exc:
        if "file is not a database" in str(exc):  # SQLITE_NOTADB: no SQLite header
            raise StoreError(
                f"{path} is not a SQLite database (corrupt, or another kind of file); "
                "refusing to open it as the Optimizer Lab store"
            ) from exc
        raise StoreError(f"{path} is a damaged or unreadable SQLite database: {exc}") from exc
    if application_id == APPLICATION_ID:
        return check_version(version, tables, str(path))
    if application_id != 0:
        raise StoreError(
            f"{path} belongs to another application (SQLite application_id "
            f"{application_id:#x}), not Optimizer Lab; refusing to open it"
        )
    if tables:
        raise StoreError(
            f"{path} is a SQLite database of another application (tables: "
            f"{', '.join(tables)}), not an Optimizer Lab store; refusing to open it"
        )
    return 0


def check_version(version: int, tables: Iterable[str], name: str) -> int:
    """`version`, if the lab reads a store of that schema version holding `tables`; else
    raise a `StoreError` for store `name`."""
    if not 1 <= version <= SCHEMA_VERSION:
        raise StoreError(
            f"{name} is an Optimizer Lab store of schema version {version}; "
            f"this version of the lab reads versions 1 to {SCHEMA_VERSION}"
        )
    expected = TABLES if version == SCHEMA_VERSION else TABLES[:3]
    if missing := sorted(set(expected) - set(tables)):
        raise StoreError(f"{name} is a damaged Optimizer Lab store: missing {', '.join(missing)}")
    return version


def _set_wal(conn: sqlite3.Connection, path: Path) -> None:
    # Persistent in the file, so this is a no-op after the first time.
    try:
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    except sqlite3.Error as exc:
        raise StoreError(f"cannot switch {path} to WAL mode: {exc}") from exc
    if mode.lower() != "wal":
        raise StoreError(f"{path} cannot use WAL mode (it stays in {mode!r} mode)")
