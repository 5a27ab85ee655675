"""Tests of `core.store`: the file checks, runs and events, and the metrics path."""

import hashlib
import math
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import closing
from pathlib import Path

import numpy as np
import psycopg
import pytest

from core.engine.commands import RUNS
from core.knobs import InvalidInput
from core.store import (
    APPLICATION_ID,
    SCHEMA_VERSION,
    Metrics,
    Store,
    StoreError,
    UnknownRunError,
    chunks,
    default_location,
    default_path,
    is_url,
    owner,
    shown,
)
from core.store.owner import LIVENESS_SECONDS
from core.store.paths import files_base
from tests import planted
from tests.waiting import scaled, wait_for

PROJECT_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "lab.sqlite"


@pytest.fixture
def store(store_location):
    """A new store on each backend."""
    with Store(store_location) as store:
        yield store


def one_row(store, sql):
    """The first row of `sql`, read by the database's own driver, not through the store."""
    if is_url(store.location):
        with psycopg.connect(store.location) as conn:
            return conn.execute(sql).fetchone()
    with closing(sqlite3.connect(store.path)) as conn:
        return conn.execute(sql).fetchone()


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def raised_by(check, timeout=5.0):
    """Calls `check` until it raises `StoreError`, and returns that; fails after `timeout`
    nominal seconds."""
    raised = []

    def raises() -> bool:
        try:
            check()
        except StoreError as exc:
            raised.append(exc)
        return bool(raised)

    wait_for(raises, timeout, "a StoreError", interval=0.01)
    return raised[0]


def write_rows(store, run_id, rows, flush_every=None):
    """Append `rows` ({step: values}) through a writer, committing every `flush_every` rows."""
    with store.metrics_writer(run_id, flush_interval=60) as writer:
        for i, (step, values) in enumerate(rows.items(), 1):
            writer.append(step, values)
            if flush_every and i % flush_every == 0:
                writer.flush()


def expected_columns(rows):
    """The series `read_metrics` should return for `rows`, built the slow, obvious way."""
    keys = list(dict.fromkeys(key for values in rows.values() for key in values))
    return {key: [values.get(key, math.nan) for values in rows.values()] for key in keys}


def assert_metrics_equal(metrics, rows):
    assert metrics.steps.dtype == np.int64
    np.testing.assert_array_equal(metrics.steps, list(rows))
    expected = expected_columns(rows)
    assert metrics.keys == tuple(expected)
    for key, values in expected.items():
        assert metrics[key].dtype == np.float64
        np.testing.assert_array_equal(metrics[key], values)  # NaN equals NaN here


# The file: creation, and refusing files that are not ours


def test_new_file_gets_schema_in_wal_mode(tmp_path):
    path = tmp_path / "new" / "folder" / "lab.sqlite"
    Store(path).close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"runs", "metric_chunks", "events"} <= tables
    conn.close()


def test_empty_file_gets_schema(db_path):
    db_path.touch()
    with Store(db_path) as store:
        store.create_run("r", "r", {})
    assert db_path.stat().st_size > 0


def test_reopening_keeps_everything(db_path):
    with Store(db_path) as store:
        store.create_run("r", "first", {"lr": 0.1})
        write_rows(store, "r", {0: {"loss": 1.0}, 1: {"loss": 0.5}})
    with Store(db_path) as store:
        assert store.get_run("r").config == {"lr": 0.1}
        np.testing.assert_array_equal(store.read_metrics("r")["loss"], [1.0, 0.5])


def test_a_second_store_on_the_file_keeps_the_first_ones_locks(db_path):
    """Two stores on one file in one process (an engine beside a reader), then another
    process that writes and closes: SQLite's locks are per process, and a descriptor of
    ours closed on the file dropped the first store's, so the other process took the file
    for unused, checkpointed its WAL and reset it, and the first store read a stale file
    (none of the other's runs) or "database disk image is malformed"."""
    with Store(db_path) as first:
        first.create_run("a", "a", {"lr": 0.1})
        assert first.get_run("a") is not None
        with Store(db_path) as second:
            assert second.get_run("a") is not None
            writer = (
                "import sys; from core.store import Store\n"
                "with Store(sys.argv[1]) as store:\n"
                "    for k in range(50): store.create_run(f'b{k}', 'b', {'lr': 0.2})"
            )
            subprocess.run([sys.executable, "-c", writer, str(db_path)], check=True, timeout=120)
            assert len(first.list_runs()) == 51
            assert len(second.list_runs()) == 51


