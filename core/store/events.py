"""A run's events: what happened to it at a step (a live knob change, a divergence, a
histogram), in the `events` table."""

import dataclasses
import json
import time
from collections.abc import Mapping
from typing import Any

from core.store.connections import Connection
from core.store.db import Part
from core.store.errors import ConstraintError, UnknownRunError
from core.store.records import KNOB_EVENT, Event, to_json

_COLUMNS = ", ".join(field.name for field in dataclasses.fields(Event))


class Events(Part):
    """Writes and reads runs' events (see `Event`); a metrics writer writes them too,
    with the rows around them (see `MetricsWriter.add_event`)."""

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
            with self.db.write() as conn:
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
        query = f"SELECT {_COLUMNS} FROM events WHERE run_id = ?"
        params: tuple[Any, ...] = (run_id,)
        if kind is not None:
            query += " AND kind = ?"
            params += (kind,)
        with self.db.read() as conn:
            rows = conn.execute(query + " ORDER BY step, id", params).fetchall()
        return [_event(row) for row in rows]

    def latest_knobs(self, run_id: str | None = None) -> dict[str, dict[str, Any]]:
        """Each run's knobs changed while it trained, with their last value, by run id
        (only `run_id`'s, if given)."""
        query = "SELECT run_id, payload FROM events WHERE kind = ?"
        params: tuple[Any, ...] = (KNOB_EVENT,)
        if run_id is not None:
            query, params = query + " AND run_id = ?", (*params, run_id)
        with self.db.read() as conn:
            rows = conn.execute(query + " ORDER BY step, id", params).fetchall()
        latest: dict[str, dict[str, Any]] = {}
        for changed_run, payload in rows:
            change = json.loads(payload)
            latest.setdefault(changed_run, {})[change["name"]] = change["value"]
        return latest


def _event(row: tuple[Any, ...]) -> Event:
    event_id, run_id, step, when, kind, payload = row
    return Event(event_id, run_id, step, when, kind, json.loads(payload))


def truncate(conn: Connection, run_id: str, step: int) -> None:
    """Delete run `run_id`'s events after `step` (a resumed run writes them again)."""
    conn.execute("DELETE FROM events WHERE run_id = ? AND step > ?", (run_id, step))
