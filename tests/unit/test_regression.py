"""Regression, chosen by the dataset: the squared error trained, the absolute error
reported, a one-output head, what a regression cannot do (multi-task), and the objective
of its sweeps."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from core import models
from core.charts import RunView, training_figures
from core.data import files
from core.engine import RunConfig
from core.knobs import InvalidInput
from core.optimizers import load_plugins
from core.store import Metrics
from core.store.paths import PROJECT_ROOT
from core.sweep.plan import SweepPlan
from core.sweep.space import SearchSpace
from core.training.losses import Regression, SingleTask, task_of


@pytest.fixture(scope="module")
def examples() -> None:
    load_plugins(PROJECT_ROOT / "plugins")


def test_the_regression_task_trains_the_squared_error_and_sums_the_absolute_one() -> None:
    task = task_of(RunConfig.from_dict({"batch_size": 4}), "regression")
    assert isinstance(task, Regression)
    assert type(task_of(RunConfig.from_dict({}))) is SingleTask
    predictions = tf.constant([[1.0], [2.0], [-1.0], [0.5]])
    targets = tf.constant([1.5, 2.0, 1.0, 0.0])
    errors = np.array([1.0, 2.0, -1.0, 0.5]) - np.array([1.5, 2.0, 1.0, 0.0])
    losses = task.losses(predictions, targets)
    np.testing.assert_allclose(task.total(losses).numpy(), errors**2)
    sums = task.sums(predictions, targets, losses)
    assert float(sums["loss"]) == pytest.approx(np.sum(errors**2))
    assert float(sums["mae"]) == pytest.approx(np.sum(np.abs(errors)))
    assert float(sums["count"]) == 4 and task.means == ("mae",)
    assert task.compile_arguments()["metrics"] == ["mae"]


def test_a_regression_has_any_finite_targets_and_one_output() -> None:
    rng = np.random.default_rng(0)
    arrays = {
        "x_train": rng.normal(size=(20, 3)),
        "y_train": rng.normal(size=20) * 100,
        "x_test": rng.normal(size=(5, 3)),
        "y_test": rng.normal(size=5),
    }
    dataset = files.from_arrays("t", arrays, problem="regression")
    assert dataset.problem == "regression" and dataset.num_classes == 1
    assert dataset.y_train.dtype == np.float32
    with pytest.raises(files.BadDataFile, match="class labels"):
        files.from_arrays("t", arrays)  # the same numbers are no classes
    with pytest.raises(files.BadDataFile, match="y_test holds NaN"):
        files.from_arrays("t", {**arrays, "y_test": np.full(5, np.nan)}, problem="regression")
    model = models.build("mlp", input_shape=(3,), num_classes=1, seed=0)
    assert model.output.shape == (None, 1) and model.layers[-1].name == "prediction"
    with pytest.raises(ValueError, match="multitask: needs a classification"):
        models.build("mlp", input_shape=(3,), num_classes=1, seed=0, multitask=True)


@pytest.mark.slow  # loads the example plugins, each tried in a child process first
def test_multitask_refuses_a_regression_and_its_sweeps_minimize_the_mae(examples) -> None:
    with pytest.raises(InvalidInput) as refused:
        RunConfig.from_dict({"dataset": "diabetes", "model": "mlp", "multitask": True})
    assert "diabetes is a regression" in refused.value.errors["multitask"]
    space = SearchSpace.from_rows([{"name": "learning_rate", "low": 1e-4, "high": 1e-1}])
    objectives = {}
    for dataset in ("diabetes", "digits"):
        base = RunConfig.from_dict({"dataset": dataset, "model": "mlp"})
        plan = SweepPlan.create(
            base, space, n_trials=4, sampler="random", pruning=False, parallel=1, seed=0
        )
        assert SweepPlan.from_dict(plan.to_dict()).objective == plan.objective
        objectives[dataset] = (plan.objective.metric, plan.objective.direction)
    assert objectives == {
        "diabetes": ("val_mae", "minimize"),
        "digits": ("val_accuracy", "maximize"),
    }


def test_regressions_are_charted_by_their_absolute_error() -> None:
    steps = np.arange(1, 11)
    series = {"loss": np.linspace(2, 1, 10), "mae": np.linspace(1, 0.5, 10)}
    series["val_mae"] = np.where(steps % 5 == 0, 0.7, np.nan)
    figures = training_figures([RunView("r", "regression", Metrics(steps, series), [])])
    assert "mae" in figures and "accuracy" not in figures
    names = [trace.name for trace in figures["mae"].data if trace.yaxis != "y2"]
    assert names == ["regression · train", "regression · validation"]