def test_refuses_a_corrupt_file_without_touching_it(db_path):
    db_path.write_bytes(np.random.default_rng(0).bytes(10_000))
    before = sha256(db_path)
    with pytest.raises(StoreError, match="not a SQLite database"):
        Store(db_path)
    assert sha256(db_path) == before
    assert sorted(p.name for p in db_path.parent.iterdir()) == [db_path.name]


def _foreign_tables(path):
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    conn.execute("INSERT INTO notes (body) VALUES ('keep me')")
    conn.commit()
    conn.close()


def _foreign_application_id(path):
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA application_id = 1234")
    conn.execute("CREATE TABLE runs (id TEXT)")  # even a table of ours does not make it ours
    conn.commit()
    conn.close()


def _foreign_wal_left_by_a_crash(path):
    # Changes still in the WAL: a careless open and close would fold them into the file.
    source = path.with_name("source.sqlite")
    conn = sqlite3.connect(source)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.executemany("INSERT INTO notes VALUES (?)", [("x" * 500,)] * 100)
    conn.commit()
    path.write_bytes(source.read_bytes())
    path.with_name(path.name + "-wal").write_bytes(
        source.with_name("source.sqlite-wal").read_bytes()
    )
    conn.close()
    source.unlink()


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (_foreign_tables, "another application .*notes"),
        (_foreign_application_id, "another application .*0x4d2"),
        (_foreign_wal_left_by_a_crash, "another application .*notes"),
    ],
)
def test_refuses_a_foreign_database_without_touching_it(db_path, make, message):
    make(db_path)
    before = {path.name: sha256(path) for path in db_path.parent.iterdir()}
    with pytest.raises(StoreError, match=message):
        Store(db_path)
    after = {path.name: sha256(path) for path in db_path.parent.iterdir()}
    # Reading a WAL database adds its shared-memory index; nothing else may change.
    assert after.keys() - before.keys() <= {db_path.name + "-shm"}
    assert {name: after.get(name) for name in before} == before


def test_refuses_another_schema_version(db_path):
    Store(db_path).close()
    conn = sqlite3.connect(db_path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    before = sha256(db_path)
    with pytest.raises(StoreError, match="schema version"):
        Store(db_path)
    assert sha256(db_path) == before


def test_default_location(monkeypatch, tmp_path):
    monkeypatch.delenv("OPTLAB_STORE", raising=False)
    assert default_location() == str(default_path())
    assert default_path() == PROJECT_ROOT / "runs" / "optlab.sqlite"
    monkeypatch.setenv("OPTLAB_STORE", str(tmp_path / "elsewhere.sqlite"))
    with Store() as store:
        assert store.path == tmp_path / "elsewhere.sqlite"
    assert (tmp_path / "elsewhere.sqlite").exists()


def test_default_location_may_be_a_postgresql_url(monkeypatch, postgres):
    url = postgres.create_database()
    monkeypatch.setenv("OPTLAB_STORE", url)
    with Store() as store:
        assert (store.location, store.name) == (url, url)
        store.create_run("r", "r", {})
    with Store(url) as store:
        assert [run.id for run in store.list_runs()] == ["r"]


@pytest.mark.parametrize(
    ("location", "name", "base"),
    [
        ("lab.sqlite", "lab.sqlite", "lab.sqlite"),
        (
            "postgresql://me:secret@db.example:5433/lab",
            "postgresql://me:***@db.example:5433/lab",
            "runs/db_example_5433_lab.postgresql",
        ),
        (
            "postgres://db/lab?options=-csearch_path%3Dteam",
            "postgres://db/lab?options=-csearch_path%3Dteam",
            "runs/db_5432_lab_team.postgresql",
        ),
    ],
)
def test_a_location_is_shown_without_its_password(location, name, base, monkeypatch):
    monkeypatch.delenv("OPTLAB_FILES", raising=False)
    assert shown(location) == name
    expected = Path(base) if base == location else PROJECT_ROOT / base
    assert files_base(location) == expected


def test_a_postgresql_store_refuses_a_foreign_database(postgres):
    url = postgres.create_database()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER)")
    with pytest.raises(StoreError, match=r"another application \(invoices\)"):
        Store(url)
    with psycopg.connect(url) as conn:
        tables = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        assert [name for (name,) in tables] == ["invoices"]


def test_a_postgresql_store_refuses_another_schema_version(postgres):
    url = postgres.create_database()
    Store(url).close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"UPDATE optlab_store SET schema_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(StoreError, match="schema version"):
        Store(url)


