"""Runs: their rows in the `runs` table, from creation to a final status, and what every
reader sees of them (a run whose process died reads as interrupted)."""

import dataclasses
import functools
import json
import secrets
import shutil
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from core.knobs import InvalidInput
from core.store import chunks, events, mailbox, owner, summaries
from core.store.connections import Connection
from core.store.db import Part, in_list
from core.store.errors import ConstraintError, DatabaseError, StoreError, UnknownRunError
from core.store.paths import check_run_id
from core.store.records import (
    ACTIVE_STATUSES,
    FINAL_STATUSES,
    RESUMABLE_STATUSES,
    RunRecord,
    check_status,
    to_json,
)

_NAMES = tuple(field.name for field in dataclasses.fields(RunRecord))
_COLUMNS = ", ".join(_NAMES)
# A final status, written by `finish` (or kept, see `Database.defer`).
_FINISH = "status = ?, final_metrics = ?, error = ?, finished = ?, updated = ?"
# A run handed to the engine that serves the store (see `core.engine.client`).
_HANDED_OVER = "EXISTS (SELECT 1 FROM commands WHERE run_id = runs.id AND kind = 'start')"


class RunRows(Part):
    """The runs of the store: created, moved through their statuses, read, deleted.

    A run's final status that cannot be written is kept (see `finish`), so that a full
    disk does not leave a finished run `running`.
    """

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
            with self.db.write() as conn:
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
                    mailbox.insert_command(conn, run_id, command, {}, now)
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

    def set_tags(self, run_id: str, tags: Iterable[str]) -> None:
        """Replace the run's tags (kept in the order given, without repeats)."""
        clean = list(dict.fromkeys(tags))
        self._update_run(run_id, "tags = ?", (json.dumps(clean),))

    def finish(
        self,
        run_id: str,
        status: str,
        final_metrics: Mapping[str, Any],
        error: str | None = None,
    ) -> None:
        """End a run with a final status (completed, stopped, diverged, failed, interrupted).

        If the database cannot write it now (a full disk, a read-only file, a lock held
        too long, a server gone), the final status is kept in memory instead of raising
        (see `Database.defer`): `get_run` and `list_runs` show it, and the store writes it
        before its next write, or when it closes, once the database takes writes again.
        Lost only if the process ends first (the run is then marked interrupted, as any
        run of a process that died).
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
            self.db.defer(run_id, f"UPDATE runs SET {_FINISH} WHERE id = ?", (*values, run_id))

    def get_run(self, run_id: str, *, alive: owner.Liveness | None = None) -> RunRecord | None:
        """The run's record, or None if there is no such run; its owner judged by `alive`
        (default: `liveness()`, see `_as_read`)."""
        with self.db.read() as conn:
            row = conn.execute(f"SELECT {_COLUMNS} FROM runs WHERE id = ?", (run_id,))
            row = row.fetchone()
        if row is None:
            return None
        return self._as_read(_record(row), self.liveness() if alive is None else alive)

    def list_runs(self, *, alive: owner.Liveness | None = None) -> list[RunRecord]:
        """All runs, newest first; their owners judged by `alive` (default: `liveness()`,
        the heartbeats read once for the whole list, see `_as_read`)."""
        with self.db.read() as conn:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM runs ORDER BY created DESC, rowid DESC"
            ).fetchall()
        alive = self.liveness() if alive is None else alive
        return [self._as_read(_record(row), alive) for row in rows]

    def liveness(self) -> owner.Liveness:
        """Whether the processes that own runs live (see `core.store.owner`): by /proc on
        this host, by their heartbeats in this store elsewhere, read once, when first
        needed."""
        return owner.Liveness(self._heartbeats)

    def delete_run(self, run_id: str) -> bool:
        """Delete a run with its metrics, events and checkpoints; False if there was no
        such run. A run whose id names no folder of its own (see `checkpoint_folder`) is
        refused, and nothing is deleted.

        An open metrics writer of the run fails on its next commit.
        """
        folder = self.db.checkpoint_folder(run_id)
        self.db.forget_deferred(run_id)
        with self.db.write() as conn:
            deleted = conn.execute("DELETE FROM runs WHERE id = ?", (run_id,)).rowcount > 0
        shutil.rmtree(folder, ignore_errors=True)
        return deleted

    def fork_points(self, run_id: str) -> set[int]:
        """The steps of the run's checkpoints that forks were taken from."""
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT forked_at FROM runs WHERE parent = ? AND forked_at IS NOT NULL", (run_id,)
            ).fetchall()
        return {step for (step,) in rows}

    # What an engine does to runs of other processes

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
        with self.db.write() as conn:
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
            events.truncate(conn, run_id, step)
            # Commands left over from before it ended must not steer the resumed run.
            mailbox.retire_commands(conn, run_id, "the run had ended", now)
            conn.execute(
                "UPDATE runs SET status = 'queued', owner = ?, step = ?, updated = ?,"
                " finished = NULL, error = NULL, final_metrics = NULL WHERE id = ?",
                (owner, step, now, run_id),
            )
            if command is not None:
                mailbox.insert_command(conn, run_id, command, {}, now)
        self.db.forget_deferred(run_id)
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
        with self.db.write() as conn:
            is_alive = is_alive or _liveness(conn)
            rows = conn.execute(
                f"SELECT id, owner, status = 'queued' AND {_HANDED_OVER} FROM runs"
                f" WHERE status IN ({in_list(len(ACTIVE_STATUSES))}) ORDER BY created",
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
        with self.db.write() as conn:
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
                mailbox.retire_commands(conn, run_id, "its engine ended", now)
                conn.execute(
                    "UPDATE runs SET owner = ?, updated = ? WHERE id = ?", (new_owner, now, run_id)
                )
                mailbox.insert_command(conn, run_id, "start", {}, now)
        return run_ids

    # Helpers

    def _require_run(self, run_id: str) -> RunRecord:
        record = self.get_run(run_id)
        if record is None:
            raise UnknownRunError(run_id)
        return record

    def _update_run(self, run_id: str, assignments: str, params: tuple[Any, ...]) -> None:
        with self.db.write() as conn:
            cursor = conn.execute(f"UPDATE runs SET {assignments} WHERE id = ?", (*params, run_id))
            if cursor.rowcount == 0:
                raise UnknownRunError(run_id)

    def _heartbeats(self) -> frozenset[str]:
        with self.db.read() as conn:
            return mailbox.beating(conn)

    def _as_read(self, record: RunRecord, alive: owner.Liveness) -> RunRecord:
        """The record as every reader sees it: with its final status if that is still
        waiting to be written, and `interrupted` if it was training (or paused) in a
        process that `alive` finds dead, on this host or another, before any engine
        marks it so in the store (a run without an owner, written by the store's own
        API, is taken as it is)."""
        record = self._with_deferred(record)
        if _ended_with_its_process(record.status, record.owner, alive):
            return dataclasses.replace(
                record,
                status="interrupted",
                error=record.error or f"the process running it ended while it was {record.status}",
            )
        return record

    def _with_deferred(self, record: RunRecord) -> RunRecord:
        """The record, with its final status if that is still waiting to be written."""
        params = self.db.deferred(record.id)
        if params is None:
            return record
        status, final_metrics, error, finished, updated, _run_id = params
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


def _liveness(conn: Connection) -> owner.Liveness:
    """Liveness as `conn` reads the heartbeats: inside a write, those committed before."""
    return owner.Liveness(functools.partial(mailbox.beating, conn))


def _record(row: tuple[Any, ...]) -> RunRecord:
    return RunRecord.from_row(dict(zip(_NAMES, row, strict=True)))
