"""Faults: a store file that is not ours, the app SIGKILLed while runs train, a full or
read-only disk, a plugin that raises inside the training step, a diverging run.

The full-disk test uses a real full file system (a 8 MiB tmpfs) where this process may
mount one (root with CAP_SYS_ADMIN), and SQLite's `max_page_count` on the store's
connections everywhere; the read-only test needs a read-only bind mount, and is skipped
without one. The SIGKILL test drives the real server with Debian's Chromium, and is
skipped without it.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from streamlit.testing.v1 import AppTest

from core import optimizers
from core.cli import main
from core.engine import Engine
from core.engine.server import EngineService
from core.store import Store, StoreError, is_url
from core.store.connections import ConnectionPool
from tests import app_server, apptest
from tests.browser import NEEDS_CHROMIUM, chromium, settle
from tests.lean import NO_INSTRUMENTS
from tests.threads import new_threads
from tests.waiting import scaled, wait_for, wait_for_moment
from ui import nav

ROOT = Path(__file__).resolve().parents[2]
FAST = {
    "dataset": "digits",
    "model": "mlp",
    "optimizer": "sgd",
    "hyperparameters": {"learning_rate": 0.1},
    **NO_INSTRUMENTS,
}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def integrity(path: Path) -> str:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]


def run_main(*argv: object) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(arg) for arg in argv])
    return code, out.getvalue(), err.getvalue()


# A store file that is not ours ---------------------------------------------------------


def _random_bytes(path: Path) -> None:
    path.write_bytes(np.random.default_rng(6).bytes(12_288))


def _foreign_database(path: Path) -> None:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
        conn.execute("INSERT INTO invoices (total) VALUES (12.5)")
        conn.commit()


def _text_file(path: Path) -> None:
    path.write_text("[server]\naddress = '0.0.0.0'\n")


def _truncated_store(path: Path) -> None:
    Store(path).close()
    path.write_bytes(path.read_bytes()[:100])  # the header survives, the pages do not


FOREIGN = [
    (_random_bytes, "is not a SQLite database"),
    (_foreign_database, "another application .*invoices"),
    (_text_file, "is not a SQLite database"),
    (_truncated_store, "damaged|unreadable|malformed"),
]


@pytest.mark.parametrize(("make", "message"), FOREIGN, ids=lambda v: getattr(v, "__name__", ""))
def test_an_engine_refuses_a_store_that_is_not_ours_and_leaves_it(
    tmp_path: Path, make: Callable[[Path], None], message: str
) -> None:
    """`Engine(path)` on a corrupt, foreign or truncated file raises `StoreError` with the
    reason; the file keeps its bytes, and nothing is written beside it."""
    path = tmp_path / "lab.sqlite"
    make(path)
    before = sha256(path)
    with pytest.raises(StoreError, match=message):
        Engine(path)
    assert sha256(path) == before
    # Looking into a WAL-mode file may add SQLite's empty WAL and index next to it.
    others = {p.name: p.stat().st_size for p in tmp_path.iterdir() if p != path}
    assert others.keys() <= {"lab.sqlite-wal", "lab.sqlite-shm"}
    assert others.get("lab.sqlite-wal", 0) == 0


def test_a_store_path_that_cannot_be_a_file_is_refused_with_the_reason(tmp_path: Path) -> None:
    """A folder given as the store, or a path under a regular file, is a `StoreError`
    naming the path (not an `OSError` from deep inside), for the engine and the CLI."""
    folder = tmp_path / "a-folder"
    folder.mkdir()
    blocker = tmp_path / "notes.txt"
    blocker.write_text("keep me")
    for path in (folder, blocker / "lab.sqlite"):
        with pytest.raises(StoreError, match=str(path.name)):
            Engine(path)
        code, out, err = run_main("train", "--store", path, "--max-steps", "1")
        assert (code, out) == (2, "")
        assert err.startswith("error: ") and err.count("\n") == 1, err
    assert blocker.read_text() == "keep me"
    assert list(folder.iterdir()) == []


def test_the_cli_refuses_a_foreign_store_for_every_command(tmp_path: Path) -> None:
    """`train`, `runs` and `export` on another application's database exit 2 with one
    line saying so, and leave it unchanged."""
    path = tmp_path / "lab.sqlite"
    _foreign_database(path)
    before = sha256(path)
    for command in (["train", "--max-steps", "1"], ["runs"], ["export", "r", "--csv", "x.csv"]):
        code, out, err = run_main(*command, "--store", path)
        assert (code, out) == (2, "")
        assert err.startswith(f"error: {path} is a SQLite database of another application")
        assert err.count("\n") == 1
    assert sha256(path) == before


def test_the_app_shows_why_it_refuses_a_corrupt_store_and_leaves_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dashboard on a corrupt store shows the `StoreError`'s reason, and the file
    keeps its bytes. (A file no connection of this process has open: one that has it
    open shares SQLite's view of it, its WAL's pages included, with any other.)"""
    import streamlit as st

    store = tmp_path / "lab.sqlite"
    _random_bytes(store)
    before = sha256(store)
    monkeypatch.setenv("OPTLAB_STORE", str(store))
    st.cache_resource.clear()
    try:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=scaled(60)).run()
    finally:
        st.cache_resource.clear()
    assert not at.exception
    assert [e.value for e in at.error if "is not a SQLite database" in e.value]
    assert sha256(store) == before