@pytest.mark.parametrize(
    ("location", "message"),
    [
        ("postgresql://postgres:secret@127.0.0.1:1/lab", "Connection refused"),
        ("postgresql://postgres@127.0.0.1:{port}/missing", 'database "missing" does not exist'),
    ],
)
def test_an_unreachable_postgresql_store_is_refused_with_the_reason(postgres, location, message):
    location = location.format(port=postgres.port)
    with pytest.raises(StoreError, match=message) as raised:
        Store(location)
    assert shown(location) in str(raised.value) and "secret" not in str(raised.value)


def test_closed_store_refuses_work(db_path):
    store = Store(db_path)
    store.close()
    store.close()  # idempotent
    with pytest.raises(StoreError, match="closed"):
        store.list_runs()


# Runs and events


def test_run_lifecycle(store):
    created = store.create_run(
        "r1", "adam", {"lr": np.float32(0.5), "sizes": (8, 4)}, total_steps=10
    )
    assert created.status == "queued"
    assert created.config == {"lr": 0.5, "sizes": [8, 4]}
    assert (created.step, created.total_steps, created.started, created.progress) == (
        0,
        10,
        None,
        0,
    )

    store.set_status("r1", "running")
    store.set_progress("r1", 4)
    run = store.get_run("r1")
    assert (run.status, run.step, run.total_steps) == ("running", 4, 10)
    assert run.started is not None and run.active and run.progress == 0.4

    store.finish("r1", "diverged", {"loss": math.nan, "accuracy": 0.25}, error="loss is NaN")
    run = store.get_run("r1")
    assert (run.status, run.error, run.active) == ("diverged", "loss is NaN", False)
    assert math.isnan(run.final_metrics["loss"]) and run.final_metrics["accuracy"] == 0.25
    assert run.finished >= run.started >= run.created


def test_runs_are_listed_newest_first(store):
    for run_id in ("a", "b", "c"):
        store.create_run(run_id, run_id, {})
    assert [run.id for run in store.list_runs()] == ["c", "b", "a"]
    assert store.get_run("missing") is None


def test_run_validation(store):
    store.create_run("r", "r", {})
    with pytest.raises(StoreError, match="already exists"):
        store.create_run("r", "again", {})
    with pytest.raises(ValueError, match="status"):
        store.set_status("r", "exploded")
    with pytest.raises(ValueError, match="status"):
        store.create_run("s", "s", {}, status="done")
    with pytest.raises(ValueError, match="status"):
        store.finish("r", "running", {})
    with pytest.raises(UnknownRunError):
        store.set_status("missing", "running")
    with pytest.raises(UnknownRunError):
        store.add_event("missing", 0, "lr_change", {})
    with pytest.raises(UnknownRunError):
        store.metrics_writer("missing")


@pytest.mark.parametrize("run_id", ["../..", "a/../../x", "/tmp/x", "", "a b", "r.1", "x" * 65])
def test_a_run_id_other_than_letters_digits_underscores_and_dashes_is_refused(db_path, run_id):
    """An id becomes a folder (its checkpoints): one that could name any other path is
    refused naming `run_id`, and nothing is stored."""
    with Store(db_path) as store:
        with pytest.raises(InvalidInput) as refused:
            store.create_run(run_id, "r", {})
        assert list(refused.value.errors) == ["run_id"]
        assert store.list_runs() == []
        store.create_run("Ab_9-" + "x" * 59, "64 characters", {})


def test_set_status_replaces_the_error(store):
    store.create_run("r", "r", {})
    store.set_status("r", "failed", error="out of memory")
    assert store.get_run("r").error == "out of memory"
    store.set_status("r", "queued")
    assert store.get_run("r").error is None


def test_events(store):
    store.create_run("r", "r", {})
    store.add_event("r", 1234, "lr_change", {"lr": 0.01})
    store.add_event("r", 10, "note", {"text": "warm-up over"})
    late = store.add_event("r", 1234, "pause")
    events = store.events("r")
    assert [(e.step, e.kind) for e in events] == [
        (10, "note"),
        (1234, "lr_change"),
        (1234, "pause"),
    ]
    assert events[1].payload == {"lr": 0.01} and events[-1] == late
    assert [e.kind for e in store.events("r", kind="lr_change")] == ["lr_change"]


