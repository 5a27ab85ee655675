"""How the processes that share a store talk: commands to a run's owner (`commands`),
the processes that serve the store and their heartbeats (`services`, see
`core.store.owner`), and the progress of the runs they train.

The module's functions are the statements that other parts run inside their own
transactions: a run created or reopened with its `start` command, liveness judged by the
heartbeats committed before a write.
"""

import dataclasses
import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from core.store import owner
from core.store.connections import Connection
from core.store.db import Part, in_list
from core.store.errors import ConstraintError, UnknownRunError
from core.store.records import COMMAND_KINDS, Command, Service, to_json

_COMMAND_COLUMNS = ", ".join(field.name for field in dataclasses.fields(Command))
_SERVICE_COLUMNS = ", ".join(field.name for field in dataclasses.fields(Service))


class Mailbox(Part):
    """Commands, services and progress."""

    # Commands

    def add_command(
        self, run_id: str, kind: str, payload: Mapping[str, Any] | None = None
    ) -> Command:
        """Ask the process that owns the run to `kind` it (see `COMMAND_KINDS`)."""
        now = time.time()
        try:
            with self.db.write() as conn:
                command_id = insert_command(conn, run_id, kind, payload or {}, now)
        except ConstraintError as exc:  # the foreign key: no such run
            raise UnknownRunError(run_id) from exc
        return Command(command_id, run_id, kind, dict(payload or {}), now)

    def pending_commands(self, owner: str, *, any_run: Sequence[str] = ()) -> list[Command]:
        """Commands not handled yet to runs that `owner` runs, and those of the kinds in
        `any_run` to every run, oldest first."""
        columns = ", ".join(f"c.{column}" for column in _COMMAND_COLUMNS.split(", "))
        with self.db.read() as conn:
            rows = conn.execute(
                f"SELECT {columns} FROM commands AS c JOIN runs AS r ON r.id = c.run_id"
                f" WHERE c.handled IS NULL AND (r.owner = ? OR c.kind IN ({in_list(len(any_run))}))"
                " ORDER BY c.id",
                (owner, *any_run),
            ).fetchall()
        return [_command(row) for row in rows]

    def get_command(self, command_id: int) -> Command | None:
        """The command, handled or not; None if there is no such command."""
        with self.db.read() as conn:
            row = conn.execute(
                f"SELECT {_COMMAND_COLUMNS} FROM commands WHERE id = ?", (command_id,)
            ).fetchone()
        return None if row is None else _command(row)

    def mark_handled(self, command_id: int, error: str | None = None) -> None:
        """Record that the owner carried the command out, or why it refused it."""
        with self.db.write() as conn:
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
        with self.db.write() as conn:
            conn.executemany(
                "UPDATE runs SET step = greatest(step, ?), speed = ?, updated = ? WHERE id = ?",
                [(step, speed, now, run_id) for run_id, (step, speed) in progress.items()],
            )

    # Services: the processes that serve this store

    def register_service(self, owner: str, role: str, info: Mapping[str, Any]) -> None:
        """Record that process `owner` serves the store as `role` (replacing the row it
        had in that role), started and beating now, by the database's clock."""
        with self.db.write() as conn:
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
        with self.db.write() as conn:
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
        with self.db.read() as conn:
            rows = conn.execute(query + " ORDER BY started DESC", params).fetchall()
        return [_service(row) for row in rows]

    def beating(self, role: str | None = None) -> frozenset[str]:
        """The owners of the service rows (of `role`, if given) whose heartbeat is younger
        than `owner.LIVENESS_SECONDS`, by the database's clock; one from the future counts
        as young as long (a clock set back)."""
        with self.db.read() as conn:
            return beating(conn, role)

    def remove_service(self, owner: str, role: str) -> None:
        """Forget the row of process `owner` in `role` (it stops serving)."""
        with self.db.write() as conn:
            conn.execute("DELETE FROM services WHERE owner = ? AND role = ?", (owner, role))

    def forget_silent_services(self) -> int:
        """Remove the rows of every service whose heartbeat is older than
        `owner.LIVENESS_SECONDS` (of a process that died, or was written by hand: a live
        one that was only slow writes its row again with its next beat); returns how
        many."""
        with self.db.write() as conn:
            return conn.execute(
                f"DELETE FROM services WHERE NOT abs({conn.clock} - heartbeat) < ?",
                (owner.LIVENESS_SECONDS,),
            ).rowcount


# Statements for other parts' transactions


def insert_command(
    conn: Connection, run_id: str, kind: str, payload: Mapping[str, Any], now: float
) -> int:
    """Write a command of `kind` to run `run_id`; its id. `ValueError` for a kind not in
    `COMMAND_KINDS`.

    Args:
        conn: The caller's write transaction, so that the command is written with the
            change that asks for it (a run's row and its "start", in one commit).
        run_id: The run it steers; its owner carries it out.
        kind: One of `COMMAND_KINDS`.
        payload: The command's arguments, stored as JSON (a `set`'s knob values).
        now: Its creation time, `time.time()` of the writing process: commands are
            handled oldest first.
    """
    if kind not in COMMAND_KINDS:
        raise ValueError(f"command must be one of {', '.join(COMMAND_KINDS)}; got {kind!r}")
    cursor = conn.execute(
        "INSERT INTO commands (run_id, kind, payload, created) VALUES (?, ?, ?, ?) RETURNING id",
        (run_id, kind, to_json(payload), now),
    )
    return int(cursor.fetchone()[0])


def retire_commands(conn: Connection, run_id: str, why: str, now: float) -> None:
    """Mark the run's commands not handled yet as refused, for `why`: they must not steer
    it any more.

    Args:
        conn: The caller's write transaction (the one that ends or hands over the run).
        run_id: The run whose pending commands are refused.
        why: The error each command is marked with, for whoever waits on it ("the run
            had ended").
        now: The time they count as handled, `time.time()` of the writing process.
    """
    conn.execute(
        "UPDATE commands SET handled = ?, error = ? WHERE run_id = ? AND handled IS NULL",
        (now, why, run_id),
    )


def beating(conn: Connection, role: str | None = None) -> frozenset[str]:
    """`Mailbox.beating`, as `conn` reads the heartbeats."""
    query = f"SELECT DISTINCT owner FROM services WHERE abs({conn.clock} - heartbeat) < ?"
    params: tuple[Any, ...] = (owner.LIVENESS_SECONDS,)
    if role is not None:
        query, params = query + " AND role = ?", (*params, role)
    return frozenset(holder for (holder,) in conn.execute(query, params).fetchall())


def _command(row: tuple[Any, ...]) -> Command:
    command_id, run_id, kind, payload, created, handled, error = row
    return Command(command_id, run_id, kind, json.loads(payload), created, handled, error)


def _service(row: tuple[Any, ...]) -> Service:
    holder, role, started, heartbeat, info = row
    return Service(holder, role, started, heartbeat, json.loads(info))
