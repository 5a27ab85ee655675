"""Runs belong to the process that trains them; only a dead owner's runs are interrupted."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

from core.engine import Engine, RunConfig, owner


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
    assert owner.alive("another-host:1:1")  # cannot be checked from here: left alone


def test_an_engine_leaves_a_live_process_runs_alone(tmp_path) -> None:
    store = tmp_path / "lab.sqlite"
    first = Engine(store)
    run_id = first.start(RunConfig(dataset="digits", model="mlp", optimizer="sgd", epochs=10_000))
    deadline = time.monotonic() + 60
    while first.status(run_id).step < 3:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    second = Engine(store)  # e.g. the CLI opening the dashboard's store
    try:
        assert second.interrupted_at_start == []
        assert second.status(run_id).status == "running"
    finally:
        first.close()
        second.close()