def test_delete_run_takes_its_metrics_and_events(store):
    for run_id in ("gone", "kept"):
        store.create_run(run_id, run_id, {})
        store.add_event(run_id, 0, "start")
        write_rows(store, run_id, {0: {"loss": 1.0}})
    assert store.delete_run("gone") is True
    assert store.delete_run("gone") is False
    assert store.get_run("gone") is None
    assert store.events("gone") == [] and len(store.read_metrics("gone")) == 0
    assert len(store.events("kept")) == 1 and len(store.read_metrics("kept")) == 1


def test_mark_interrupted(store):
    for status in ("queued", "running", "paused", "completed", "failed"):
        store.create_run(status, status, {}, status=status)
    assert sorted(store.mark_interrupted()) == ["paused", "queued", "running"]
    statuses = {run.id: run.status for run in store.list_runs()}
    assert statuses == {
        "queued": "interrupted",
        "running": "interrupted",
        "paused": "interrupted",
        "completed": "completed",
        "failed": "failed",
    }
    assert "running" in store.get_run("running").error
    assert store.mark_interrupted() == []


DEAD = f"{socket.gethostname()}:{2**22 + 7}:1"  # this host, a pid no process has


def test_a_run_of_a_dead_process_reads_as_interrupted(store):
    store.create_run("orphan", "orphan", {}, status="running", owner=DEAD)
    store.create_run("mine", "mine", {}, status="paused", owner=owner.current())
    store.create_run("waiting", "waiting", {}, status="queued", owner=DEAD)
    run = store.get_run("orphan")
    assert run.status == "interrupted" and "ended while it was running" in run.error
    statuses = {run.id: run.status for run in store.list_runs()}
    assert statuses == {"orphan": "interrupted", "mine": "paused", "waiting": "queued"}
    # Stored so, before any engine writes it:
    assert one_row(store, "SELECT status FROM runs WHERE id = 'orphan'") == ("running",)


def test_a_part_of_a_process_lives_and_takes_commands_as_its_own(store):
    """A script's fit beside an engine in one process: each takes only its own runs'
    commands (the engine once took the fit's stop and refused it), both alive."""
    fit = owner.current("fit-r1")
    assert fit.startswith(owner.current() + ":") and owner.alive(fit)
    assert not owner.alive(DEAD + ":fit-r1")
    store.create_run("script", "script", {}, status="running", owner=fit)
    store.create_run("engine", "engine", {}, status="running", owner=owner.current())
    stop = store.add_command("script", "stop")
    assert [c.id for c in store.pending_commands(fit)] == [stop.id]
    assert [c.run_id for c in store.pending_commands(owner.current())] == []
    assert store.get_run("script").status == "running"  # its owner lives


def test_the_serving_engine_takes_every_runs_exports_and_only_those(store):
    store.create_run("cli", "cli", {}, status="completed", owner=DEAD)  # trained elsewhere
    store.create_run("own", "own", {}, status="running", owner="engine")
    export = store.add_command("cli", "export", {"checkpoint": "best"})
    store.add_command("cli", "stop")  # its owner's, never the engine's
    stop = store.add_command("own", "stop")
    assert [c.id for c in store.pending_commands("engine")] == [stop.id]
    served = store.pending_commands("engine", any_run=("export",))
    assert [(c.id, c.payload) for c in served] == [
        (export.id, {"checkpoint": "best"}),
        (stop.id, {}),
    ]


def test_the_queue_of_a_dead_engine_is_requeued_in_order(store):
    for run_id in ("first", "second", "third"):
        store.create_run(run_id, run_id, {}, status="queued", owner=DEAD, command="start")
    store.create_run("own", "own", {}, status="queued", owner=DEAD)  # a CLI's: no hand-over
    store.create_run("alive", "alive", {}, status="queued", owner=owner.current(), command="start")
    assert store.mark_interrupted(owner.alive) == ["own"]
    assert store.requeue("new", owner.alive) == ["first", "second", "third"]
    assert [(c.run_id, c.kind) for c in store.pending_commands("new")] == [
        ("first", "start"),
        ("second", "start"),
        ("third", "start"),
    ]
    assert {r.id: r.owner for r in store.list_runs() if r.status == "queued"} == {
        "first": "new",
        "second": "new",
        "third": "new",
        "alive": owner.current(),
    }
    assert store.requeue("new", owner.alive) == []


REMOTE = "other-host:4242:99"  # a process of another host: only its heartbeat tells