# SIGKILL of the engine, and of the app, while runs train -------------------------------


# The engine process, with a probe that writes down every metrics row the moment it is
# logged (os.write: the kernel has it, so a SIGKILL cannot lose it), then `python -m core`.
PROBED_ENGINE = """
import os, sys, time
from core.store import writer

probe = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND)
append = writer.MetricsWriter.append

def logged(self, step, values):
    append(self, step, values)
    when = values.get("wall_time", time.time())
    os.write(probe, f"{self.run_id} {step} {when!r}\\n".encode())

writer.MetricsWriter.append = logged
from core.cli import main
raise SystemExit(main(sys.argv[2:]))
"""


def probed_rows(probe: Path) -> dict[str, list[tuple[int, float]]]:
    """Each run's logged rows, (step, wall time), as the probe wrote them down."""
    rows: dict[str, list[tuple[int, float]]] = {}
    for line in probe.read_text().splitlines():
        run_id, step, when = line.split()
        rows.setdefault(run_id, []).append((int(step), float(when)))
    return rows


def start_demo_race(url: str) -> None:
    """Click the demo race on Home in Chromium, its short length picked, and wait for the
    Live page."""
    with chromium() as browser:
        page = browser.new_page()
        page.goto(url)
        settle(page)
        page.get_by_role("radio", name="short", exact=True).click()  # a segmented control
        settle(page)
        page.get_by_role("button", name="Start the demo race").click()
        page.wait_for_url(f"{url}{nav.LIVE.url}**", timeout=scaled(60_000))


def live_page_text(url: str) -> str:
    """The text of a Live page in Chromium, once its runs show."""
    with chromium() as browser:
        page = browser.new_page()
        page.goto(url)
        page.wait_for_selector("[data-testid='stProgress']", timeout=scaled(60_000))
        return page.inner_text("body")


def trained_past(store_path: Path, step: int) -> int:
    """How many runs have stored metrics past `step` (past their first traces)."""
    with Store(store_path) as store:
        return sum((store.read_metrics(r.id).last_step or 0) >= step for r in store.list_runs())


