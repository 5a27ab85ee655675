"""Rows written into a store by hand, past its API, as anyone who can write the store (a
shared PostgreSQL database, a SQLite file from elsewhere) could write them."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Mapping, Sequence
from contextlib import closing
from typing import Any

import psycopg

from core.store import is_url
from core.store.paths import files_base


def write(location: str, sql: str, params: Sequence[Any] = ()) -> None:
    """Run `sql` (with `?` placeholders) on the store at `location` with the database's
    own driver, and commit it."""
    if is_url(location):
        with psycopg.connect(location) as conn:
            conn.execute(sql.replace("?", "%s"), params)
        return
    with closing(sqlite3.connect(files_base(location))) as conn, conn:
        conn.execute(sql, params)


def run(
    location: str,
    run_id: str,
    *,
    name: str = "planted",
    status: str = "completed",
    owner: str | None = None,
    config: Mapping[str, Any] | None = None,
) -> None:
    """A run of id `run_id` (any text), with `name`, `status`, `owner` and `config`
    (any JSON; by default an sgd run's), that trained no step."""
    now = time.time()
    write(
        location,
        "INSERT INTO runs (id, name, status, config, created, updated, owner)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (run_id, name, status, json.dumps(config or {"optimizer": "sgd"}), now, now, owner),
    )


def service(
    location: str,
    owner: str,
    role: str,
    *,
    started: float,
    heartbeat: float,
    info: Mapping[str, Any] | None = None,
) -> None:
    """A service row of `owner` in `role`, started and beating when said (Unix seconds)."""
    write(
        location,
        "INSERT INTO services (owner, role, started, heartbeat, info) VALUES (?, ?, ?, ?, ?)",
        (owner, role, started, heartbeat, json.dumps(dict(info or {}))),
    )