def silence(store, seconds):
    """Every heartbeat `seconds` older, as if none had come for that long."""
    planted.write(store.location, "UPDATE services SET heartbeat = heartbeat - ?", (seconds,))


def test_a_run_of_another_host_lives_while_its_process_beats(store):
    """Before, a process of another host counted as alive forever, and its runs stayed
    `running`: now they read as interrupted once its heartbeat is `LIVENESS_SECONDS`
    old (or from further in the future), and an engine starting marks them so."""
    store.heartbeat(REMOTE, RUNS)
    store.create_run("running", "running", {}, status="running", owner=REMOTE)
    store.create_run("paused", "paused", {}, status="paused", owner=REMOTE)
    assert {r.id: r.status for r in store.list_runs()} == {"running": "running", "paused": "paused"}
    assert store.mark_interrupted() == []
    silence(store, LIVENESS_SECONDS + 1)
    run = store.get_run("running")
    assert run.status == "interrupted" and "ended while it was running" in run.error
    assert {r.status for r in store.list_runs()} == {"interrupted"}
    silence(store, -2 * LIVENESS_SECONDS - 2)  # a heartbeat written from the future
    assert {r.status for r in store.list_runs()} == {"interrupted"}
    assert store.reopen("paused", 0, owner=owner.current()).status == "queued"  # resumable
    assert store.mark_interrupted() == ["running"]
    assert one_row(store, "SELECT status FROM runs WHERE id = 'running'") == ("interrupted",)


def test_the_queue_of_a_silent_engine_on_another_host_is_taken(store):
    for run_id in ("first", "second"):
        store.create_run(run_id, run_id, {}, status="queued", owner=REMOTE, command="start")
    store.heartbeat(REMOTE, "engine")
    assert store.requeue("new") == []
    silence(store, LIVENESS_SECONDS + 1)
    assert store.mark_interrupted() == []  # handed to an engine: the next one takes them
    assert store.requeue("new") == ["first", "second"]
    assert {r.owner for r in store.list_runs()} == {"new"}


def test_a_heartbeat_writes_its_row_again_and_silent_rows_are_forgotten(store):
    store.register_service(REMOTE, "engine", {"ready": True})
    store.heartbeat("other-host:1:1", RUNS)
    silence(store, LIVENESS_SECONDS + 1)
    store.heartbeat("other-host:1:1", RUNS)
    assert store.forget_silent_services() == 1
    assert [(s.owner, s.role) for s in store.services()] == [("other-host:1:1", RUNS)]
    store.heartbeat(REMOTE, "engine")  # a live engine, only slow: its row is back
    (engine,) = store.services("engine")
    assert engine.owner == REMOTE and engine.info == {}
    store.heartbeat(REMOTE, "engine", {"ready": True})
    assert store.services("engine")[0].info == {"ready": True}


@pytest.mark.parametrize("step", [0, 1, 37, 500, 1998, 1999, 2500])
def test_reopen_forgets_what_came_after_the_step(store, step):
    store.create_run("r", "r", {}, status="running", owner="old")
    rows = {s: {"loss": float(s), "accuracy": -float(s)} for s in range(2000)}
    write_rows(store, "r", rows, flush_every=3)  # merged chunks of several levels
    for event_step in (0, step, step + 1):
        store.add_event("r", event_step, "knob")
    store.add_command("r", "stop")
    store.finish("r", "stopped", {"steps": 1999}, "an error")

    record = store.reopen("r", step, owner="new", command="start")
    assert (record.status, record.owner, record.step) == ("queued", "new", step)
    assert record.final_metrics is None and record.error is None and record.finished is None
    kept = {s: v for s, v in rows.items() if s <= step}
    assert_metrics_equal(store.read_metrics("r"), kept)
    assert [e.step for e in store.events("r")] == [0, step]
    assert [c.kind for c in store.pending_commands("new")] == ["start"]
    write_rows(store, "r", {step + 1: {"loss": -1.0}})  # the resumed run writes on
    assert store.read_metrics("r").last_step == step + 1


@pytest.mark.parametrize("status", ["queued", "running", "paused", "completed", "failed"])
def test_only_stopped_or_interrupted_runs_reopen(store, status):
    store.create_run("r", "r", {}, status=status)
    write_rows(store, "r", {1: {"loss": 1.0}})
    with pytest.raises(InvalidInput, match="run_id"):
        store.reopen("r", 0, owner="new")
    assert store.get_run("r").status == status and len(store.read_metrics("r")) == 1
    with pytest.raises(UnknownRunError):
        store.reopen("nobody", 0, owner="new")