@pytest.mark.slow
@NEEDS_CHROMIUM
def test_sigkill_of_the_engine_while_two_runs_train_loses_at_most_a_second(
    tmp_path: Path,
) -> None:
    """Start the demo race in the browser (two runs train, one waits); SIGKILL the engine
    process that trains them. The two that trained read `interrupted` at once; the one
    that waited stays queued, and the next engine to serve the store takes it up. Each
    trained run's stored metrics are the rows it logged up to some step, with no gap, and
    every row logged more than a second before the kill is among them; the file is intact.

    A probe in the engine writes down each row as it is logged, so a training stall
    (instruments being traced) is not mistaken for a loss."""
    store_path, probe = tmp_path / "lab.sqlite", tmp_path / "logged.txt"
    engine_process = app_server.start_engine(
        store_path,
        tmp_path / "engine.log",
        command=("-c", PROBED_ENGINE, str(probe)),
        max_concurrent=2,
    )
    app, port = app_server.start(store_path, tmp_path / "streamlit.log")
    try:
        start_demo_race(f"http://127.0.0.1:{port}")
        wait_for(lambda: trained_past(store_path, 20) == 2, 120, "two runs never trained 20 steps")
        # Just seen committed; the writers commit every 0.5 s: kill near the worst moment.
        wait_for_moment(time.monotonic() + 0.45)
        killed_at = time.time()
        os.kill(engine_process.pid, signal.SIGKILL)
        engine_process.wait(scaled(30))
    finally:
        engine_process.kill()
        app_server.stop(app)
    assert engine_process.returncode == -signal.SIGKILL

    logged = probed_rows(probe)
    with Store(store_path) as store:  # before an engine marks them: `updated` is the
        last_commit = {r.id: r.updated for r in store.list_runs()}  # writers' last commit
        read = {r.id: r.status for r in store.list_runs()}  # no engine has marked them
    engine = Engine(store_path)
    try:
        runs = engine.list()
        trained = [run for run in runs if len(engine.metrics(run.id))]
        (waiting,) = [run for run in runs if run not in trained]
        assert len(trained) == 2 and set(logged) == {run.id for run in trained}
        assert sorted(engine.interrupted_at_start) == sorted(run.id for run in trained)
        assert {run.status for run in trained} == {"interrupted"} == {read[r.id] for r in trained}
        assert waiting.status == read[waiting.id] == "queued"
        service = EngineService(engine, warm_up=False)
        service.close()
        assert service.requeued == [waiting.id]
        report = []
        for run in trained:
            stored = engine.metrics(run.id)
            rows = logged[run.id]
            assert stored.steps.tolist() == [step for step, _ in rows[: len(stored)]]  # no gap
            lost = rows[len(stored) :]
            late = [when for _, when in lost if when < killed_at - 1.0]
            report.append(
                f"{run.config['optimizer']}: {len(stored)} rows stored, {len(lost)} lost"
                + (f", logged {killed_at - lost[0][1]:.2f} s to the kill" if lost else "")
                + f"; last commit {killed_at - last_commit[run.id]:.2f} s before the kill"
            )
            assert not late, report[-1]
    finally:
        engine.close()
    print("\nSIGKILL of the engine during the demo race: " + "; ".join(report))
    assert integrity(store_path) == "ok"


@pytest.mark.slow
@NEEDS_CHROMIUM
def test_the_runs_outlive_a_sigkill_of_the_app_which_finds_them_again(tmp_path: Path) -> None:
    """The app launches its engine for the demo race; SIGKILL the app mid-race. The runs
    go on training in the engine process; an app started again finds that engine (it
    launches no second one) and its Live page shows the runs; all three complete."""
    store_path = tmp_path / "lab.sqlite"
    app, port = app_server.start(store_path, tmp_path / "streamlit.log")
    try:
        start_demo_race(f"http://127.0.0.1:{port}")
        wait_for(lambda: trained_past(store_path, 5) >= 1, 120, "no run trained 5 steps")
        engine_pid = app_server.serving_engine(store_path)
        os.kill(app.pid, signal.SIGKILL)
        app.wait(scaled(30))
        steps = lambda: sum(r.step for r in Store(store_path).list_runs())  # noqa: E731
        before = steps()
        wait_for(lambda: steps() > before + 20, 60, "the runs stopped with the app")

        app, port = app_server.start(store_path, tmp_path / "streamlit-again.log")
        with Store(store_path) as store:
            ids = sorted(r.id for r in store.list_runs())
        shown = live_page_text(f"http://127.0.0.1:{port}{nav.LIVE.url}?runs={','.join(ids)}")
        assert all(run_id in shown for run_id in ids), shown
        wait_for(
            lambda: all(not r.active for r in Store(store_path).list_runs()),
            180,
            "the race did not finish",
        )
        assert app_server.serving_engine(store_path) == engine_pid  # the same engine
        with Store(store_path) as store:
            assert {r.status for r in store.list_runs()} == {"completed"}
    finally:
        app_server.stop(app, store_path)


