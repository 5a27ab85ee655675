"""The store: runs, their events and their metrics, in a SQLite file or a PostgreSQL
database."""

import dataclasses
import functools
import json
import os
import secrets
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

from core.knobs import InvalidInput
from core.store import chunks, owner, schema, summaries
from core.store.connections import Connection, ConnectionPool
from core.store.errors import ConstraintError, DatabaseError, StoreError, UnknownRunError
from core.store.metrics import Block, Metrics, stack
from core.store.paths import (
    canonical,
    check_run_id,
    default_location,
    files_base,
    is_url,
    run_folder,
    shown,
)
from core.store.records import (
    ACTIVE_STATUSES,
    COMMAND_KINDS,
    FINAL_STATUSES,
    RESUMABLE_STATUSES,
    Command,
    Event,
    RunRecord,
    Service,
    check_status,
    to_json,
)
from core.store.sqlite import SqliteConnection
from core.store.writer import MetricsWriter

#: Seconds a write waits while another process holds the store's write lock.
LOCK_PATIENCE = 60.0

_RUN_NAMES = tuple(field.name for field in dataclasses.fields(RunRecord))
_RUN_COLUMNS = ", ".join(_RUN_NAMES)
_EVENT_COLUMNS = ", ".join(field.name for field in dataclasses.fields(Event))
_COMMAND_COLUMNS = ", ".join(field.name for field in dataclasses.fields(Command))
_SERVICE_COLUMNS = ", ".join(field.name for field in dataclasses.fields(Service))
_FINISH = "status = ?, final_metrics = ?, error = ?, finished = ?, updated = ?"
# A run handed to the engine that serves the store (see `core.engine.client`).
_HANDED_OVER = "EXISTS (SELECT 1 FROM commands WHERE run_id = runs.id AND kind = 'start')"