def test_deleting_a_run_deletes_its_checkpoints(store):
    store.create_run("r", "r", {})
    folder = store.checkpoint_folder("r")
    assert folder == store.path.parent / f"{store.path.stem}.checkpoints" / "r"
    folder.mkdir(parents=True)
    (folder / "step-1.index").write_bytes(b"x")
    store.delete_run("r")
    assert not folder.exists()


# Metrics: format and reads


def test_metrics_round_trip_with_changing_keys_and_gaps(store):
    store.create_run("r", "r", {})
    rows = {}
    for step in range(0, 300, 3):  # logged every 3 steps
        values = {"loss": 1 / (step + 1), "grad_norm": float(step)}
        if step % 30 == 0:
            values["val_accuracy"] = step / 300  # once per "epoch", first seen at step 0
        if step >= 150:
            values["sparsity/dense"] = 0.5  # a series that appears later
        if step == 90:
            del values["grad_norm"]  # a gap
            values["loss"] = math.nan  # logged as NaN
        rows[step] = values
    write_rows(store, "r", rows, flush_every=7)  # chunks with different keys
    metrics = store.read_metrics("r")
    assert_metrics_equal(metrics, rows)
    assert metrics.keys == ("loss", "grad_norm", "val_accuracy", "sparsity/dense")
    assert metrics.last_step == 297 and len(metrics) == 100


def test_a_resumed_run_appends_with_its_own_key_order(store):
    store.create_run("r", "r", {})
    first = {step: {"loss": 1.0, "accuracy": 0.5} for step in range(5)}
    later = {step: {"accuracy": 0.7, "lr": 0.1} for step in range(5, 9)}
    write_rows(store, "r", first)
    with store.metrics_writer("r") as writer, pytest.raises(ValueError, match="step must increase"):
        writer.append(4, {"loss": 0.0})  # overlaps the stored steps
    write_rows(store, "r", later)
    assert_metrics_equal(store.read_metrics("r"), first | later)


def test_many_small_flushes_are_merged(store):
    store.create_run("r", "r", {})
    rows = {step: {"loss": float(step), "accuracy": -float(step)} for step in range(2000)}
    write_rows(store, "r", rows, flush_every=1)  # what a slow run does: one row per flush
    n_chunks, n_rows = one_row(store, "SELECT count(*), sum(n_rows) FROM metric_chunks")
    assert n_rows == 2000
    assert n_chunks < 4 * chunks.FANOUT  # instead of 2000
    assert_metrics_equal(store.read_metrics("r"), rows)


def test_since_step_returns_only_later_rows(store):
    store.create_run("r", "r", {})
    rows = {step: {"loss": float(step)} for step in range(0, 100, 2)}
    rows[50]["val"] = 1.0
    write_rows(store, "r", rows, flush_every=9)
    for since in (-5, 0, 1, 16, 17, 18, 50, 97, 98, 1000):
        later = {step: values for step, values in rows.items() if step > since}
        metrics = store.read_metrics("r", since_step=since)
        np.testing.assert_array_equal(metrics.steps, list(later))
        if later:
            np.testing.assert_array_equal(metrics["loss"], [v["loss"] for v in later.values()])


def test_incremental_polls_concat_to_the_whole(store):
    store.create_run("r", "r", {})
    rows = {step: {"loss": float(step)} | ({"val": 1.0} if step > 30 else {}) for step in range(60)}
    seen = Metrics()
    with store.metrics_writer("r", flush_interval=60) as writer:
        for step, values in rows.items():
            writer.append(step, values)
            if step % 10 == 9:
                writer.flush()
                seen = seen.concat(store.read_metrics("r", since_step=seen.last_step))
    assert_metrics_equal(seen, rows)
    with pytest.raises(ValueError, match="not after"):
        seen.concat(store.read_metrics("r", since_step=50))


def test_unknown_run_reads_as_empty(store):
    metrics = store.read_metrics("nobody")
    assert len(metrics) == 0 and metrics.keys == () and metrics.last_step is None
    assert metrics.steps.dtype == np.int64


# Metrics: the writer


def test_append_buffers_and_close_flushes(store):
    store.create_run("r", "r", {})
    writer = store.metrics_writer("r", flush_interval=60)
    for step in range(100):
        writer.append(step, {"loss": float(step)})
    assert writer.pending() == 100
    assert len(store.read_metrics("r")) == 0  # nothing written yet
    writer.close()
    assert writer.pending() == 0
    assert len(store.read_metrics("r")) == 100
    assert store.get_run("r").step == 99  # flushing advances the run's progress
    with pytest.raises(StoreError, match="closed"):
        writer.append(100, {"loss": 0.0})


