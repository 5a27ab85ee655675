"""The store: runs, their events and their metrics, in a SQLite file or a PostgreSQL
database, as one object built from the store's parts."""

import os
from pathlib import Path
from types import TracebackType

from core.store.db import LOCK_PATIENCE, Database
from core.store.events import Events
from core.store.mailbox import Mailbox
from core.store.runs import RunRows
from core.store.scalars import Scalars
from core.store.writer import Writers


class Store(Writers, RunRows, Events, Mailbox, Scalars):
    """Runs, events and metrics of the lab, safe to use from many threads and processes.

    It lives in a SQLite file, or in a PostgreSQL database that several machines share
    (see `core.store.postgres`). Opening checks it (see `core.store.schema`): a new or
    empty file or database gets the schema; a corrupt or foreign one raises `StoreError`
    and is left untouched. Every method takes a pooled connection for its own use (see
    `core.store.db`), so the dashboard reads while training threads write. Metrics are
    written through `metrics_writer`, which never blocks the training thread on I/O.

    Its methods are those of its parts, which share one `Database` (`db`): `RunRows`,
    `Events`, `Mailbox` (commands, services, progress), `Scalars` (reading metrics) and
    `Writers` (writing them). The database's errors (a full disk, a read-only file, a
    lock held too long, a server gone) are raised as `StoreError`s naming the store. A
    run's final status that cannot be written is kept (see `RunRows.finish`).
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        flush_interval: float = 0.5,
        timeout: float = LOCK_PATIENCE,
    ) -> None:
        """Open (or create) the store at `path`, a file's path or a `postgresql://` URL
        (see `paths.canonical`, which refuses any other URL before anything is created);
        by default `paths.default_location()`.

        `flush_interval` is the default for metrics writers, in seconds; `timeout` is how
        long a write waits for another connection's write lock (retrying with growing
        pauses, as SQLite's busy handler does) before it fails: by default
        `LOCK_PATIENCE`, so that a run outlasts another process holding the lock for a
        while (a long export, a frozen process mid-write) instead of failing.
        """
        db = Database(path, timeout=timeout)
        # `Writers` is the only part with state of its own; it sets `db` for all of them.
        super().__init__(db, flush_interval=flush_interval)
        #: Where the store is: a path or a URL (for another process to open).
        self.location = db.location
        #: The location as messages show it (without a URL's password).
        self.name = db.name
        #: The path its side files are named after (see `paths.files_base`).
        self.path = db.path

    def close(self) -> None:
        """Flush and stop every metrics writer, write the final statuses still kept in
        memory (if the database now takes them), then close all connections; idempotent.

        A writer's failure stays with the writer, for its training thread to raise.
        """
        self.shut_writers()
        self.db.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def checkpoint_folder(self, run_id: str) -> Path:
        """Where the run's checkpoints live (see `Database.checkpoint_folder`)."""
        return self.db.checkpoint_folder(run_id)

    @property
    def datasets_folder(self) -> Path:
        """Where uploaded datasets are kept (see `Database.datasets_folder`)."""
        return self.db.datasets_folder
