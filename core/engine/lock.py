"""The engine lock: one engine serves a store, and this host can tell which one does.

The engine that serves a store holds an exclusive `flock` on `STORE.engine.lock` for its
whole life, its identity (`core.store.owner.current`) written in the file; the kernel lets
go when its process ends, however it ends. The file is beside the store's own (for a
PostgreSQL store, beside the store's files on this host: see `files_base`); a PostgreSQL
store's engine also holds an advisory lock in the database, which keeps out an engine on
any other machine.

On this host the file is also the evidence that an engine still serves, where its
heartbeat cannot be: on a loaded machine the heartbeat thread may be kept from beating
for longer than `LIVENESS_SECONDS`, but a live process that holds the lock serves (see
`core.engine.liveness`). Telling whether the lock is held means trying to take it: a check
takes it shared, and lets go at once, when no engine holds it. So that a check never makes
an engine that starts at that instant give up, a start that finds the lock taken tries
again for `START_PATIENCE` seconds.
"""

from __future__ import annotations

import contextlib
import fcntl
import time
from pathlib import Path
from typing import IO, Final

from core.store import StoreError, is_url, modes, owner, shown
from core.store.errors import DatabaseError
from core.store.paths import Location, files_base

#: How long a start tries for a lock it finds taken: far longer than a check holds it,
#: far shorter than an engine that serves does.
START_PATIENCE: Final = 1.0
_RETRY_SECONDS: Final = 0.02


def lock_path(location: Location) -> Path:
    """The engine lock's file of the store at `location`, on this host."""
    base = files_base(location)
    return base.with_name(base.name + ".engine.lock")


def hold(location: str) -> contextlib.ExitStack | None:
    """The engine lock of the store at `location` (absolute: see `core.engine.server`),
    held until the returned stack is closed or this process ends; None if another engine
    holds it. Raises `StoreError` if a PostgreSQL store's server cannot be reached."""
    file = _take(lock_path(location))
    if file is None:
        return None
    held = contextlib.ExitStack()
    held.callback(file.close)
    if is_url(location):
        from core.store.postgres import hold_engine_lock

        try:
            connection = hold_engine_lock(location)
        except DatabaseError as exc:
            held.close()
            raise StoreError(f"cannot use the store {shown(location)}: {exc}") from exc
        if connection is None:  # an engine on another machine serves it
            held.close()
            return None
        held.callback(connection.close)
    return held


def holder(location: Location) -> str | None:
    """The identity of the process that holds the engine lock of the store at `location`
    on this host, as it wrote it; None when no process holds it (or there is no file)."""
    try:
        file = lock_path(location).open()  # read only: a check creates nothing
    except OSError:
        return None
    with file:
        try:
            fcntl.flock(file, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return file.read().strip() or None
        except OSError:
            return None
    return None  # it was free; closing the file let go of it


def _take(path: Path) -> IO[str] | None:
    """The file at `path`, exclusively locked with this process's identity in it; None if
    it stays taken for `START_PATIENCE` seconds."""
    file = modes.open_file(path, "a+")  # its owner's alone (see `core.store.modes`)
    deadline = time.monotonic() + START_PATIENCE
    while True:
        try:
            fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() >= deadline:
                file.close()
                return None
            time.sleep(_RETRY_SECONDS)
    file.seek(0)
    file.truncate()
    file.write(f"{owner.current()}\n")
    file.flush()
    return file