def test_events_are_buffered_and_committed_with_the_rows(store):
    store.create_run("r", "r", {})
    writer = store.metrics_writer("r", flush_interval=60)
    writer.append(4, {"loss": 1.0})
    writer.add_event(4, "histogram", {"edges": [0.0, 1.0]})
    writer.add_event(5, "knob", {"name": "learning_rate", "value": 0.1})
    assert store.events("r") == []  # nothing written yet: a locked store waits for no step
    writer.close()
    events = store.events("r")
    assert [(e.step, e.kind, e.payload) for e in events] == [
        (4, "histogram", {"edges": [0.0, 1.0]}),
        (5, "knob", {"name": "learning_rate", "value": 0.1}),
    ]
    with pytest.raises(StoreError, match="closed"):
        writer.add_event(6, "knob", {})


def test_an_event_that_could_not_be_saved_is_named_by_its_step(store):
    store.create_run("r", "r", {})
    writer = store.metrics_writer("r", flush_interval=60)
    writer.add_event(7, "knob", {"name": "radius", "value": 2.0})
    store.delete_run("r")
    with pytest.raises(StoreError, match=r"step 7 lost"):
        writer.flush()


def test_rows_appear_after_the_flush_interval(store):
    store.create_run("r", "r", {})
    with store.metrics_writer("r", flush_interval=0.05) as writer:
        writer.append(0, {"loss": 1.0})
        wait_for(lambda: len(store.read_metrics("r")) == 1)
        writer.append(1, {"loss": 0.5})
        wait_for(lambda: len(store.read_metrics("r")) == 2)
        assert writer.pending() == 0


def test_writer_validates_its_input(store):
    store.create_run("r", "r", {})
    with store.metrics_writer("r") as writer:
        writer.append(5, {"loss": 1.0})
        with pytest.raises(ValueError, match="step must increase"):
            writer.append(5, {"loss": 1.0})
        with pytest.raises(TypeError, match="strings"):
            writer.append(6, {3: 1.0})
        with pytest.raises(StoreError, match="already has an open metrics writer"):
            store.metrics_writer("r")


def test_store_close_flushes_open_writers(db_path):
    store = Store(db_path)
    store.create_run("r", "r", {})
    writer = store.metrics_writer("r", flush_interval=60)
    writer.append(0, {"loss": 1.0})
    store.close()
    with pytest.raises(StoreError, match="closed"):
        writer.append(1, {"loss": 0.5})
    with Store(db_path) as reopened:
        assert len(reopened.read_metrics("r")) == 1


def test_a_failed_commit_reaches_the_training_thread(db_path):
    # Root ignores file permissions, so the write fails on a lock held by another connection.
    store = Store(db_path, timeout=0.05)
    store.create_run("r", "r", {})
    writer = store.metrics_writer("r", flush_interval=0.02)
    blocker = sqlite3.connect(db_path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        writer.append(0, {"loss": 1.0})
        error = raised_by(writer.check)
        assert str(error) == (
            "could not save the metrics of run 'r' (step 0 lost): database is locked"
        )
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    with pytest.raises(StoreError, match="database is locked") as raised:
        writer.append(1, {"loss": 0.5})
    cause = raised.value.__cause__
    assert cause.transient and isinstance(cause.__cause__, sqlite3.OperationalError)
    with pytest.raises(StoreError, match="database is locked"):
        writer.close()
    store.close()


def test_deleting_a_run_fails_its_writer(store):
    store.create_run("r", "r", {})
    writer = store.metrics_writer("r", flush_interval=60)
    writer.append(0, {"loss": 1.0})
    store.delete_run("r")
    with pytest.raises(StoreError, match=r"(?i)foreign key"):
        writer.flush()
    with pytest.raises(StoreError, match=r"(?i)foreign key"):
        writer.append(1, {"loss": 0.5})


def test_reads_while_another_thread_writes(store):
    store.create_run("r", "r", {})
    n_steps = 3000
    errors = []
    done = threading.Event()
    read = [-1]  # the last step a reader has seen

    def train():
        try:
            with store.metrics_writer("r", flush_interval=0.01) as writer:
                for step in range(n_steps):
                    writer.append(step, {"loss": float(step), "acc": step / n_steps})
                    if step % 300 == 299:  # the readers catch up: reads fall between writes
                        wait_for(lambda step=step: read[0] >= step, 20, f"a read of step {step}")
        except Exception as exc:
            errors.append(exc)
        finally:
            done.set()

    def poll():
        try:
            seen = Metrics()
            while True:
                finished = done.is_set()  # before reading, so that the last read sees it all
                seen = seen.concat(store.read_metrics("r", since_step=seen.last_step))
                read[0] = max(read[0], -1 if seen.last_step is None else seen.last_step)
                np.testing.assert_array_equal(seen.steps, np.arange(len(seen)))
                if len(seen):
                    np.testing.assert_array_equal(seen["loss"], seen.steps)
                store.list_runs()
                if finished:
                    break
            assert len(seen) == n_steps
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=train)] + [threading.Thread(target=poll) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=scaled(20))
    assert not errors, errors
    assert len(store.read_metrics("r")) == n_steps