# A full or read-only disk ---------------------------------------------------------------


class SmallDisk:
    """A store that can be made unable to grow (`fill`) and then freed (`free`).

    `location` is the store's (a file in `folder`, or a database whose tables live
    there), and `says` what its error says when full. `whole` says whether a fill leaves
    no byte at all: a full file system does, while `max_page_count` leaves the file's
    free pages (a new small run may fit in them).
    """

    def __init__(
        self, folder: Path, fill: Callable[[], None], free: Callable[[], None], *, whole: bool
    ) -> None:
        self.folder = folder
        self.fill = fill
        self.free = free
        self.whole = whole
        self.location = str(folder / "lab.sqlite")
        self.says = "database or disk is full"


def _mount(*args: str) -> bool:
    if os.geteuid() != 0:
        return False
    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


def _unmount(folder: Path) -> None:
    if subprocess.run(["umount", str(folder)], capture_output=True).returncode:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


@contextmanager
def tmpfs_disk(folder: Path) -> Iterator[SmallDisk]:
    """A real 8 MiB file system; `fill` writes a file until the disk has no space left."""
    folder.mkdir()
    if not _mount("-t", "tmpfs", "-o", "size=8m", "tmpfs", str(folder)):
        pytest.skip("cannot mount a tmpfs here (needs root with CAP_SYS_ADMIN)")
    filler = folder / "filler"

    def fill() -> None:
        try:
            with filler.open("wb") as file:
                while True:
                    file.write(b"\0" * 65_536)
                    file.flush()
        except OSError as exc:  # the store's own writes may have filled it already
            assert exc.errno == errno.ENOSPC
        assert os.statvfs(folder).f_bavail == 0

    try:
        yield SmallDisk(folder, fill, lambda: filler.unlink(), whole=True)
    finally:
        _unmount(folder)


@contextmanager
def page_limited_disk(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SmallDisk]:
    """SQLite's own full disk: every connection the store checks out gets
    `PRAGMA max_page_count`, set to the file's current size by `fill`."""
    folder.mkdir()
    limit = {"pages": 2**30}
    checkout = ConnectionPool.connection

    @contextmanager
    def limited(pool: ConnectionPool) -> Iterator[sqlite3.Connection]:
        with checkout(pool) as conn:
            conn.execute(f"PRAGMA max_page_count = {limit['pages']}")
            yield conn

    monkeypatch.setattr(ConnectionPool, "connection", limited)

    def fill() -> None:
        with contextlib.closing(sqlite3.connect(folder / "lab.sqlite")) as conn:
            limit["pages"] = conn.execute("PRAGMA page_count").fetchone()[0]

    yield SmallDisk(folder, fill, lambda: limit.update(pages=2**30), whole=False)


