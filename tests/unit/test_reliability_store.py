"""The store when SQLite cannot write: errors are `StoreError`s naming the file, and a run's
final status that cannot be written yet is kept, shown, and written once it can be.

"Cannot write" is simulated with another connection holding the write lock and a short
lock timeout (root ignores file permissions); tests/system/test_faults.py fills a real disk.
"""

from __future__ import annotations

import contextlib
import gc
import re
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.store import MetricsWriter, Store, StoreError
from tests.waiting import scaled


@contextlib.contextmanager
def write_locked(path: Path) -> Iterator[None]:
    """Another connection holds the database's write lock inside the block."""
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "lab.sqlite", timeout=0.05) as opened:
        yield opened


def test_sqlite_errors_are_store_errors_naming_the_file(store: Store) -> None:
    """A write that SQLite refuses raises `StoreError` naming the file, with SQLite's error
    as its cause, from every writing method."""
    store.create_run("r1", "r1", {}, status="running")
    with write_locked(store.path):
        for write in (
            lambda: store.create_run("r2", "r2", {}),
            lambda: store.set_status("r1", "paused"),
            lambda: store.set_progress("r1", 3),
            lambda: store.add_event("r1", 3, "knob", {}),
            lambda: store.delete_run("r1"),
            lambda: store.mark_interrupted(),
        ):
            locked = f"{re.escape(str(store.path))}.*database is locked"
            with pytest.raises(StoreError, match=locked) as raised:
                write()
            cause = raised.value.__cause__  # the store's, then SQLite's own
            assert cause.transient and isinstance(cause.__cause__, sqlite3.OperationalError)
    assert [run.id for run in store.list_runs()] == ["r1"]


def test_a_final_status_that_cannot_be_written_is_kept_and_shown(store: Store) -> None:
    """`finish` on a file that takes no writes does not raise: the run reads as finished
    (status, error, final metrics) while the file still says running."""
    store.create_run("r1", "r1", {}, status="running")
    with write_locked(store.path):
        store.finish("r1", "failed", {"steps": 7}, "store: disk full")
        record = store.get_run("r1")
        assert (record.status, record.error, record.final_metrics) == (
            "failed",
            "store: disk full",
            {"steps": 7},
        )
        assert record.finished is not None
        assert [(r.id, r.status) for r in store.list_runs()] == [("r1", "failed")]
    with contextlib.closing(sqlite3.connect(store.path)) as conn:
        assert conn.execute("SELECT status FROM runs").fetchone() == ("running",)


def test_a_kept_final_status_is_written_by_the_next_write(store: Store) -> None:
    """Once the file takes writes again, the next write first writes the kept final status,
    with the time it was given."""
    store.create_run("r1", "r1", {}, status="running")
    with write_locked(store.path):
        store.finish("r1", "failed", {"steps": 7}, "store: disk full")
    finished = store.get_run("r1").finished
    store.create_run("r2", "r2", {})
    with Store(store.path) as other:  # another process's view: the file itself
        record = other.get_run("r1")
    assert (record.status, record.error, record.finished) == (
        "failed",
        "store: disk full",
        finished,
    )


def test_a_kept_final_status_is_written_when_the_store_closes(tmp_path: Path) -> None:
    """Closing the store writes a final status still kept in memory."""
    path = tmp_path / "lab.sqlite"
    store = Store(path, timeout=0.05)
    store.create_run("r1", "r1", {}, status="running")
    with write_locked(path):
        store.finish("r1", "completed", {"steps": 3})
    store.close()
    with Store(path) as reopened:
        assert reopened.get_run("r1").status == "completed"


def test_deleting_a_run_drops_its_kept_final_status(store: Store) -> None:
    """A run deleted while its final status waits is gone, not resurrected by that status."""
    store.create_run("r1", "r1", {}, status="running")
    with write_locked(store.path):
        store.finish("r1", "completed", {"steps": 3})
    assert store.delete_run("r1")
    assert store.get_run("r1") is None and store.list_runs() == []
    store.create_run("r2", "r2", {})
    assert [run.id for run in store.list_runs()] == ["r2"]


def alive_writers() -> int:
    gc.collect()
    return sum(isinstance(o, MetricsWriter) for o in gc.get_objects())


def test_a_store_keeps_no_closed_metrics_writer(store: Store) -> None:
    """A store that trains many runs does not keep their closed metrics writers (each
    with its thread) alive: at most the last one."""
    before = alive_writers()
    for i in range(20):
        store.create_run(f"r{i}", "r", {})
        with store.metrics_writer(f"r{i}") as writer:
            writer.append(1, {"loss": 1.0})
    del writer
    assert alive_writers() - before <= 1


def test_a_flush_asked_for_commits_at_once_in_the_writers_thread(tmp_path: Path) -> None:
    with Store(tmp_path / "lab.sqlite") as store:
        store.create_run("r1", "r1", {}, status="running")
        writer = store.metrics_writer("r1", flush_interval=600.0)
        committed = threading.Event()
        stored: list[list[int]] = []

        def then() -> None:
            stored.append(store.read_metrics("r1").steps.tolist())
            committed.set()

        writer.append(1, {"loss": 1.0})
        with write_locked(store.path):
            writer.flush_soon(then)  # returns while the store is locked: the flusher waits
        assert committed.wait(scaled(60))  # long before the writer's own interval
        assert stored == [[1]]  # called once the row was in the store
        writer.close()
