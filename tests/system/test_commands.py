"""Runs steered through the store: commands, services, the engine process and its client.

The store's side (schema version 2: commands, services, tags; the upgrade of a version-1
file), the engine's command listener, the dashboard's `EngineClient`, the engine process
(`python -m core serve`: one per store, found again, gone when idle) and a CLI run
steered from another process.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from core.engine import Engine, RunConfig
from core.engine.client import (
    DASHBOARD,
    ENGINE,
    INFO_SECONDS,
    MAX_TAGS,
    EngineClient,
    EngineUnavailable,
)
from core.engine.commands import RUNS
from core.engine.server import IDLE_GRACE_SECONDS, EngineService, lock_path, serve
from core.knobs import InvalidHyperparameters
from core.optimizers import optimizer_catalog
from core.store import SCHEMA_VERSION, Store, UnknownRunError, owner
from core.store.owner import HEARTBEAT_SECONDS, LIVENESS_SECONDS
from core.store.schema import DDL
from core.training import threads
from tests import app_server, planted
from tests.lean import NO_INSTRUMENTS
from tests.waiting import holds_for, scaled, wait_for, wait_for_moment

ROOT = Path(__file__).resolve().parents[2]
LONG = {
    "dataset": "digits",
    "model": "mlp",
    "optimizer": "sgd",
    "epochs": 10_000,
    "log_every": 1,
    "hyperparameters": {"learning_rate": 0.05, "radius": 20.0},
    **NO_INSTRUMENTS,
}


@pytest.fixture
def served(tmp_path):
    """An engine serving a temporary store in this process, and a client of that store."""
    path = tmp_path / "lab.sqlite"
    engine = Engine(path, max_concurrent=3)
    service = EngineService(engine, warm_up=False)
    client = EngineClient(Store(path))
    yield engine, client
    client.close()
    service.close()
    engine.close()


# The store ---------------------------------------------------------------------------------


def test_a_version_1_store_is_upgraded_in_place_with_its_runs(tmp_path) -> None:
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path, isolation_level=None)
    for statement in DDL:
        conn.execute(statement)
    conn.execute(
        "INSERT INTO runs (id, name, status, config, created, updated) "
        "VALUES ('r1', 'old run', 'completed', '{}', 1, 1)"
    )
    conn.close()
    with Store(path) as store:
        (record,) = store.list_runs()
        assert (record.id, record.tags, record.speed) == ("r1", (), None)
        assert (record.parent, record.forked_at) == (None, None)
        store.set_tags("r1", ["kept"])
        store.add_command("r1", "stop")
        store.register_service("me:1:1", ENGINE, {})
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 6
    columns = [row[1] for row in conn.execute("PRAGMA table_info(runs)")]
    assert "epoch" not in columns and "node" in columns  # dropped (never written); added
    conn.close()


def test_commands_wait_for_their_runs_owner_and_say_how_they_ended(tmp_path) -> None:
    with Store(tmp_path / "lab.sqlite") as store:
        store.create_run("mine", "a", {}, owner="me:1:1", command="start")
        store.create_run("theirs", "b", {}, owner="them:2:2")
        stop = store.add_command("theirs", "stop")
        knobs = store.add_command("mine", "set", {"knobs": {"radius": 5.0}})
        assert [c.kind for c in store.pending_commands("me:1:1")] == ["start", "set"]
        assert [c.id for c in store.pending_commands("them:2:2")] == [stop.id]
        store.mark_handled(knobs.id, "radius: must be positive")
        handled = store.get_command(knobs.id)
        assert handled.handled is not None and handled.error == "radius: must be positive"
        assert [c.kind for c in store.pending_commands("me:1:1")] == ["start"]
        with pytest.raises(UnknownRunError):
            store.add_command("nobody", "stop")
        with pytest.raises(ValueError, match="command must be one of"):
            store.add_command("mine", "explode")
        store.delete_run("mine")  # its commands go with it
        assert store.pending_commands("me:1:1") == []


def test_services_by_role_and_tags_without_repeats(tmp_path) -> None:
    with Store(tmp_path / "lab.sqlite") as store:
        store.register_service("p:1:1", ENGINE, {"ready": False})
        store.register_service("p:1:1", DASHBOARD, {})  # one process, two roles
        store.heartbeat("p:1:1", ENGINE, {"ready": True})
        (engine,) = store.services(ENGINE)
        assert engine.info == {"ready": True} and len(store.services()) == 2
        store.remove_service("p:1:1", ENGINE)
        assert [s.role for s in store.services()] == [DASHBOARD]
        store.create_run("r", "n", {})
        store.set_tags("r", ["b", "a", "b"])
        assert store.get_run("r").tags == ("b", "a")


def test_a_service_row_takes_runs_only_while_it_beats(tmp_path) -> None:
    """Rows written by hand, each the newest engine: one of another host, silent (before,
    any other host's row counted as alive, and took every new run); one beating from the
    future; one of a live process of this host (pid 1), silent; one of another host's
    process that beats as a CLI run does (its `runs` row), silent as an engine. The
    client hands its run to the engine that beats, and forgets the others."""
    with Store(tmp_path / "lab.sqlite") as store:
        store.register_service(owner.current(), ENGINE, {})
        now = time.time()
        init = Path("/proc/1/stat").read_text().rsplit(")", 1)[1].split()[19]
        silent = now - LIVENESS_SECONDS - 1
        planted_rows = {
            "other-host:1:1": silent,
            "other-host:2:2": now + 2 * LIVENESS_SECONDS,
            f"{os.uname().nodename}:1:{init}": silent,
            "other-host:3:3": silent,
        }
        for holder, heartbeat in planted_rows.items():
            planted.service(store.location, holder, ENGINE, started=now + 60, heartbeat=heartbeat)
        planted.service(store.location, "other-host:3:3", RUNS, started=now, heartbeat=now)
        client = EngineClient(store)
        run_id = client.start({**LONG, "max_steps": 1})
        assert store.get_run(run_id).owner == owner.current()
        assert [service.owner for service in store.services(ENGINE)] == [owner.current()]


def test_only_the_serving_engine_takes_runs_from_the_store(tmp_path) -> None:
    """A run handed through the store to an engine that does not serve it (a CLI's, a
    sweep's), as a row written by hand would hand it, is refused: it trains nothing."""
    engine = Engine(tmp_path / "lab.sqlite")
    try:
        engine.store.create_run("handed", "handed", {**LONG, "max_steps": 1}, owner=engine.owner)
        command = engine.store.add_command("handed", "start")
        wait_for(
            lambda: engine.store.get_command(command.id).handled is not None,
            timeout=30,
            what="the engine to answer",
        )
        assert "serves no store" in engine.store.get_command(command.id).error
        assert engine.store.get_run("handed").status == "queued"
    finally:
        engine.close()


def test_a_dashboard_beats_until_its_client_closes(tmp_path) -> None:
    """By its heartbeat another host knows that the dashboard, and the sweeps it drives,
    live (see `core.store.owner`)."""
    client = EngineClient(Store(tmp_path / "lab.sqlite"))
    client.register_dashboard()
    [row] = client.store.services(DASHBOARD)
    wait_for(
        lambda: client.store.services(DASHBOARD)[0].heartbeat > row.heartbeat,
        timeout=10 * HEARTBEAT_SECONDS,
        what="a second heartbeat",
    )
    client.close()


def test_a_zombie_owner_is_dead(tmp_path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    wait_for(
        lambda: Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z",
        10,
        "the child to exit, uncollected",
        interval=0.01,
    )
    stat = Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()
    zombie = f"{os.uname().nodename}:{child.pid}:{stat[19]}"
    assert not owner.alive(zombie)  # exited, not collected yet: it takes no commands
    child.wait()


# The client and the engine's listener -------------------------------------------------------


def test_a_run_started_by_the_client_trains_in_the_engine_and_obeys_commands(served) -> None:
    _engine, client = served
    run_id = client.start(LONG)
    assert client.status(run_id).steerable
    wait_for(lambda: client.status(run_id).step >= 5, what="the run trained 5 steps")
    assert client.settle(client.update(run_id, radius=5.0)).error is None
    wait_for(lambda: client.status(run_id).knobs["radius"] == 5.0, what="the change showed")
    (change,) = [e.payload for e in client.events(run_id) if e.kind == "knob"]
    assert change == {"name": "radius", "value": 5.0, "previous": 20.0}
    assert client.settle(client.pause(run_id)).error is None
    wait_for(lambda: client.status(run_id).status == "paused", what="the run paused")
    client.settle(client.resume(run_id))
    wait_for(lambda: client.status(run_id).status == "running", what="the run resumed")
    # The listener publishes the speed of running runs every few rounds: on a busy machine
    # none may have fallen between the first steps and the pause.
    wait_for(lambda: client.status(run_id).steps_per_second, what="the speed published")
    client.settle(client.stop(run_id))
    assert client.wait(run_id, scaled(30)).status == "stopped"
    with pytest.raises(InvalidHyperparameters, match="has ended"):
        client.pause(run_id)


def test_bad_changes_are_refused_before_anything_is_written(served) -> None:
    engine, client = served
    run_id = client.start(LONG)
    wait_for(lambda: not client.store.pending_commands(engine.owner), what="the start taken")
    with pytest.raises(InvalidHyperparameters) as refused:
        client.update(run_id, learning_rate=0.0, clip_norm=1.0, nope=1.0)
    assert set(refused.value.errors) == {"learning_rate", "clip_norm", "nope"}
    assert "was off when training started" in refused.value.errors["clip_norm"]
    assert client.store.pending_commands(engine.owner) == []
    with pytest.raises(UnknownRunError):
        client.stop("no-such-run")
    with pytest.raises(InvalidHyperparameters, match="optimizer"):
        client.start({**LONG, "optimizer": "nope"})
    # A command written by hand that the engine refuses says why.
    command = client.store.add_command(run_id, "set", {"knobs": {"radius": -1.0}})
    assert "radius" in client.settle(command).error
    client.settle(client.stop(run_id))


def test_tags_and_deleting_an_ended_run(served) -> None:
    _engine, client = served
    run_id = client.start({**LONG, "epochs": 1, "max_steps": 3})
    with pytest.raises(InvalidHyperparameters, match="stop it"):
        client.delete(client.start(LONG))  # still training
    client.set_tags(run_id, ["baseline", " lr sweep ", ""])
    assert client.status(run_id).tags == ("baseline", "lr sweep")
    with pytest.raises(InvalidHyperparameters, match="tags"):
        client.set_tags(run_id, ["x" * 41])
    client.set_tags(run_id, [f"t{i}" for i in range(MAX_TAGS)] * 2)  # repeats count once
    with pytest.raises(InvalidHyperparameters, match="at most 20 tags"):
        client.set_tags(run_id, [f"t{i}" for i in range(MAX_TAGS + 1)])
    assert len(client.status(run_id).tags) == MAX_TAGS
    client.wait(run_id, scaled(60))
    client.delete(run_id)
    assert run_id not in {r.id for r in client.list()}
    for run in client.list():
        client.settle(client.stop(run.id))


def test_what_the_engine_published_is_read_at_most_once_a_second(served, monkeypatch) -> None:
    """A page asks for the plugins many times per script run: one read serves them."""
    _engine, client = served
    reads = []
    services = client.store.services
    monkeypatch.setattr(
        client.store, "services", lambda *a, **k: reads.append(a) or services(*a, **k)
    )
    wait_for_moment(time.monotonic() + INFO_SECONDS)  # what an earlier call read has aged
    for _ in range(5):
        client.plugins(), client.plugin_models(), client.plugin_datasets()
    assert len(reads) == 1
    wait_for_moment(time.monotonic() + INFO_SECONDS)
    client.plugin_models()
    assert len(reads) == 2


def test_without_an_engine_the_client_says_how_to_start_one(tmp_path) -> None:
    client = EngineClient(Store(tmp_path / "lab.sqlite"))
    with pytest.raises(EngineUnavailable, match="python -m core serve"):
        client.start(LONG)
    assert client.list() == []  # nothing was written
    client.close()


def test_plugins_are_published_for_a_process_that_never_imports_them(served) -> None:
    _engine, client = served
    specs, errors = client.plugins()
    (published,) = [s for s in specs if s.name == "scaled_sign_gd"]
    assert errors == {}
    assert published.knobs == optimizer_catalog.get_spec("scaled_sign_gd").knobs
    optimizer_catalog.use_plugin_source(lambda: ([published], {"bad.py": "SyntaxError"}))
    try:
        assert optimizer_catalog.get_spec("scaled_sign_gd") is published
        assert optimizer_catalog.plugin_errors() == {"bad.py": "SyntaxError"}
    finally:
        optimizer_catalog.use_plugin_source(None)


# The engine process ---------------------------------------------------------------------------


def test_one_engine_serves_a_store_and_a_second_exits_at_once(tmp_path) -> None:
    path = tmp_path / "lab.sqlite"
    first = app_server.start_engine(path, tmp_path / "first.log")
    try:
        started = time.monotonic()
        second = subprocess.run(
            [sys.executable, "-m", "core", "serve", "--store", str(path)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=scaled(60),
        )
        assert second.returncode == 0 and time.monotonic() - started < scaled(10)
        assert "an engine already serves" in second.stderr
        holder = lock_path(path.resolve()).read_text().strip()
        assert holder.split(":")[1] == str(first.pid)
        client = EngineClient(Store(path))
        run_id = client.start({**LONG, "epochs": 1, "max_steps": 5})
        assert client.wait(run_id, scaled(120)).status == "completed"
        client.close()
        # Its 3 runs at once fill this machine's cores (CI's 2): one thread an op.
        user_set = threads.INTRA_OP in os.environ or threads.INTER_OP in os.environ
        pools = {} if user_set else threads.pool_sizes(3, threads.available_cores())
        said = f"training threads: {pools}" in (tmp_path / "first.log").read_text()
        assert said == bool(pools)
    finally:
        first.send_signal(signal.SIGTERM)
        assert first.wait(scaled(30)) == 0
    with Store(path) as store:
        assert store.services(ENGINE) == []  # it took its row with it


def test_a_launched_engine_leaves_once_idle_with_no_dashboard(tmp_path, monkeypatch) -> None:
    """`serve(exit_when_idle=True)` keeps serving while a dashboard process lives or a run
    trains, and leaves after the grace period once neither is true."""
    from core.engine import server

    monkeypatch.setattr(server, "IDLE_GRACE_SECONDS", 0.5)
    path = tmp_path / "lab.sqlite"
    dashboard = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    stat = Path(f"/proc/{dashboard.pid}/stat").read_text().rsplit(")", 1)[1].split()
    with Store(path) as store:
        store.register_service(f"{os.uname().nodename}:{dashboard.pid}:{stat[19]}", DASHBOARD, {})
    done = threading.Event()
    thread = threading.Thread(
        target=lambda: (serve(path, max_concurrent=1, exit_when_idle=True), done.set())
    )
    thread.start()
    holds_for(lambda: not done.is_set(), 3, "staying while a dashboard lives")
    dashboard.kill()
    dashboard.wait()
    assert done.wait(scaled(15)), "it did not leave once idle"
    thread.join()
    assert IDLE_GRACE_SECONDS >= 30  # the real grace outlasts a restart of Streamlit


def test_a_cli_run_is_steered_from_another_process(tmp_path) -> None:
    """The dashboard's controls work on a run the CLI trains: a knob change and a stop
    written to the store reach it; the CLI reports the stop and exits 1."""
    path = tmp_path / "lab.sqlite"
    cli = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "core",
            "train",
            "--store",
            str(path),
            "--config",
            str(_config_file(tmp_path, LONG)),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    run_id = cli.stdout.readline().strip()
    client = EngineClient(Store(path))
    wait_for(lambda: client.status(run_id).step >= 5, 60, "the CLI run trained 5 steps")
    assert client.status(run_id).steerable
    assert client.settle(client.update(run_id, learning_rate=0.01)).error is None
    wait_for(lambda: client.status(run_id).knobs["learning_rate"] == 0.01, what="the change")
    client.settle(client.stop(run_id))
    out, _err = cli.communicate(timeout=scaled(60))
    assert cli.returncode == 1 and f"run {run_id} stopped" in out
    assert client.status(run_id).status == "stopped"
    client.close()


def _config_file(folder: Path, config: dict) -> Path:
    path = folder / "config.json"
    path.write_text(json.dumps(RunConfig.from_dict(config).to_dict()))
    return path
