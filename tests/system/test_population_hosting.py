"""A population handed to the serving engine (`core.population.hosting`): the engine takes
it up and drives it; when the engine closes mid-population and another starts on the
store, the population is taken up again from the store alone and ends as one would have
that nobody interrupted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from core.engine import RunConfig
from core.engine.client import EngineClient
from core.population import PopulationPlan
from core.population.lineage import PopulationView, read_population
from core.store import Store
from core.sweep import Dimension, SearchSpace
from tests.conftest import served
from tests.lean import NO_INSTRUMENTS, NO_INSTRUMENTS_FLAGS
from tests.waiting import scaled, wait_for

# Intervals long enough (several seconds with four members on 2 cores) for the engine to
# close while the members train toward the second interval's end.
INTERVAL, GENERATIONS = 100, 3
BASE = RunConfig.from_dict(
    {"dataset": "digits", "model": "mlp", "optimizer": "sgd", "seed": 3, **NO_INSTRUMENTS}
)
LR = SearchSpace((Dimension("learning_rate", 0.01, 0.5, log=True),))


PBT = [
    sys.executable, "-m", "core", "pbt", "--name", "hosted", "--dataset", "digits",
    "--model", "mlp", "--optimizer", "sgd", "--seed", "3", "--population-seed", "5",
    "--param", "learning_rate=0.01:0.5:log", "--population", "4",
    "--interval", str(INTERVAL), "--generations", str(GENERATIONS), *NO_INSTRUMENTS_FLAGS,
]  # fmt: skip


def detach(store: Path) -> subprocess.CompletedProcess[str]:
    """`optlab pbt --detach` on `store`, in a process of its own, as from a terminal."""
    command = [*PBT, "--store", str(store), "--detach"]
    return subprocess.run(command, capture_output=True, text=True, timeout=scaled(120))


def population(reader: object) -> PopulationView:
    view = read_population(reader, "hosted")  # type: ignore[arg-type]
    assert view is not None
    return view


def test_a_population_handed_to_the_engine_outlives_the_engines_restart(tmp_path: Path) -> None:
    path = tmp_path / "lab.sqlite"
    plan = PopulationPlan.create(
        BASE, LR, population=4, interval=INTERVAL, generations=GENERATIONS, seed=5
    )
    with served(path, max_concurrent=4), Store(path) as store:
        client = EngineClient(store)  # as a dashboard reads it
        # Handed over from another process, which returns at once: the engine drives it.
        done = detach(path)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "population hosted: handed to the serving engine" in done.stdout
        wait_for(
            lambda: [e.step for e in population(client).exploits] == [INTERVAL],
            120,
            "the engine's exploit at the first interval's end",
        )
    with Store(path) as store:
        before = population(EngineClient(store))
    statuses = {stretch.run.status for stretch in before.current.values()}
    assert statuses == {"interrupted"}, statuses  # the engine's end cut them short
    first_exploit = before.exploits

    with served(path, max_concurrent=4) as engine:
        wait_for(
            lambda: {s.run.status for s in population(engine).current.values()} == {"completed"},
            180,
            "the population taken up again and completed",
        )
        after = population(engine)
    # The exploit made before the restart stays the only one of its interval's end; the
    # next interval's end, met after it, has its own: one each (a quarter of 4 members).
    assert after.exploits[: len(first_exploit)] == first_exploit
    assert [e.step for e in after.exploits] == list(plan.boundaries)
    for stretch in after.current.values():
        assert stretch.end == plan.steps
        assert set(stretch.values) >= {plan.steps}  # validated at its last step
    # The members that were interrupted went on as the same runs, from their checkpoints.
    resumed = {s.run.id for s in before.current.values()} & {
        s.run.id for s in after.current.values()
    }
    assert resumed


def test_a_population_is_handed_only_to_an_engine_that_trains_it_whole(tmp_path: Path) -> None:
    path = tmp_path / "lab.sqlite"
    Store(path).close()
    unserved = detach(path)
    assert unserved.returncode == 2 and "no engine serves" in unserved.stderr
    with served(path, max_concurrent=3), Store(path) as store:
        small = detach(path)
        assert small.returncode == 2, small.stdout + small.stderr
        assert "population" in small.stderr and "trains 3" in small.stderr
        assert store.list_runs() == []
