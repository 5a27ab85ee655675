"""Runs belong to the process that trains them; only a dead owner's runs are interrupted."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from core.engine import Engine, RunConfig
from core.engine.commands import RUNS
from core.store import RunRecord, Store, owner
from core.store.paths import PROJECT_ROOT
from tests.lean import NO_INSTRUMENTS as LEAN
from tests.waiting import holds_for, met_within, scaled, wait_for


def test_this_process_is_alive_and_a_finished_one_is_not() -> None:
    assert owner.alive(owner.current())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    host = socket.gethostname()
    assert not owner.alive(f"{host}:{child.pid}:1")
    assert not owner.alive(None)
    # A recycled pid: this process's pid with another start time.
    pid = owner.current().split(":")[1]
    assert not owner.alive(f"{host}:{pid}:0")
    assert not owner.alive("another-host:1:1")  # not this host's: only its heartbeat tells


DEAD_HERE = f"{socket.gethostname()}:{2**22 + 7}:1"  # this host, a pid no process has


def test_a_process_lives_by_proc_here_and_by_its_heartbeat_elsewhere() -> None:
    """`Liveness` with the owners whose heartbeat is fresh: another host's process lives
    by it alone; this host's by /proc alone (a heartbeat does not revive a dead process,
    nor its absence kill a live one). A service row is trusted only if its own beat and
    the process agree (`test_commands.py`)."""
    alive = owner.Liveness(lambda: {"other-host:1:1", DEAD_HERE})
    assert alive("other-host:1:1") and not alive("other-host:2:2") and not alive(None)
    assert alive(owner.current()) and not alive(DEAD_HERE)


def test_the_heartbeats_are_read_once_and_only_for_another_hosts_owner() -> None:
    reads: list[int] = []

    def beating() -> set[str]:
        reads.append(1)
        return set()

    alive = owner.Liveness(beating)
    assert alive(owner.current()) and not alive(DEAD_HERE) and not alive(None)
    assert reads == []  # a lab on one host never reads them
    assert not alive("other-host:1:1") and not alive("other-host:2:2")
    assert reads == [1]


@pytest.mark.slow
def test_an_engine_beats_while_it_lives_and_takes_its_row_when_it_closes(postgres) -> None:
    """On a store machines share, the row by which another host knows that the engine (a
    CLI's, a sweep's) lives: it is there from the start, beats every `HEARTBEAT_SECONDS`,
    and goes at `close`."""
    location = postgres.create_schema()
    engine = Engine(location)
    try:
        [row] = engine.store.services(RUNS)
        assert row.owner == engine.owner
        wait_for(
            lambda: engine.store.services(RUNS)[0].heartbeat > row.heartbeat,
            timeout=10 * owner.HEARTBEAT_SECONDS,
            what="a second heartbeat",
        )
    finally:
        engine.close()
    with Store(location) as store:
        assert store.services(RUNS) == []


def test_an_engine_on_a_sqlite_file_writes_no_heartbeat(tmp_path) -> None:
    """A SQLite file's processes are this host's, looked up in /proc: a beat would only
    contend with the metrics' writes for the file's lock."""
    engine = Engine(tmp_path / "lab.sqlite")
    try:
        run_id = engine.start(RunConfig(dataset="digits", model="mlp", max_steps=3, **LEAN))
        engine.wait(run_id, scaled(60))
        assert engine.store.services(RUNS) == []
    finally:
        engine.close()


def test_an_engine_leaves_a_live_process_runs_alone(tmp_path) -> None:
    store = tmp_path / "lab.sqlite"
    first = Engine(store)
    run_id = first.start(RunConfig(dataset="digits", model="mlp", optimizer="sgd", epochs=10_000))
    wait_for(lambda: first.status(run_id).step >= 3, 60, "step 3")
    second = Engine(store)  # e.g. the CLI opening the dashboard's store
    try:
        assert second.interrupted_at_start == []
        assert second.status(run_id).status == "running"
    finally:
        first.close()
        second.close()


@pytest.mark.slow
def test_two_processes_train_on_one_store_and_a_frozen_one_is_waited_for(tmp_path) -> None:
    """A CLI and an engine train on one store at once; the CLI is frozen (SIGSTOP) for 5 s
    mid-run, perhaps holding the write lock: its run is still its own (running, never
    interrupted by another process), and both runs end completed with every step."""
    path = tmp_path / "lab.sqlite"
    flags = ["--dataset", "digits", "--model", "mlp", "--optimizer", "sgd", "--epochs", "100"]
    flags += ["--max-steps", "800", "--name", "cli"]
    cli = subprocess.Popen(
        [sys.executable, "-m", "core", "train", "--store", str(path), *flags],
        cwd=PROJECT_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    engine = Engine(path)
    try:
        ours = engine.start(
            RunConfig(dataset="digits", model="mlp", optimizer="sgd", epochs=100, max_steps=800)
        )

        def trained() -> list[RunRecord]:
            assert cli.poll() is None, "the CLI ended"
            return [r for r in engine.list() if r.name == "cli" and r.step >= 20]

        wait_for(trained, 120, "the CLI's run to train 20 steps")
        theirs = trained()[0].id
        os.kill(cli.pid, signal.SIGSTOP)
        try:
            holds_for(lambda: engine.status(theirs).status == "running", 5, "the frozen CLI's run")
            # A new engine (a restarted app's) ends nothing: the frozen run lives. It may
            # have been frozen inside a write, holding the lock: then the new engine waits
            # for it, so it starts in a thread and the CLI thaws while it waits.
            with ThreadPoolExecutor(1) as pool:
                other = pool.submit(Engine, path)
                met_within(other.done, 1)  # opened, or waiting for the frozen CLI's lock
                os.kill(cli.pid, signal.SIGCONT)
                assert other.result(timeout=scaled(60)).interrupted_at_start == []
                other.result().close()
        finally:
            os.kill(cli.pid, signal.SIGCONT)
        _, err = cli.communicate(timeout=scaled(180))
        assert cli.returncode == 0, err
        assert engine.wait(ours, scaled(180)).status == "completed"
        for run_id in (ours, theirs):
            assert engine.status(run_id).status == "completed"
            assert engine.metrics(run_id).steps.tolist() == list(range(1, 801))
    finally:
        if cli.poll() is None:
            cli.kill()
        engine.close()
