"""The lab on a PostgreSQL store, as several machines share it (here: several processes on
one machine, against a real server): the CLI, the one engine that serves the store, the
dashboard, and sweeps whose Optuna study lives in the same database."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from core.engine.client import EngineClient
from core.store import Store
from core.store.owner import LIVENESS_SECONDS
from tests.apptest import (
    ROOT,
    SHORT,
    fill_sweep_form,
    finished_run,
    page,
    trials_shown_complete,
)
from tests.cli import run_main
from tests.conftest import app_serving, served
from tests.lean import NO_INSTRUMENTS_FLAGS
from tests.waiting import scaled, wait_for
from ui import nav

SHORT_RUN = [
    *("--max-steps", "20", "--log-every", "5", "--model", "mlp", "--batch-size", "32"),
    *NO_INSTRUMENTS_FLAGS,
]


def core(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`python -m core ARGS` in a process of its own, as on another machine."""
    return subprocess.run(
        [sys.executable, "-m", "core", *args],
        cwd=ROOT,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **env},
        capture_output=True,
        text=True,
        timeout=scaled(300),
    )


#: The host name of the processes `on_other_host` starts.
OTHER_HOST = "other-host"


@contextlib.contextmanager
def on_other_host(log: Path, *args: str) -> Iterator[subprocess.Popen[bytes]]:
    """`python -m core ARGS` as if on another machine, its output in `log`, killed (-9)
    at the end: in a UTS namespace of its own (`unshare -u`), whose host name is
    `OTHER_HOST`. Its /proc is this machine's, but the lab judges another host's
    processes by their heartbeats alone."""
    command = [sys.executable, "-m", "core", *args]
    named = ["unshare", "-u", "sh", "-c", f'hostname {OTHER_HOST} && exec "$@"', "sh", *command]
    with log.open("w") as output:
        process = subprocess.Popen(named, cwd=ROOT, stdout=output, stderr=subprocess.STDOUT)
        try:
            yield process
        finally:
            process.kill()
            process.wait(scaled(30))


@pytest.fixture
def other_host() -> None:
    """Skips the test where a process cannot have a host name of its own."""
    if shutil.which("unshare") is None:
        pytest.skip("no `unshare` (util-linux) to give a process a host name of its own")
    if subprocess.run(["unshare", "-u", "true"], capture_output=True).returncode != 0:
        pytest.skip("`unshare -u` is refused here (it needs root): no second host name")


def status_in_store(url: str, run_id: str) -> str:
    """The status the store holds, as the database has it, before any reader's view."""
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT status FROM runs WHERE id = %s", (run_id,)).fetchone()[0]


@pytest.fixture
def pg_lab(postgres, monkeypatch):
    """The app's engine client on a PostgreSQL store served in this process."""
    from ui import state

    with app_serving(postgres.create_schema(), monkeypatch):
        yield state.shared_engine()


@pytest.mark.slow
def test_train_runs_and_export_share_a_postgresql_store(postgres, tmp_path) -> None:
    """What one machine trains, another lists and exports: each command here is a process
    of its own, with the store named by `--store` or by `OPTLAB_STORE`."""
    url = postgres.create_schema()
    code, out, err = run_main("train", "--store", url, "--name", "shared", *SHORT_RUN)
    assert code == 0, err
    run_id = out.split("\n")[0]
    assert f"run {run_id} completed: 20/20 steps" in out

    listed = core("runs", "--json", OPTLAB_STORE=url)
    assert listed.returncode == 0, listed.stderr
    [run] = json.loads(listed.stdout)
    assert (run["id"], run["name"], run["status"]) == (run_id, "shared", "completed")
    assert run["step"] == 20

    csv = tmp_path / "run.csv"
    exported = core("export", run_id, "--csv", str(csv), "--store", url)
    assert exported.returncode == 0, exported.stderr
    assert len(csv.read_text().splitlines()) == 1 + 20 // 5  # a header, a row per log


def test_a_missing_postgresql_store_is_a_usage_error_without_its_password(postgres) -> None:
    url = f"postgresql://postgres:hunter2@127.0.0.1:{postgres.port}/nowhere"
    code, _, err = run_main("runs", "--store", url)
    assert code == 2
    assert 'database "nowhere" does not exist' in err
    assert "hunter2" not in err and "postgres:***@" in err