CHILD = """
import sys, time
from core.store import Store

store = Store(sys.argv[1], flush_interval=0.5)
store.create_run("r", "killed", {}, status="running")
writer = store.metrics_writer("r")
with open(sys.argv[2], "w", buffering=1) as report:
    step = 0
    while True:
        writer.append(step, {"loss": 1.0 / (step + 1), "step_norm/dense": float(step)})
        report.write(f"{step} {time.monotonic()}\\n")
        step += 1
        time.sleep(0.0005)
"""


@pytest.mark.slow  # a child process, killed
def test_sigkill_loses_at_most_the_last_interval(tmp_path, db_path):
    report = tmp_path / "appended.txt"
    env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT))
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(db_path), str(report)],
        cwd=PROJECT_ROOT,
        env=env,
        stderr=subprocess.PIPE,
    )

    def started():
        return (report.exists() and report.stat().st_size > 0) or child.poll() is not None

    flushed = set()  # the last stored step after each of the child's flushes

    def flushed_thrice():  # a second of writing, killed between flushes as a long run is
        with closing(sqlite3.connect(db_path)) as conn:
            flushed.add(conn.execute("SELECT max(last_step) FROM metric_chunks").fetchone()[0])
        return child.poll() is not None or len(flushed - {None}) >= 3

    try:
        wait_for(started)
        wait_for(flushed_thrice, 30, "three flushes of the child's metrics")
    finally:
        child.send_signal(signal.SIGKILL)
        _, stderr = child.communicate()
    assert child.returncode == -signal.SIGKILL, stderr.decode()

    lines = [line.split() for line in report.read_text().splitlines()]
    (first_step, first_time), (last_step, last_time) = lines[0], lines[-1]
    steps_per_second = (int(last_step) - int(first_step)) / (float(last_time) - float(first_time))

    with sqlite3.connect(db_path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    with Store(db_path) as store:
        metrics = store.read_metrics("r")
        assert store.get_run("r").status == "running"
    stored_last = metrics.last_step
    print(
        f"\nchild appended {last_step} steps at {steps_per_second:.0f}/s; store has {stored_last}"
    )
    np.testing.assert_array_equal(metrics.steps, np.arange(len(metrics)))  # contiguous
    np.testing.assert_array_equal(metrics["step_norm/dense"], metrics.steps)
    assert stored_last is not None
    assert int(last_step) - stored_last <= steps_per_second * 1.0


@pytest.mark.slow  # a long run written and read back
def test_reading_a_long_run(store):
    """50,000 steps × 30 series, written as a 20-step/s run would be. Prints the read time."""
    store.create_run("r", "long", {})
    keys = ["loss", "accuracy", "grad_norm", "lr"]
    keys += [f"{kind}/layer{i}" for kind in ("step_norm", "sparsity") for i in range(13)]
    data = np.random.default_rng(0).random((50_000, len(keys)))
    with store.metrics_writer("r", flush_interval=60) as writer:
        for step, row in enumerate(data.tolist()):
            writer.append(step, dict(zip(keys, row, strict=True)))
            if step % 10 == 9:  # about what a 0.5 s interval sees at 20 steps/s
                writer.flush()
    start = time.perf_counter()
    metrics = store.read_metrics("r")
    elapsed = time.perf_counter() - start
    print(f"\nread 50,000 steps x {len(keys)} series in {elapsed * 1000:.1f} ms")
    assert metrics.keys == tuple(keys)
    np.testing.assert_array_equal(np.column_stack([metrics[key] for key in keys]), data)
