"""A sweep's chosen objective: each one's direction, the values its trials take from their
runs (a regression's MAE through the engine process; the loss; the steps to a target),
and bad choices refused naming the field, with nothing written."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from core.engine import Engine, RunConfig
from core.engine.client import EngineClient
from core.knobs import InvalidInput
from core.optimizers import load_plugins
from core.store import Store
from core.sweep import Dimension, SearchSpace, Sweep, SweepPlan, list_studies
from core.sweep.objective import named
from tests.conftest import served
from tests.lean import digits_trial
from tests.waiting import scaled

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DIGITS = digits_trial(max_steps=44, epochs=2)  # validated at steps 11, 22, 33 and 44
RATES = SearchSpace((Dimension("learning_rate", 0.05, 0.5, log=True),))
FAST = {"poll_interval": 0.05, "sampler": "random", "seed": 1}


@pytest.fixture
def engine(tmp_path: Path):
    engine = Engine(Store(tmp_path / "lab.sqlite", flush_interval=0.05), max_concurrent=2)
    yield engine
    engine.close()


@pytest.fixture
def diabetes() -> RunConfig:
    load_plugins(PROJECT_ROOT / "plugins")  # the example regression
    return DIGITS.replace(dataset="diabetes", max_steps=20, epochs=10, val_every=5)


def plan(base: RunConfig, **choice: object) -> SweepPlan:
    return SweepPlan.create(
        base, RATES, n_trials=2, sampler="random", pruning=False, parallel=1, seed=1, **choice
    )


@pytest.mark.parametrize(
    ("regression", "choice", "metric", "direction"),
    [
        (False, {}, "val_accuracy", "maximize"),  # a classification's default
        (False, {"objective": "val_accuracy"}, "val_accuracy", "maximize"),
        (False, {"objective": "val_loss"}, "val_loss", "minimize"),
        (False, {"objective": "time_to_target", "target": 0.9}, "val_accuracy", "minimize"),
        (True, {}, "val_mae", "minimize"),  # a regression's default
        (True, {"objective": "val_loss"}, "val_loss", "minimize"),
        (True, {"objective": "time_to_target", "target": 50.0}, "val_mae", "minimize"),
    ],
)
def test_the_direction_follows_the_objective(
    diabetes: RunConfig, regression: bool, choice: dict, metric: str, direction: str
) -> None:
    chosen = plan(diabetes if regression else DIGITS, **choice)
    objective = chosen.objective
    assert (objective.metric, objective.direction) == (metric, direction)
    assert SweepPlan.from_dict(chosen.to_dict()).objective == objective  # kept in the study
    assert named(objective.to_dict()) == objective


def test_a_regression_sweep_through_the_engine_minimizes_the_validation_mae(
    tmp_path: Path, diabetes: RunConfig
) -> None:
    with served(tmp_path / "lab.sqlite") as engine:
        client = EngineClient(Store(tmp_path / "lab.sqlite"))
        sweep = Sweep(client, diabetes, RATES, n_trials=2, parallel=2, **FAST)
        sweep.submit()  # the default objective of a regression
        status = sweep.wait(scaled(120))
        assert status.state == "done" and status.finished == 2
        study = optuna.load_study(study_name=sweep.study_name, storage=sweep.storage)
        assert study.direction.name == "MINIMIZE"
        for trial in study.trials:
            run = engine.status(trial.user_attrs["run_id"])
            assert trial.value == run.final_metrics["best_val_mae"]
        assert status.best_value == min(t.value for t in study.trials)
        client.close()


def test_a_val_loss_sweep_minimizes_each_runs_lowest_validation_loss(engine: Engine) -> None:
    sweep = Sweep(engine, DIGITS, RATES, n_trials=2, objective="val_loss", **FAST)
    sweep.start()
    status = sweep.wait(scaled(120))
    assert status.state == "done"
    study = optuna.load_study(study_name=sweep.study_name, storage=sweep.storage)
    assert study.direction.name == "MINIMIZE"
    for row in sweep.results():
        losses = engine.metrics(row.run_id)["val_loss"]
        assert row.value == pytest.approx(float(losses[losses == losses].min()))
    assert status.best_value == min(row.value for row in sweep.results())


def test_time_to_target_is_the_first_step_a_run_reached_it(engine: Engine) -> None:
    """Digits reaches 0.2 accuracy within its first validations at these rates; none of
    its runs reaches 0.999 in 44 steps, which fails their trials, saying so."""
    reached = Sweep(engine, DIGITS, RATES, n_trials=2, objective="time_to_target", target=0.2)
    never = Sweep(engine, DIGITS, RATES, n_trials=1, objective="time_to_target", target=0.999)
    for sweep in (reached, never):
        sweep.start()
    assert reached.wait(scaled(120)).state == "done" and never.wait(scaled(120)).state == "done"
    for row in reached.results():
        metrics = engine.metrics(row.run_id)
        steps, accuracy = metrics.steps, metrics["val_accuracy"]
        first = int(steps[(accuracy >= 0.2).argmax()])
        assert row.state == "COMPLETE" and row.value == first
    [failed] = never.results()
    assert failed.state == "FAIL" and "never reached the target" in (failed.reason or "")
    assert "validation accuracy ≥ 0.999" in (failed.reason or "")


@pytest.mark.parametrize(
    ("choice", "field", "reason"),
    [
        ({"objective": "accuracy"}, "objective", "must be one of val_accuracy, val_loss"),
        ({"objective": "val_mae"}, "objective", "a classification logs val_accuracy"),
        ({"objective": "time_to_target"}, "target", "is required for time_to_target"),
        ({"objective": "time_to_target", "target": 1.5}, "target", "in (0, 1]"),
        ({"objective": "time_to_target", "target": "high"}, "target", "must be a number"),
        ({"objective": "val_loss", "target": 0.5}, "target", "applies to time_to_target only"),
        (
            {"objective": "time_to_target", "target": 0.9, "pruning": True},
            "pruning",
            "does not apply to time_to_target",
        ),
    ],
)
def test_a_bad_objective_or_target_is_named_and_nothing_is_written(
    engine: Engine, choice: dict, field: str, reason: str
) -> None:
    with pytest.raises(InvalidInput) as refused:
        Sweep(engine, DIGITS, RATES, n_trials=2, **choice)
    assert reason in refused.value.errors[field]
    assert list_studies(engine) == [] and engine.list() == []
