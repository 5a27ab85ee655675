"""A PostgreSQL server whose disk fills up under a run: the store's tables on a real 8 MiB
file system (a tmpfs mounted as a tablespace of the test server), filled mid-run."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator

import numpy as np
import psycopg
import pytest

from core.engine import Engine
from core.store import Store
from tests.system.test_faults import FAST, SmallDisk, tmpfs_disk
from tests.waiting import wait_for


@contextlib.contextmanager
def database_on_small_disk(postgres) -> Iterator[tuple[str, SmallDisk]]:
    """A new database whose tables live on an 8 MiB tmpfs; yields its URL and the disk."""
    name = f"small_{next(postgres._names)}"
    with tmpfs_disk(postgres.folder / f"{name}_disk") as disk:
        shutil.chown(disk.folder, "postgres", "postgres")
        with psycopg.connect(postgres.url(), autocommit=True) as conn:
            conn.execute(f"CREATE TABLESPACE {name} LOCATION '{disk.folder}'")
            conn.execute(f"CREATE DATABASE {name} TABLESPACE {name}")
        try:
            yield postgres.url(name), disk
        finally:
            with contextlib.suppress(FileNotFoundError):  # what the test left, if anything
                disk.free()
            with psycopg.connect(postgres.url(), autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
                conn.execute(f"DROP TABLESPACE IF EXISTS {name}")


@pytest.mark.slow
def test_a_full_disk_on_the_server_fails_the_run_and_loses_nothing_stored(postgres) -> None:
    """The run whose metrics can no longer be written ends `failed`, saying the server's
    disk is full (never `completed`); what was stored stays; once space is back a new run
    trains and the failed run's status reaches the database."""
    with database_on_small_disk(postgres) as (url, disk):
        engine = Engine(url, max_concurrent=1)
        try:
            victim = engine.start({**FAST, "epochs": 10_000})
            wait_for(lambda: len(engine.metrics(victim)) >= 5, 120, "stored metrics")
            stored_before = engine.metrics(victim)
            disk.fill()
            failed = engine.wait(victim, 120)
            assert failed.status == "failed", failed
            assert "No space left on device" in failed.error
            after = engine.metrics(victim)
            np.testing.assert_array_equal(after.steps[: len(stored_before)], stored_before.steps)

            disk.free()
            again = engine.start({**FAST, "max_steps": 20})
            assert engine.wait(again, 120).status == "completed"
        finally:
            engine.close()
        with Store(url) as store:
            record = store.get_run(victim)
            assert (record.status, record.error) == (failed.status, failed.error)