class Store:
    """Runs, events and metrics of the lab, safe to use from many threads and processes.

    It lives in a SQLite file, or in a PostgreSQL database that several machines share
    (see `core.store.postgres`). Opening checks it (see `core.store.schema`): a new or
    empty file or database gets the schema; a corrupt or foreign one raises `StoreError`
    and is left untouched. Every method takes a pooled connection for its own use (see
    `core.store.connections`), so the dashboard reads while training threads write.
    Metrics are written through `metrics_writer`, which never blocks the training thread
    on I/O.

    The database's errors (a full disk, a read-only file, a lock held too long, a server
    gone) are raised as `StoreError`s naming the store. A run's final status that cannot
    be written is kept (see `finish`), so that a full disk does not leave a finished run
    `running`.
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
        #: Where the store is: a path or a URL (for another process to open).
        self.location = canonical(default_location() if path is None else path)
        #: The location as messages show it (without a URL's password).
        self.name = shown(self.location)
        #: The path its side files are named after (see `paths.files_base`).
        self.path = files_base(self.location)
        self.flush_interval = flush_interval
        open_connection: functools.partial[Connection]
        if is_url(self.location):
            from core.store import postgres  # imports the driver only for such a store

            postgres.prepare(self.location, timeout)
            open_connection = functools.partial(postgres.PostgresConnection, self.location, timeout)
        else:
            schema.prepare(self.path, timeout)
            open_connection = functools.partial(SqliteConnection, self.path, timeout)
        self._pool = ConnectionPool(open_connection, self.name)
        self._writers_lock = threading.Lock()
        self._writers: dict[str, MetricsWriter] = {}
        self._pending_lock = threading.Lock()
        # run id -> the `_FINISH` values of a final status not written yet, oldest first
        self._pending: dict[str, tuple[Any, ...]] = {}

    def close(self) -> None:
        """Flush and stop every metrics writer, write the final statuses still kept in
        memory (if the file now takes them), then close all connections; idempotent.

        A writer's failure stays with the writer, for its training thread to raise.
        """
        with self._writers_lock:
            writers, self._writers = list(self._writers.values()), {}
        for writer in writers:
            writer.shutdown()
        self._write_pending()
        self._pool.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # Runs

    def create_run(
        self,
        run_id: str,
        name: str,
        config: Mapping[str, Any],
        *,
        status: str = "queued",
        total_steps: int | None = None,
        owner: str | None = None,
        command: str | None = None,
        parent: str | None = None,
        forked_at: int | None = None,
    ) -> RunRecord:
        """Add a run and return its record; `StoreError` if the id is taken, and
        `InvalidInput` naming `run_id` for an id outside `paths.RUN_ID`.

        `owner` names the process that will run it, for `mark_interrupted`; `command`
        (e.g. "start") is written for that owner in the same transaction. A fork names its
        `parent` and the step it starts after, `forked_at`: its step is that step, and it
        starts from its own copy of that checkpoint.
        """
        check_run_id(run_id)
        check_status(status)
        now = time.time()
        try:
            with self._write() as conn:
                conn.execute(
                    "INSERT INTO runs (id, name, status, config, created, updated, started,"
                    " total_steps, owner, parent, forked_at, step)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        run_id,
                        name,
                        status,
                        to_json(config),
                        now,
                        now,
                        now if status == "running" else None,
                        total_steps,
                        owner,
                        parent,
                        forked_at,
                        forked_at or 0,
                    ),
                )
                if command is not None:
                    _insert_command(conn, run_id, command, {}, now)
        except ConstraintError as exc:
            raise StoreError(f"a run with id {run_id!r} already exists") from exc
        return self._require_run(run_id)

    def new_run_id(self) -> str:
        """A run id not taken in this store, e.g. `1201-3fa2c1` (month, day, random)."""
        while True:
            run_id = time.strftime("%m%d-") + secrets.token_hex(3)
            if self.get_run(run_id) is None:
                return run_id

    def set_status(self, run_id: str, status: str, error: str | None = None) -> None:
        """Change the status and replace the error message (cleared when None)."""
        check_status(status)
        now = time.time()
        self._update_run(
            run_id,
            "status = ?, error = ?, updated = ?,"
            " started = coalesce(started, CASE WHEN ? = 'running' THEN ? END)",
            (status, error, now, status, now),
        )

    def set_node(self, run_id: str, node: str) -> None:
        """Record the machine (or Ray node) that trains the run."""
        self._update_run(run_id, "node = ?, updated = ?", (node, time.time()))

    def set_progress(self, run_id: str, step: int, *, total_steps: int | None = None) -> None:
        """Record the step reached; `total_steps` changes only when given.

        Metrics writers advance `step` on every flush, so a run that logs metrics need not
        call this per step.
        """
        self._update_run(
            run_id,
            "step = ?, total_steps = coalesce(?, total_steps), updated = ?",
            (step, total_steps, time.time()),
        )

    def finish(
        self,
        run_id: str,
        status: str,
        final_metrics: Mapping[str, Any],
        error: str | None = None,
    ) -> None:
        """End a run with a final status (completed, stopped, diverged, failed, interrupted).

        If the database cannot write it now (a full disk, a read-only file, a lock held
        too long, a server gone), the final status is kept in memory instead of raising:
        `get_run` and `list_runs` show it, and the store writes it before its next write,
        or when it closes, once the database takes writes again. Lost only if the process ends first
        (the run is then marked interrupted, as any run of a process that died).
        """
        check_status(status, FINAL_STATUSES)
        now = time.time()
        values = (status, to_json(final_metrics), error, now, now)
        try:
            self._update_run(run_id, _FINISH, values)
        except UnknownRunError:
            raise
        except StoreError as exc:
            cause = exc.__cause__
            if not (isinstance(cause, DatabaseError) and cause.transient):
                raise
            with self._pending_lock:
                self._pending[run_id] = values

    def get_run(self, run_id: str, *, alive: owner.Liveness | None = None) -> RunRecord | None:
        """The run's record, or None if there is no such run; its owner judged by `alive`
        (default: `liveness()`, see `_as_read`)."""
        with self._read() as conn:
            row = conn.execute(f"SELECT {_RUN_COLUMNS} FROM runs WHERE id = ?", (run_id,))
            row = row.fetchone()
        if row is None:
            return None
        return self._as_read(_record(row), self.liveness() if alive is None else alive)

    def list_runs(self, *, alive: owner.Liveness | None = None) -> list[RunRecord]:
        """All runs, newest first; their owners judged by `alive` (default: `liveness()`,
        the heartbeats read once for the whole list, see `_as_read`)."""
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT {_RUN_COLUMNS} FROM runs ORDER BY created DESC, rowid DESC"
            ).fetchall()
        alive = self.liveness() if alive is None else alive
        return [self._as_read(_record(row), alive) for row in rows]

    def liveness(self) -> owner.Liveness:
        """Whether the processes that own runs live (see `core.store.owner`): by /proc on
        this host, by their heartbeats in this store elsewhere, read once, when first
        needed."""

        return owner.Liveness(self.beating)

    def delete_run(self, run_id: str) -> bool:
        """Delete a run with its metrics, events and checkpoints; False if there was no
        such run. A run whose id names no folder of its own (see `checkpoint_folder`) is
        refused, and nothing is deleted.

        An open metrics writer of the run fails on its next commit.
        """
        folder = self.checkpoint_folder(run_id)
        with self._pending_lock:
            self._pending.pop(run_id, None)
        with self._write() as conn:
            deleted = conn.execute("DELETE FROM runs WHERE id = ?", (run_id,)).rowcount > 0
        shutil.rmtree(folder, ignore_errors=True)
        return deleted

    def fork_points(self, run_id: str) -> set[int]:
        """The steps of the run's checkpoints that forks were taken from."""
        with self._read() as conn:
            rows = conn.execute(
                "SELECT forked_at FROM runs WHERE parent = ? AND forked_at IS NOT NULL", (run_id,)
            ).fetchall()
        return {step for (step,) in rows}

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

    def reopen(
        self, run_id: str, step: int, *, owner: str, command: str | None = None
    ) -> RunRecord:
        """Queue an ended run again, to continue from its checkpoint of `step`.

        In one transaction: forgets the metrics and events after `step` (the resumed run
        writes them again) and the commands left unhandled, queues the run for `owner` at
        `step`, and adds `command` (`"start"` for another process's engine). Only a
        stopped or interrupted run (as it reads: one whose process died is interrupted,
        see `_as_read`) can be reopened: anything else raises `InvalidInput` naming
        `run_id`.
        """
        with self._write() as conn:
            row = conn.execute("SELECT status, owner FROM runs WHERE id = ?", (run_id,))
            row = row.fetchone()
            if row is None:
                raise UnknownRunError(run_id)
            status, holder = row
            if _ended_with_its_process(status, holder, _liveness(conn)):
                status = "interrupted"  # as it reads, before an engine marks it so
            if status not in RESUMABLE_STATUSES:
                raise InvalidInput({"run_id": f"run {run_id} is {status}: nothing to resume"})
            now = time.time()
            chunks.truncate(conn, run_id, step)
            summaries.truncate(conn, run_id, step)
            conn.execute("DELETE FROM events WHERE run_id = ? AND step > ?", (run_id, step))
            # Commands left over from before it ended must not steer the resumed run.
            conn.execute(
                "UPDATE commands SET handled = ?, error = 'the run had ended'"
                " WHERE run_id = ? AND handled IS NULL",
                (now, run_id),
            )
            conn.execute(
                "UPDATE runs SET status = 'queued', owner = ?, step = ?, updated = ?,"
                " finished = NULL, error = NULL, final_metrics = NULL WHERE id = ?",
                (owner, step, now, run_id),
            )
            if command is not None:
                _insert_command(conn, run_id, command, {}, now)
        with self._pending_lock:
            self._pending.pop(run_id, None)
        return self._require_run(run_id)

    def mark_interrupted(self, is_alive: Callable[[str | None], bool] | None = None) -> list[str]:
        """Mark runs left queued, running or paused by a dead process as `interrupted`,
        except the queued runs handed to a serving engine (see `requeue`).

        `is_alive(owner)` tells whether a run's owner process still lives; runs of live
        owners are left alone. By default it is the store's `liveness`, its heartbeats
        read inside this write, so that a process that has just begun to beat and store
        a run is seen. For an engine to call when it starts (the serving engine: also
        while it serves); returns the ids it marked.
        """
        marks = ", ".join("?" * len(ACTIVE_STATUSES))
        with self._write() as conn:
            is_alive = is_alive or _liveness(conn)
            rows = conn.execute(
                f"SELECT id, owner, status = 'queued' AND {_HANDED_OVER} FROM runs"
                f" WHERE status IN ({marks}) ORDER BY created",
                ACTIVE_STATUSES,
            ).fetchall()
            run_ids = [
                run_id
                for run_id, holder, handed_over in rows
                if not handed_over and not is_alive(holder)
            ]
            conn.executemany(
                "UPDATE runs SET status = 'interrupted', updated = ?,"
                " error = coalesce(error, 'the process running it ended while it was '"
                " || status) WHERE id = ?",
                [(time.time(), run_id) for run_id in run_ids],
            )
        return run_ids

    def requeue(
        self, new_owner: str, is_alive: Callable[[str | None], bool] | None = None
    ) -> list[str]:
        """Hand the queued runs that a dead engine had been handed (by a `start` command)
        to the engine `new_owner`, in the order they were queued, each with a new `start`
        command; returns their ids. `is_alive` judges their engines, by default as
        `mark_interrupted` does. For the engine that serves the store, when it starts and
        while it serves: after a crash, whichever host it was on, the queue goes on where
        it was."""
        with self._write() as conn:
            is_alive = is_alive or _liveness(conn)
            rows = conn.execute(
                f"SELECT id, owner FROM runs WHERE status = 'queued' AND {_HANDED_OVER}"
                " ORDER BY created, rowid"
            ).fetchall()
            run_ids = [
                run_id for run_id, holder in rows if holder != new_owner and not is_alive(holder)
            ]
            now = time.time()
            for run_id in run_ids:
                conn.execute(
                    "UPDATE commands SET handled = ?, error = 'its engine ended'"
                    " WHERE run_id = ? AND handled IS NULL",
                    (now, run_id),
                )
                conn.execute(
                    "UPDATE runs SET owner = ?, updated = ? WHERE id = ?", (new_owner, now, run_id)
                )
                _insert_command(conn, run_id, "start", {}, now)
        return run_ids

    # Events

    def add_event(
        self,
        run_id: str,
        step: int,
        kind: str,
        payload: Mapping[str, Any] | None = None,
    ) -> Event:
        """Record that `kind` happened at `step` (e.g. "lr_change", {"lr": 0.01})."""
        event = Event(0, run_id, step, time.time(), kind, dict(payload or {}))
        try:
            with self._write() as conn:
                event_id = conn.execute(
                    "INSERT INTO events (run_id, step, time, kind, payload)"
                    " VALUES (?, ?, ?, ?, ?) RETURNING id",
                    (run_id, step, event.time, kind, to_json(event.payload)),
                ).fetchone()[0]
        except ConstraintError as exc:  # the foreign key: no such run
            raise UnknownRunError(run_id) from exc
        return dataclasses.replace(event, id=event_id)

    def events(self, run_id: str, kind: str | None = None) -> list[Event]:
        """The run's events (only those of `kind`, if given), by step, then as added."""
        query = f"SELECT {_EVENT_COLUMNS} FROM events WHERE run_id = ?"
        params: tuple[Any, ...] = (run_id,)
        if kind is not None:
            query += " AND kind = ?"
            params += (kind,)
        with self._read() as conn:
            rows = conn.execute(query + " ORDER BY step, id", params).fetchall()
        return [Event(*row[:-1], json.loads(row[-1])) for row in rows]

    def latest_knobs(self, run_id: str | None = None) -> dict[str, dict[str, Any]]:
        """Each run's knobs changed while it trained, with their last value, by run id
        (only `run_id`'s, if given)."""
        query = "SELECT run_id, payload FROM events WHERE kind = 'knob'"
        params: tuple[Any, ...] = ()
        if run_id is not None:
            query, params = query + " AND run_id = ?", (run_id,)
        with self._read() as conn:
            rows = conn.execute(query + " ORDER BY step, id", params).fetchall()
        latest: dict[str, dict[str, Any]] = {}
        for run_id, payload in rows:
            change = json.loads(payload)
            latest.setdefault(run_id, {})[change["name"]] = change["value"]
        return latest

    # Tags

    def set_tags(self, run_id: str, tags: Iterable[str]) -> None:
        """Replace the run's tags (kept in the order given, without repeats)."""
        clean = list(dict.fromkeys(tags))
        self._update_run(run_id, "tags = ?", (json.dumps(clean),))

    # Commands

    def add_command(
        self, run_id: str, kind: str, payload: Mapping[str, Any] | None = None
    ) -> Command:
        """Ask the process that owns the run to `kind` it (see `COMMAND_KINDS`)."""
        now = time.time()
        try:
            with self._write() as conn:
                command_id = _insert_command(conn, run_id, kind, payload or {}, now)
        except ConstraintError as exc:  # the foreign key: no such run
            raise UnknownRunError(run_id) from exc
        return Command(command_id, run_id, kind, dict(payload or {}), now)

    def pending_commands(self, owner: str, *, any_run: Sequence[str] = ()) -> list[Command]:
        """Commands not handled yet to runs that `owner` runs, and those of the kinds in
        `any_run` to every run, oldest first."""
        # PostgreSQL has no empty `IN ()`: a kind never written stands in.
        kinds = ", ".join("?" * len(any_run)) or "''"
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT {', '.join('c.' + c for c in _COMMAND_COLUMNS.split(', '))}"
                " FROM commands AS c JOIN runs AS r ON r.id = c.run_id"
                f" WHERE c.handled IS NULL AND (r.owner = ? OR c.kind IN ({kinds}))"
                " ORDER BY c.id",
                (owner, *any_run),
            ).fetchall()
        return [_command(row) for row in rows]

    def get_command(self, command_id: int) -> Command | None:
        with self._read() as conn:
            row = conn.execute(
                f"SELECT {_COMMAND_COLUMNS} FROM commands WHERE id = ?", (command_id,)
            ).fetchone()
        return None if row is None else _command(row)

    def mark_handled(self, command_id: int, error: str | None = None) -> None:
        """Record that the owner carried the command out, or why it refused it."""
        with self._write() as conn:
            conn.execute(
                "UPDATE commands SET handled = ?, error = ? WHERE id = ?",
                (time.time(), error, command_id),
            )

    # Progress of runs that train

    def publish_progress(self, progress: Mapping[str, tuple[int, float | None]]) -> None:
        """Each run's step and speed in steps per second, by run id, in one transaction."""
        if not progress:
            return
        now = time.time()
        with self._write() as conn:
            conn.executemany(
                "UPDATE runs SET step = greatest(step, ?), speed = ?, updated = ? WHERE id = ?",
                [(step, speed, now, run_id) for run_id, (step, speed) in progress.items()],
            )

    # Services: the processes that serve this store

    def register_service(self, owner: str, role: str, info: Mapping[str, Any]) -> None:
        """Record that process `owner` serves the store as `role` (replacing the row it
        had in that role), started and beating now, by the database's clock."""
        with self._write() as conn:
            conn.execute(
                f"INSERT INTO services ({_SERVICE_COLUMNS})"
                f" VALUES (?, ?, {conn.clock}, {conn.clock}, ?)"
                " ON CONFLICT (owner, role) DO UPDATE SET started = excluded.started,"
                " heartbeat = excluded.heartbeat, info = excluded.info",
                (owner, role, to_json(info)),
            )

    def heartbeat(self, owner: str, role: str, info: Mapping[str, Any] | None = None) -> None:
        """The process `owner` lives, as `role` (and its `info` is now this, when given),
        by the database's clock (see `core.store.owner`). A row that a reader removed
        meanwhile, having found it silent too long, is written again, started now."""
        values = None if info is None else to_json(info)
        with self._write() as conn:
            conn.execute(
                f"INSERT INTO services ({_SERVICE_COLUMNS})"
                f" VALUES (?, ?, {conn.clock}, {conn.clock}, coalesce(?, '{{}}'))"
                " ON CONFLICT (owner, role) DO UPDATE SET heartbeat = excluded.heartbeat,"
                " info = coalesce(?, services.info)",
                (owner, role, values, values),
            )

    def services(self, role: str | None = None) -> list[Service]:
        """The registered services (of `role`, if given), the most recent first."""
        query = f"SELECT {_SERVICE_COLUMNS} FROM services"
        params: tuple[Any, ...] = ()
        if role is not None:
            query, params = query + " WHERE role = ?", (role,)
        with self._read() as conn:
            rows = conn.execute(query + " ORDER BY started DESC", params).fetchall()
        return [Service(*row[:-1], json.loads(row[-1])) for row in rows]

    def beating(self, role: str | None = None) -> frozenset[str]:
        """The owners of the service rows (of `role`, if given) whose heartbeat is younger
        than `owner.LIVENESS_SECONDS`, by the database's clock; one from the future counts
        as young as long (a clock set back)."""
        with self._read() as conn:
            return _beating(conn, role)

    def remove_service(self, owner: str, role: str) -> None:
        with self._write() as conn:
            conn.execute("DELETE FROM services WHERE owner = ? AND role = ?", (owner, role))

    def forget_silent_services(self) -> int:
        """Remove the rows of every service whose heartbeat is older than
        `owner.LIVENESS_SECONDS` (of a process that died, or was written by hand: a live
        one that was only slow writes its row again with its next beat); returns how
        many."""
        with self._write() as conn:
            return conn.execute(
                f"DELETE FROM services WHERE NOT abs({conn.clock} - heartbeat) < ?",
                (owner.LIVENESS_SECONDS,),
            ).rowcount

    # Metrics

    def metrics_writer(self, run_id: str, *, flush_interval: float | None = None) -> MetricsWriter:
        """A writer for the run's metrics; one open writer per run and store at a time.

        Its steps must follow the run's largest stored step.
        """
        with self._writers_lock:
            # Closed writers are forgotten: a long-lived store sees one per run it trains.
            self._writers = {key: w for key, w in self._writers.items() if not w.closed}
            if run_id in self._writers:
                raise StoreError(f"run {run_id!r} already has an open metrics writer")
            with self._read() as conn:
                if conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
                    raise UnknownRunError(run_id)
                last_step = chunks.last_step(conn, run_id)
            writer = MetricsWriter(
                self._pool,
                run_id,
                flush_interval=self.flush_interval if flush_interval is None else flush_interval,
                last_step=last_step,
            )
            self._writers[run_id] = writer
        return writer

    def last_step(self, run_id: str) -> int | None:
        """The largest step of the run's committed metrics, None if it has none."""
        with self._read() as conn:
            return chunks.last_step(conn, run_id)

    def read_metrics(self, run_id: str, since_step: int | None = None) -> Metrics:
        """The run's committed metrics, only the steps after `since_step` if given.

        An unknown run reads as empty metrics.
        """
        with self._read() as conn:
            blocks = chunks.select(conn, run_id, since_step)
        return stack(blocks)

    def read_overview(
        self,
        run_id: str,
        *,
        start: int | None = None,
        end: int | None = None,
        means: bool = False,
    ) -> Metrics:
        """The run's committed metrics from step `start` to `end` (all by default), as a
        chart needs them: every row of a short range, else under a thousand rows that keep
        each bucket's extremes, or with `means` its means (see
        `core.store.summaries.overview`), whatever the run's length. An unknown run reads
        as empty metrics."""
        with self._read() as conn:
            return summaries.overview(conn, run_id, start=start, end=end, means=means)

    def append_metrics(self, run_id: str, block: Block) -> None:
        """Commit `block`, rows that follow the run's last stored step, at once: as a
        metrics writer's flush stores them (an import, a benchmark's long run). Raises
        `ValueError` for an empty block or one that does not follow the stored steps."""
        with self._write() as conn:
            last = chunks.last_step(conn, run_id)
            if not len(block.steps) or (last is not None and block.steps[0] <= last):
                raise ValueError(f"the rows must follow step {last} of run {run_id!r}")
            chunks.append(conn, run_id, block)
            summaries.extend(conn, run_id)

    # Helpers

    def _require_run(self, run_id: str) -> RunRecord:
        record = self.get_run(run_id)
        if record is None:
            raise UnknownRunError(run_id)
        return record

    def _update_run(self, run_id: str, assignments: str, params: tuple[Any, ...]) -> None:
        with self._write() as conn:
            cursor = conn.execute(f"UPDATE runs SET {assignments} WHERE id = ?", (*params, run_id))
            if cursor.rowcount == 0:
                raise UnknownRunError(run_id)

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        """A pooled connection; the database's errors become `StoreError`s naming the
        store."""
        try:
            with self._pool.connection() as conn:
                yield conn
        except DatabaseError as exc:
            raise StoreError(f"cannot read {self.name}: {exc}") from exc

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        """A write transaction, after the final statuses kept in memory; the database's
        errors become `StoreError`s naming the store, except broken constraints (the
        caller's)."""
        self._write_pending()
        try:
            with self._pool.transaction() as conn:
                yield conn
        except ConstraintError:
            raise
        except DatabaseError as exc:
            raise StoreError(f"cannot write to {self.name}: {exc}") from exc

    def _write_pending(self) -> None:
        """Write the final statuses `finish` could not, oldest first, up to a failure."""
        with self._pending_lock:
            pending = list(self._pending.items())
        for run_id, values in pending:
            try:
                with self._pool.transaction() as conn:
                    conn.execute(f"UPDATE runs SET {_FINISH} WHERE id = ?", (*values, run_id))
            except (DatabaseError, StoreError):
                return
            with self._pending_lock:
                if self._pending.get(run_id) is values:
                    del self._pending[run_id]

    def _as_read(self, record: RunRecord, alive: owner.Liveness) -> RunRecord:
        """The record as every reader sees it: with its final status if that is still
        waiting to be written, and `interrupted` if it was training (or paused) in a
        process that `alive` finds dead, on this host or another, before any engine
        marks it so in the store (a run without an owner, written by the store's own
        API, is taken as it is)."""
        record = self._with_pending(record)
        if _ended_with_its_process(record.status, record.owner, alive):
            return dataclasses.replace(
                record,
                status="interrupted",
                error=record.error or f"the process running it ended while it was {record.status}",
            )
        return record

    def _with_pending(self, record: RunRecord) -> RunRecord:
        """The record, with its final status if that is still waiting to be written."""
        with self._pending_lock:
            values = self._pending.get(record.id)
        if values is None:
            return record
        status, final_metrics, error, finished, updated = values
        return dataclasses.replace(
            record,
            status=status,
            final_metrics=json.loads(final_metrics),
            error=error,
            finished=finished,
            updated=updated,
        )


