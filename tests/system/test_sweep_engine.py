"""Sweeps driven by the engine process (`python -m core serve`), started, stopped and resumed
through their study: a sweep runs on once the client that started it is gone and another
client stops it, an `optlab sweep` is seen and stopped from another client, an engine that
restarts (closed, or killed) resumes the sweep it drove, and a viewer steers none."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import optuna
import pytest

from core.engine import Engine
from core.engine.client import EngineClient
from core.engine.read_only import NotAllowed, ReadOnlyRuns
from core.store import Store
from core.sweep import Dimension, SearchSpace, Sweep, SweepPlan, control, list_studies
from core.sweep.control import COMMAND_ATTR, DRIVER_ATTR
from core.sweep.studies import PLAN_ATTR, storage_url
from tests import app_server
from tests.conftest import served
from tests.lean import NO_INSTRUMENTS_FLAGS, digits_trial
from tests.waiting import scaled, wait_for

ROOT = Path(__file__).resolve().parents[2]
LONG = digits_trial(max_steps=20_000, epochs=1000)  # trials that train until stopped
LR = SearchSpace((Dimension("learning_rate", 1e-3, 1.0, log=True),))


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "lab.sqlite"


@pytest.fixture
def client(store_path: Path) -> Iterator[EngineClient]:
    """A dashboard's client of the store (it launches no engine)."""
    opened = EngineClient(Store(store_path))
    yield opened
    opened.close()


def engine_process(store_path: Path, name: str) -> subprocess.Popen:
    return app_server.start_engine(store_path, store_path.with_name(f"{name}.log"))


def pid_of(process: str) -> int:
    """The pid in an owner's `host:pid:start`."""
    return int(process.split(":")[1])


def driver_pid(client: EngineClient, name: str) -> int:
    """The pid of the process the study names as its driver."""
    study = optuna.load_study(study_name=name, storage=storage_url(client))
    return pid_of(study.user_attrs[DRIVER_ATTR]["owner"])


def training(sweep: Sweep) -> list[str]:
    """The runs of the sweep's trials that have trained a step."""
    return [r.run_id for r in sweep.results() if r.state == "RUNNING" and r.step and r.run_id]


def test_a_sweep_runs_on_without_its_client_and_another_client_stops_it(
    store_path: Path, client: EngineClient
) -> None:
    engine = engine_process(store_path, "engine")
    try:
        first = EngineClient(Store(store_path))
        started = Sweep(first, LONG, LR, n_trials=3, sampler="random", parallel=1)
        started.submit()
        first.close()  # the dashboard that started it is gone

        sweep = Sweep.load(client, started.study_name)
        wait_for(lambda: training(sweep), 120, "a trial's run trains")
        [run_id] = training(sweep)
        record = client.store.get_run(run_id)
        assert record is not None and pid_of(record.owner or "") == engine.pid
        assert driver_pid(client, sweep.study_name) == engine.pid
        assert sweep.status().state == "running" and sweep.active

        sweep.stop()
        status = sweep.wait(scaled(60))
        assert status.state == "stopped" and not status.active
        assert status.to_run == 3 and status.resumable  # the trial cut short runs again
        assert client.status(run_id).status == "stopped"
    finally:
        engine.send_signal(signal.SIGTERM)
        assert engine.wait(scaled(60)) == 0


def test_an_engine_that_restarts_resumes_the_sweep_it_drove(
    store_path: Path, client: EngineClient
) -> None:
    engine = engine_process(store_path, "first")
    sweep = Sweep(client, LONG, LR, n_trials=2, sampler="random", parallel=1)
    try:
        sweep.submit()
        wait_for(lambda: training(sweep), 120, "the first trial's run trains")
        engine.send_signal(signal.SIGTERM)  # closed: it ends its drive as interrupted
        assert engine.wait(scaled(60)) == 0
        assert sweep.status().state == "interrupted"

        engine = engine_process(store_path, "second")
        wait_for(lambda: len(sweep.results()) == 2 and training(sweep), 120, "a retry trains")
        first, retry = sweep.results()
        assert retry.params == first.params and retry.run_id != first.run_id
        assert driver_pid(client, sweep.study_name) == engine.pid
        assert sweep.status().state == "running"

        engine.kill()  # killed: its record still says running, by a process now dead
        engine.wait(scaled(60))
        assert sweep.status().state == "interrupted"
        engine = engine_process(store_path, "third")
        wait_for(lambda: driver_pid(client, sweep.study_name) == engine.pid, 120, "taken up")
        wait_for(lambda: len(sweep.results()) == 3 and training(sweep), 120, "a retry trains")
        assert sweep.results()[2].params == first.params
        sweep.stop()
        assert sweep.wait(scaled(60)).state == "stopped"
    finally:
        engine.send_signal(signal.SIGTERM)
        engine.wait(scaled(60))


