"""Population-based training on a real engine (`core.population`): four members on digits
exploit and explore at the intervals' ends only, as forks from the copied member's
checkpoint with the explored knobs as knob events at the fork's step; the others train on
untouched; a member stopped before an interval's end is replaced, never blocks the rest;
and `optlab pbt` prints it all."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.engine import Engine, RunConfig
from core.engine.api import Runs
from core.engine.client import EngineClient
from core.engine.status import RunStatus
from core.knobs import InvalidInput
from core.population import Population, PopulationPlan
from core.population.lineage import knob_schedule, lineage, read_population
from core.store import KNOB_EVENT, LAUNCH_EVENT, Store
from core.sweep import Dimension, SearchSpace
from tests.lean import NO_INSTRUMENTS, NO_INSTRUMENTS_FLAGS
from tests.waiting import scaled, wait_for

INTERVAL, GENERATIONS = 10, 3
BASE = RunConfig.from_dict(
    {"dataset": "digits", "model": "mlp", "optimizer": "sgd", "seed": 3, **NO_INSTRUMENTS}
)
LR = SearchSpace((Dimension("learning_rate", 0.01, 0.5, log=True),))


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    opened = Engine(tmp_path / "lab.sqlite", max_concurrent=4)
    yield opened
    opened.close()


def by_learning_rate(engine: Runs, run: RunStatus, step: int) -> float:
    """A fake objective with a known order: the higher the learning rate, the better."""
    return float(run.knobs["learning_rate"])


def test_members_exploit_and_explore_at_interval_ends_only(engine: Engine) -> None:
    plan = PopulationPlan.create(
        BASE, LR, population=4, interval=INTERVAL, generations=GENERATIONS, seed=11
    )
    population = Population(engine, plan, "pbt-test", scorer=by_learning_rate)
    population.start()
    first = list(population.members)
    engine.stop(first[3])  # before its first interval's end: it must be replaced
    assert population.wait(scaled(180)) == "completed", population.error

    assert [move.step for move in population.moves] == sorted(m.step for m in population.moves)
    assert {move.step for move in population.moves} == set(plan.boundaries)
    assert 3 in {move.member for move in population.moves if move.step == INTERVAL}
    rates = {run_id: engine.status(run_id).knobs["learning_rate"] for run_id in first}
    for move in population.moves:
        fork = engine.status(move.run)
        assert (fork.parent, fork.forked_at) == (move.source, move.step)
        (event,) = [
            e for e in engine.events(move.run, KNOB_EVENT) if e.payload["name"] == "learning_rate"
        ]
        assert event.step == move.step + 1  # the fork's first step, the first to use it
        assert event.payload["value"] == pytest.approx(move.knobs["learning_rate"], rel=1e-6)
        assert engine.status(move.replaced).status == "stopped"
        assert 0.01 <= move.knobs["learning_rate"] <= 0.5
        if move.step == INTERVAL:  # the best of the first members is copied
            source = max((r for i, r in enumerate(first) if i != 3), key=rates.__getitem__)
            assert move.source == source
    # Who never exploited trained as one run, untouched, to the end.
    kept = {m for m in range(4)} - {move.member for move in population.moves}
    assert kept
    for member in kept:
        run = engine.status(population.members[member])
        assert run.id == first[member] and run.parent is None
        assert (run.status, run.step) == ("completed", INTERVAL * GENERATIONS)
        assert run.knobs["learning_rate"] == rates[run.id]
        # Paused exactly at each interval's end, where the others met it.
        assert [e.step for e in engine.events(run.id, "paused")] == list(plan.boundaries)
    members = {run_id: m for m, run_id in enumerate(first)} | {
        move.run: move.member for move in population.moves
    }
    for run_id, member in members.items():
        assert engine.status(run_id).tags == ("population:pbt-test",)
        (launch,) = engine.events(run_id, LAUNCH_EVENT)
        assert launch.payload["population"] == "pbt-test"
        assert launch.payload["member"] == member
        assert launch.payload["plan"]["interval"] == INTERVAL
    read_back_as_driven(engine, population)


def read_back_as_driven(engine: Engine, population: Population) -> None:
    """What every session reads of the population (`core.population.lineage`) is what its
    driver did: the members' runs, the exploits, each lineage's knob schedule."""
    view = read_population(engine, population.name)
    assert view is not None and view.knobs == ["learning_rate"]
    assert {m: s.run.id for m, s in view.current.items()} == dict(enumerate(population.members))
    driven = [(m.step, m.member, m.source_member, m.source, m.run) for m in population.moves]
    assert [(e.step, e.member, e.source, e.source_run, e.run) for e in view.exploits] == sorted(
        driven
    )
    # Ranked by the objective (val_accuracy, maximized), the last validated values first.
    ranked = [s.last_value for s in view.ranking()]
    assert ranked == sorted(ranked, reverse=True) and None not in ranked
    assert view.best_over_time()[-1][1] == max(ranked)
    for move in population.moves:
        first, schedule = knob_schedule(engine, move.run)
        chain = lineage(engine, move.run)
        assert chain[0] == first and chain[-1].id == move.run and first.parent is None
        # The lineage's learning rate: the first run's, then each fork's explore at the
        # step after it was forked.
        assert schedule[-1]["step"] == move.step + 1
        assert schedule[-1]["knobs"]["learning_rate"] == pytest.approx(
            move.knobs["learning_rate"], rel=1e-6
        )
        assert [entry["step"] - 1 for entry in schedule] == [run.forked_at for run in chain[1:]]


def test_a_run_pauses_at_the_step_asked_for(engine: Engine) -> None:
    run_id = engine.start(BASE.replace(max_steps=40))
    with pytest.raises(InvalidInput, match="at_step"):
        engine.pause(run_id, at_step=-1)
    engine.pause(run_id, at_step=15)
    wait_for(lambda: engine.status(run_id).status == "paused", 60, "the run paused")
    assert engine.status(run_id).step == 15
    assert 15 in {checkpoint.step for checkpoint in engine.checkpoints(run_id)}
    engine.resume(run_id)
    assert engine.wait(run_id, timeout=scaled(60)).status == "completed"


def test_optlab_pbt_prints_the_members_the_moves_and_the_ranking(tmp_path: Path) -> None:
    command = [
        sys.executable, "-m", "core", "pbt", "--store", str(tmp_path / "lab.sqlite"),
        "--dataset", "digits", "--model", "mlp", "--optimizer", "sgd",
        "--param", "learning_rate=0.01:0.5:log", "--population", "4",
        "--interval", str(INTERVAL), "--generations", str(GENERATIONS),
        "--population-seed", "4", "--name", "cli-pbt", *NO_INSTRUMENTS_FLAGS,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=scaled(300))
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "population cli-pbt: 4 members × 3 intervals of 10 steps" in out
    assert out.count("  m") >= 8  # the members, then the ranking
    assert f"step {INTERVAL}: m" in out and "copies m" in out
    assert "val_accuracy at the end, best first:" in out
    replay_the_best_schedule(tmp_path / "lab.sqlite")


def replay_the_best_schedule(store_path: Path) -> None:
    """`optlab train --schedule-from RUN` trains the best member's lineage from scratch:
    the first run's config, the knob changes at the lineage's steps, as many steps."""
    with Store(store_path) as store:
        reader = EngineClient(store)
        view = read_population(reader, "cli-pbt")
        assert view is not None and view.exploits
        # The best member whose lineage exploited: its schedule is not empty.
        forked = next(s for s in view.ranking() if s.run.parent is not None)
        first, schedule = knob_schedule(reader, forked.run.id)
        assert schedule
    command = [
        sys.executable, "-m", "core", "train", "--store", str(store_path),
        "--schedule-from", forked.run.id, "--name", "replayed",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=scaled(300))
    assert done.returncode == 0, done.stdout + done.stderr
    with Store(store_path) as store:
        reader = EngineClient(store)
        replay = next(run for run in reader.list() if run.name == "replayed")
        assert replay.status == "completed" and replay.step == INTERVAL * GENERATIONS
        assert replay.parent is None and replay.tags == ()
        assert replay.config["knob_schedule"] == schedule
        assert replay.config["seed"] == first.config["seed"]
        assert replay.config["hyperparameters"] == first.config["hyperparameters"]
        made = [
            (e.step, e.payload["name"], e.payload["value"])
            for e in reader.events(replay.id, KNOB_EVENT)
        ]
        planned = [(e["step"], k, v) for e in schedule for k, v in e["knobs"].items()]
        assert [(step, name) for step, name, _ in made] == [(s, n) for s, n, _ in planned]
        assert [v for *_, v in made] == pytest.approx([v for *_, v in planned], rel=1e-6)
        assert replay.knobs["learning_rate"] == pytest.approx(
            forked.run.knobs["learning_rate"], rel=1e-6
        )
    bad = subprocess.run(
        [*command[:7], "missing-run"], capture_output=True, text=True, timeout=scaled(120)
    )
    assert bad.returncode == 2 and "no run missing-run" in bad.stderr


def test_a_bad_population_writes_nothing(tmp_path: Path) -> None:
    store = tmp_path / "lab.sqlite"
    command = [
        sys.executable, "-m", "core", "pbt", "--store", str(store), "--dataset", "digits",
        "--param", "learning_rate=0.01:0.5:log", "--population", "1",
        "--interval", "0", "--generations", "3",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=scaled(120))
    assert done.returncode == 2
    assert "population" in done.stderr and "interval" in done.stderr
    assert not store.exists()
    unreachable = [
        *command[:11],
        "4",
        "--interval",
        "5",
        *command[-2:],
        "--ray-address",
        "127.0.0.1:1",
    ]
    done = subprocess.run(unreachable, capture_output=True, text=True, timeout=scaled(120))
    assert done.returncode == 2 and "ray_address" in done.stderr, done.stderr
    assert not store.exists()


@pytest.mark.skipif(
    signal.getsignal(signal.SIGINT) is signal.SIG_IGN,
    reason="SIGINT is ignored here (a background job), so the child would ignore it too",
)
def test_ctrl_c_stops_the_population_and_its_runs(tmp_path: Path) -> None:
    store_path = tmp_path / "lab.sqlite"
    command = [
        sys.executable, "-m", "core", "pbt", "--store", str(store_path),
        "--dataset", "digits", "--model", "mlp", "--optimizer", "sgd",
        "--param", "learning_rate=0.01:0.5:log", "--population", "2",
        "--interval", "5000", "--generations", "4", *NO_INSTRUMENTS_FLAGS,
    ]  # fmt: skip
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        lines = [child.stdout.readline() for _ in range(3)]  # the header, then each member
        assert lines[2].startswith("  m1: run "), lines
        with Store(store_path) as store:
            wait_for(lambda: all(r.step > 0 for r in store.list_runs()), 60, "both members train")
        child.send_signal(signal.SIGINT)
        out, _ = child.communicate(timeout=scaled(60))
    finally:
        child.kill()
    assert child.returncode == 130, out
    with Store(store_path) as store:
        runs = store.list_runs()
    assert len(runs) == 2 and {r.status for r in runs} == {"stopped"}