def _ended_with_its_process(
    status: str, holder: str | None, alive: Callable[[str | None], bool]
) -> bool:
    """Whether a run stored as `status` by the process `holder` ended with it: it was
    training or paused, and `alive` finds that process dead. A run without an owner
    (written by the store's own API) is taken as it is."""
    return status in ("running", "paused") and bool(holder) and not alive(holder)


def _beating(conn: Connection, role: str | None = None) -> frozenset[str]:
    """`Store.beating`, as `conn` reads the heartbeats."""
    query = f"SELECT DISTINCT owner FROM services WHERE abs({conn.clock} - heartbeat) < ?"
    params: tuple[Any, ...] = (owner.LIVENESS_SECONDS,)
    if role is not None:
        query, params = query + " AND role = ?", (*params, role)
    return frozenset(holder for (holder,) in conn.execute(query, params).fetchall())


def _liveness(conn: Connection) -> owner.Liveness:
    """Liveness as `conn` reads the heartbeats: inside a write, those committed before."""
    return owner.Liveness(functools.partial(_beating, conn))


def _insert_command(
    conn: Connection, run_id: str, kind: str, payload: Mapping[str, Any], now: float
) -> int:
    if kind not in COMMAND_KINDS:
        raise ValueError(f"command must be one of {', '.join(COMMAND_KINDS)}; got {kind!r}")
    cursor = conn.execute(
        "INSERT INTO commands (run_id, kind, payload, created) VALUES (?, ?, ?, ?) RETURNING id",
        (run_id, kind, to_json(payload), now),
    )
    return int(cursor.fetchone()[0])


def _command(row: tuple[Any, ...]) -> Command:
    command_id, run_id, kind, payload, created, handled, error = row
    return Command(command_id, run_id, kind, json.loads(payload), created, handled, error)


def _record(row: tuple[Any, ...]) -> RunRecord:
    return RunRecord.from_row(dict(zip(_RUN_NAMES, row, strict=True)))