def test_an_optlab_sweep_is_seen_and_stopped_from_another_client(store_path: Path) -> None:
    command = [
        *(sys.executable, "-m", "core", "sweep", "--store", str(store_path), "--study", "cli"),
        *("--param", "learning_rate=0.01:1:log", "--sampler", "random", "--trials", "3"),
        *("--dataset", "digits", "--model", "mlp", "--optimizer", "sgd", "--val-every", "11"),
        *("--max-steps", "20000", "--epochs", "1000", *NO_INSTRUMENTS_FLAGS),
    ]
    cli = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for(store_path.exists, 120, "the CLI's store")
        client = EngineClient(Store(store_path))

        def listed() -> bool:
            if cli.poll() is not None:  # say why it ended, rather than wait on
                pytest.fail(f"optlab sweep exited {cli.returncode}: {cli.communicate()[1]!r}")
            # Optuna creates the study, then the sweep writes its plan: a study listed
            # without one is not loadable yet.
            return any(s.study_name == "cli" and s.sampler for s in list_studies(client))

        wait_for(listed, 240, "the CLI's study and plan (a loaded machine starts it slowly)")
        sweep = Sweep.load(client, "cli")
        wait_for(lambda: training(sweep), 120, "the CLI's first trial trains")
        assert sweep.status().state == "running"
        assert driver_pid(client, "cli") == cli.pid  # it drives the sweep itself

        sweep.stop()
        _, err = cli.communicate(timeout=scaled(60))
        assert cli.returncode == 130, err
        assert b"stopped from another process" in err
        status = sweep.status()
        assert status.state == "stopped" and status.resumable
        client.close()
    finally:
        if cli.poll() is None:
            cli.kill()


def test_a_viewer_can_neither_start_nor_stop_a_sweep(store_path: Path) -> None:
    """A viewer's `Runs` refuses a sweep's start and stop before the study is written."""
    engine = Engine(Store(store_path))
    try:
        viewer = ReadOnlyRuns(engine)
        with pytest.raises(NotAllowed, match="start, stop or resume a sweep"):
            Sweep(viewer, LONG, LR, n_trials=1, study_name="viewed").submit()
        assert list_studies(engine) == []

        Sweep(engine, LONG, LR, n_trials=1, study_name="viewed").submit()  # no host: it waits
        with pytest.raises(NotAllowed):
            Sweep.load(viewer, "viewed").stop()
        study = optuna.load_study(study_name="viewed", storage=storage_url(engine))
        assert study.user_attrs[COMMAND_ATTR]["kind"] == "run"
    finally:
        engine.close()


def test_a_sweep_the_engine_cannot_load_ends_failed_saying_why(store_path: Path) -> None:
    """A study whose stored plan is no longer valid is refused once, with the reason,
    rather than tried at every poll."""
    kept = SweepPlan.create(LONG, LR, n_trials=1, sampler="tpe", pruning=False, parallel=1, seed=0)
    plan = kept.to_dict()
    Store(store_path).close()  # the lab's store, where the study lives
    study = optuna.create_study(study_name="broken", storage=f"sqlite:///{store_path}")
    study.set_user_attr(PLAN_ATTR, {**plan, "n_trials": 0})
    control.write_command(study, "run")
    with served(store_path):
        wait_for(lambda: control.driver_of(study.user_attrs), 30, "the engine's answer")
    record = control.driver_of(study.user_attrs)
    assert record is not None and record.state == "failed"
    assert "n_trials: must be a whole number in [1, " in (record.error or "")