@contextmanager
def postgres_disk(postgres: Any) -> Iterator[SmallDisk]:
    """A database of the test server whose tables live on an 8 MiB tmpfs (a tablespace
    mounted in the server's folder, which its user can reach)."""
    name = f"small_{uuid.uuid4().hex[:8]}"
    with tmpfs_disk(postgres.folder / name) as disk:
        shutil.chown(disk.folder, "postgres", "postgres")
        with psycopg.connect(postgres.url(), autocommit=True) as conn:
            conn.execute(f"CREATE TABLESPACE {name} LOCATION '{disk.folder}'")
            conn.execute(f"CREATE DATABASE {name} TABLESPACE {name}")
        disk.location, disk.says = postgres.url(name), "No space left on device"
        try:
            yield disk
        finally:
            with contextlib.suppress(FileNotFoundError):  # the test's fill, if it is left
                disk.free()
            with psycopg.connect(postgres.url(), autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
                conn.execute(f"DROP TABLESPACE IF EXISTS {name}")


@pytest.fixture(
    params=["tmpfs", "max_page_count", pytest.param("postgresql", marks=pytest.mark.slow)]
)
def small_disk(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[SmallDisk]:
    if request.param == "tmpfs":
        with tmpfs_disk(tmp_path / "disk") as disk:
            yield disk
    elif request.param == "postgresql":  # the server's disk full
        with postgres_disk(request.getfixturevalue("postgres")) as disk:
            yield disk
    else:
        with page_limited_disk(tmp_path / "disk", monkeypatch) as disk:
            yield disk


def test_a_full_disk_fails_the_run_and_the_engine_keeps_serving(small_disk: SmallDisk) -> None:
    """When the store's disk fills up mid-run, the run ends `failed` saying the disk is
    full, every other call still works, nothing stored before is lost, a new run trains
    once space is back, and the failed run's status reaches the store (a file, or the
    server's database)."""
    engine = Engine(small_disk.location, max_concurrent=2)
    try:
        kept = engine.start({**FAST, "max_steps": 20})
        assert engine.wait(kept, scaled(120)).status == "completed"
        kept_metrics = engine.metrics(kept)
        threads = set(threading.enumerate())

        victim = engine.start({**FAST, "epochs": 10_000})
        wait_for(lambda: len(engine.metrics(victim)) >= 5, 120, "the run stored no metrics")
        stored_before = engine.metrics(victim)
        small_disk.fill()
        failed = engine.wait(victim, scaled(60))
        assert failed.status == "failed", failed
        assert small_disk.says in failed.error
        assert not (lingering := new_threads(threads, 10)), f"threads linger: {lingering}"

        # Still serving: reads, the other run's metrics, the failed run's rows up to the fill.
        assert {run.id: run.status for run in engine.list()} == {
            kept: "completed",
            victim: "failed",
        }
        np.testing.assert_array_equal(engine.metrics(kept).steps, kept_metrics.steps)
        np.testing.assert_array_equal(engine.metrics(kept)["loss"], kept_metrics["loss"])
        after = engine.metrics(victim)
        np.testing.assert_array_equal(after.steps[: len(stored_before)], stored_before.steps)
        if small_disk.whole:  # a run started now fails saying so, at once or when it logs
            try:
                # Whole rows (per-layer statistics every step), 200 of them: the fill
                # leaves them no room, where 20 rows once fit in a page's slack.
                doomed = engine.start({**FAST, "max_steps": 200, "per_layer_every": 1})
            except StoreError as exc:
                assert small_disk.says in str(exc)
            else:
                status = engine.wait(doomed, scaled(120))
                assert status.status == "failed" and small_disk.says in status.error, status

        small_disk.free()
        again = engine.start({**FAST, "max_steps": 20})
        assert engine.wait(again, scaled(120)).status == "completed"
    finally:
        engine.close()

    with Store(small_disk.location) as store:
        record = store.get_run(victim)
        assert (record.status, record.error) == (failed.status, failed.error)
        assert store.get_run(kept).status == "completed"
        np.testing.assert_array_equal(store.read_metrics(kept)["loss"], kept_metrics["loss"])
    if not is_url(small_disk.location):
        assert integrity(Path(small_disk.location)) == "ok"


def test_a_store_on_a_read_only_file_system_is_refused_and_left(tmp_path: Path) -> None:
    """A store on a read-only mount is refused with a `StoreError` saying it cannot be
    written (not that it is damaged), and the file keeps its bytes."""
    source, mounted = tmp_path / "source", tmp_path / "read-only"
    source.mkdir()
    mounted.mkdir()
    with Store(source / "lab.sqlite") as store:
        store.create_run("r1", "kept", {})
    before = sha256(source / "lab.sqlite")
    if not _mount("--bind", str(source), str(mounted)):
        pytest.skip("cannot bind-mount here (needs root with CAP_SYS_ADMIN)")
    try:
        if not _mount("-o", "remount,bind,ro", str(mounted)):
            pytest.skip("cannot remount read-only here")
        for path in (mounted / "lab.sqlite", mounted / "new.sqlite"):
            with pytest.raises(StoreError, match="read-only file system"):
                Engine(path)
        code, _, err = run_main("runs", "--store", mounted / "lab.sqlite")
        assert code == 2 and "read-only file system" in err and err.count("\n") == 1
    finally:
        _unmount(mounted)
    assert sha256(source / "lab.sqlite") == before
    assert sorted(p.name for p in source.iterdir()) == ["lab.sqlite"]


# A plugin that raises inside the training step ------------------------------------------


@pytest.fixture
def wrong_shape_plugin(tmp_path: Path) -> Iterator[str]:
    """A plugin whose `update` returns a vector one entry short; its registry name."""
    name = f"wrong_shape_{uuid.uuid4().hex[:8]}"
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "wrong_shape.py").write_text(
        textwrap.dedent(
            f"""
            from core.optimizers import GlobalVectorOptimizer, register

            @register({name!r}, summary="Drops the last entry.", update_rule="x ← x[:-1]")
            class WrongShape(GlobalVectorOptimizer):
                def update(self, x, g):
                    return (x - self.learning_rate * g)[:-1]
            """
        )
    )
    assert str((folder / "wrong_shape.py").resolve()) not in optimizers.load_plugins(folder)
    assert optimizers.get_spec(name).source == str((folder / "wrong_shape.py").resolve())
    yield name
    from core.optimizers import plugin_folder  # no unregister: tidy up by hand

    plugin_folder._specs.pop(name, None)
    plugin_folder._classes.pop(name, None)
    sys.modules.pop("optlab_plugins.wrong_shape", None)


def test_a_plugin_that_raises_in_the_step_fails_its_run_and_others_complete(
    tmp_path: Path, wrong_shape_plugin: str
) -> None:
    """A run whose plugin optimizer returns a wrong-shaped vector ends `failed`, its error
    the exception and the innermost frames; a run beside it completes."""
    engine = Engine(tmp_path / "lab.sqlite", max_concurrent=2)
    try:
        bad = engine.start({**FAST, "optimizer": wrong_shape_plugin, "max_steps": 20})
        good = engine.start({**FAST, "max_steps": 40})
        failed = engine.wait(bad, scaled(120))
        assert failed.status == "failed"
        lines = failed.error.splitlines()
        assert re.match(r"^\w+Error: ", lines[0]), failed.error  # the exception, then
        assert "shape" in failed.error  # its message, then the innermost frames
        assert re.match(r"^  \S+\.py:\d+ in \w+$", lines[-1]), failed.error
        assert failed.step == 0 and len(engine.metrics(bad)) == 0
        assert engine.wait(good, scaled(120)).status == "completed"
        assert engine.metrics(good).last_step == 40
    finally:
        engine.close()


# Divergence -----------------------------------------------------------------------------


def test_a_diverging_run_ends_diverged_and_the_live_page_says_so(app_store: Path) -> None:
    """Momentum at η = 100, μ = 0.99 overflows within a few steps: the run ends `diverged`
    and the Live page shows the Diverged error with the step."""
    from ui import state

    engine = state.engine()
    run_id = engine.start(
        {
            **FAST,
            "optimizer": "momentum",
            "epochs": 50,
            "hyperparameters": {"learning_rate": 100.0, "momentum": 0.99},
        }
    )
    status = engine.wait(run_id, scaled(120))
    assert status.status == "diverged", status.error
    diverged_at = status.final_metrics["diverged_at"]
    assert diverged_at <= 20

    at = apptest.page(nav.LIVE)
    at.session_state["watch"] = [run_id]
    at.run()
    assert not at.exception
    errors = [e.value for e in at.error]
    assert any(
        text.startswith(f"Diverged: the loss was not finite at step {diverged_at}")
        for text in errors
    ), errors
    assert any("diverged" in md.value for md in at.markdown)