@pytest.mark.slow
def test_one_engine_serves_a_postgresql_store_from_any_machine(postgres, tmp_path) -> None:
    """The engine lock is in the database (a file beside the store's files on each machine
    only tells that machine which process holds it), so a second `serve` exits
    whichever machine it runs on; the runs handed over train, and `stop` from another
    process reaches them through the store."""
    url = postgres.create_schema()
    log = (tmp_path / "engine.log").open("w")
    first = subprocess.Popen(
        [sys.executable, "-m", "core", "serve", "--store", url],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        with Store(url) as store:
            client = EngineClient(store)
            wait_for(lambda: client.engine() is not None, timeout=60)
            second = core("serve", OPTLAB_STORE=url)
            assert second.returncode == 0 and "an engine already serves" in second.stderr
            run_id = client.start({**SHORT, "max_steps": None, "epochs": 10_000})
            wait_for(lambda: (store.read_metrics(run_id).last_step or 0) > 0, timeout=120)
            stopped = core("stop", run_id, "--store", url)
            assert stopped.returncode == 0, stopped.stderr
            assert client.wait(run_id, scaled(60)).status == "stopped"
    finally:
        first.send_signal(signal.SIGTERM)
        assert first.wait(scaled(60)) == 0
        log.close()


@pytest.mark.slow
def test_the_dashboard_lists_and_shows_runs_of_a_postgresql_store(pg_lab) -> None:
    run_id = finished_run(pg_lab, name="on postgres")
    at = page().run()
    assert not at.exception
    table = at.dataframe[0].value
    assert table["id"].tolist() == [run_id] and table["name"].tolist() == ["on postgres"]

    live = page(nav.LIVE)
    live.session_state["watch"] = [run_id]
    live.run()
    assert not live.exception and "completed" in live.markdown[0].value


@pytest.mark.slow
def test_a_sweep_keeps_its_study_in_the_postgresql_store(pg_lab) -> None:
    at = page(nav.SWEEP).run()
    fill_sweep_form(at, n_trials=2)
    at.button(key="sweep:start").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    wait_for(lambda: trials_shown_complete(at), 120, "the trials shown complete", 0.2)
    # Optuna's tables are in the lab's database, beside the runs of its trials.
    with psycopg.connect(pg_lab.store.location) as conn:
        (n_trials,) = conn.execute("SELECT count(*) FROM trials").fetchone()
        (n_runs,) = conn.execute("SELECT count(*) FROM runs").fetchone()
    assert n_trials == n_runs == 2


@pytest.mark.slow
def test_an_engine_that_dies_on_another_host_is_taken_over_here(
    postgres, other_host, tmp_path
) -> None:
    """The engine that serves the store runs on another host, with two runs training and
    one queued, and is killed (-9). Before, this host took it for alive forever: its runs
    stayed `running`, `stop` waited for an answer in vain, `delete` refused them, and the
    client kept handing it new runs. Once its heartbeat is `LIVENESS_SECONDS` old, its
    runs read as interrupted here, `stop` says they ended, `delete` deletes one, no run
    is handed to it, and an engine started here marks them so and trains its queue."""
    url = postgres.create_schema()
    serve = ("serve", "--store", url, "--max-concurrent", "2")
    with on_other_host(tmp_path / "other-host.log", *serve) as remote, Store(url) as store:
        client = EngineClient(store)
        wait_for(lambda: client.engine() is not None, 120, "the other host's engine")
        assert client.engine().owner.startswith(f"{OTHER_HOST}:")
        endless = {**SHORT, "max_steps": None, "epochs": 10_000}
        deleted, marked = client.start(endless), client.start(endless)
        queued = client.start(SHORT)
        wait_for(
            lambda: all(store.read_metrics(run).last_step for run in (deleted, marked)),
            180,
            "both runs training on the other host",
        )
        assert client.status(queued).status == "queued"
        remote.kill()
        remote.wait(scaled(30))
        wait_for(
            lambda: client.status(marked).status == "interrupted",
            LIVENESS_SECONDS + 30,
            "the dead engine's run read as interrupted",
        )
        assert client.status(deleted).status == "interrupted"
        assert client.engine() is None  # nor does a new run go to it
        code, _, err = run_main("stop", marked, "--store", url)
        assert code == 2 and "has ended" in err, err
        client.delete(deleted)
        assert store.get_run(deleted) is None
        assert status_in_store(url, marked) == "running"  # as its engine left it
        with served(url):  # an engine on this host
            assert client.wait(queued, scaled(120)).status == "completed"
        assert status_in_store(url, marked) == "interrupted"


@pytest.mark.slow
def test_a_cli_run_on_another_host_lives_by_its_heartbeat_and_stops_from_here(
    postgres, other_host, tmp_path
) -> None:
    """A CLI run on another host trains on as long as its process beats, longer than
    `LIVENESS_SECONDS`, running and steerable here all along; `stop` from here ends it."""
    url = postgres.create_schema()
    train = ("train", "--store", url, *SHORT_RUN, "--max-steps", "1000000", "--epochs", "10000")
    with on_other_host(tmp_path / "other-host.log", *train) as remote, Store(url) as store:
        client = EngineClient(store)
        wait_for(lambda: store.list_runs(), 120, "the other host's run")
        [run] = store.list_runs()
        assert run.owner.startswith(f"{OTHER_HOST}:")
        wait_for(lambda: store.read_metrics(run.id).last_step, 120, "its first steps")
        watched_until = time.monotonic() + LIVENESS_SECONDS + 2

        def alive_past_the_window() -> bool:  # all along, not only at the end
            status = client.status(run.id)
            assert (status.status, status.steerable) == ("running", True)
            return time.monotonic() >= watched_until

        wait_for(alive_past_the_window, LIVENESS_SECONDS + 60, "the window", interval=0.5)
        code, _, err = run_main("stop", run.id, "--store", url)
        assert code == 0, err
        assert remote.wait(scaled(60)) == 1  # the CLI reports the stop
        assert client.status(run.id).status == "stopped"
