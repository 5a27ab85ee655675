"""The learning-rate range test's schedule, its end, its suggestion and its configs."""

from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf

from core import optimizers
from core.engine import RunConfig, lr_find
from core.knobs import InvalidInput
from core.optimizers.schedules import RANGE_TEST, LiveSchedule


def range_test_on_quadratic(curvature: float, optimizer: str = "sgd") -> lr_find.RangeTest:
    """The range test of gradient descent on L(x) = λ/2 ‖x‖², x₀ = 1, with the lab's
    optimizer and schedule, ended as a run ends it."""
    schedule = LiveSchedule(lr_find.END, RANGE_TEST, 0, lr_find.STEPS, start_rate=lr_find.START)
    opt = optimizers.build(optimizer, learning_rate=schedule)
    x = tf.Variable(tf.ones(10))
    explosion = lr_find.Explosion()
    rates, losses = [], []
    for _ in range(lr_find.STEPS):
        with tf.GradientTape() as tape:
            loss = 0.5 * curvature * tf.reduce_sum(x * x)
        opt.apply_gradients([(tape.gradient(loss, x), x)])
        rates.append(float(opt.applied_learning_rate()))
        losses.append(float(loss))
        if explosion.ended(float(loss)):
            break
    return lr_find.RangeTest.from_curve(rates, losses)


@pytest.mark.parametrize("curvature", [0.5, 4.0, 50.0, 3000.0])
def test_on_a_quadratic_it_suggests_one_over_the_curvature(curvature: float) -> None:
    test = range_test_on_quadratic(curvature)
    assert test.suggestion is not None
    assert 0.5 / curvature <= test.suggestion <= 2 / curvature, test.suggestion * curvature


def test_the_rate_grows_exponentially_from_start_to_end() -> None:
    schedule = LiveSchedule(10.0, RANGE_TEST, 0, 201, start_rate=1e-6)
    rates = np.array([float(schedule(i)) for i in range(201)])
    assert rates[0] == pytest.approx(1e-6, rel=1e-5)
    assert rates[-1] == pytest.approx(10.0, rel=1e-5)
    # seven decades in 200 steps: each step multiplies the rate by 10^(7/200)
    assert np.allclose(rates[1:] / rates[:-1], 10 ** (7 / 200), rtol=1e-4)


def test_the_test_stops_once_the_loss_explodes_or_stops_being_finite() -> None:
    test = range_test_on_quadratic(4.0)
    assert len(test.rates) < lr_find.STEPS  # ended well before the rate reached 10
    assert test.losses[-1] > lr_find.EXPLODES_AT * test.losses.min()
    explosion = lr_find.Explosion()
    assert [explosion.ended(v) for v in (2.0, 2.1, 1.9)] == [None, None, None]
    assert explosion.ended(math.nan) == "the loss is nan"
    noisy = lr_find.Explosion()
    # One huge loss among the first ones is noise, not an explosion.
    assert noisy.ended(1.0) is None and noisy.ended(100.0) is None


def test_a_curve_that_never_falls_or_is_too_short_suggests_nothing() -> None:
    rates = np.geomspace(1e-7, 10, 200)
    assert lr_find.RangeTest.from_curve(rates, np.linspace(1, 5, 200)).suggestion is None
    assert lr_find.RangeTest.from_curve(rates[:4], [3.0, 2.0, 1.0, 0.5]).suggestion is None
    empty = lr_find.RangeTest.from_curve([], [])
    assert empty.suggestion is None and len(empty.smoothed) == 0


def test_the_smoothing_is_centered_and_keeps_the_ends() -> None:
    values = np.array([0.0, 0.0, 3.0, 0.0, 0.0, 6.0])
    smoothed = lr_find.centered_average(values, 1)
    assert smoothed.tolist() == [0.0, 1.0, 1.0, 1.0, 2.0, 6.0]


def test_a_range_test_config_and_the_training_config_it_suggests() -> None:
    config = RunConfig(optimizer="adam", hyperparameters={"clip_norm": 1.0}, max_steps=50)
    test = lr_find.range_test_config(config, steps=120, start=1e-6, end=3.0)
    assert test.kind == "lr_find" and test.max_steps == 120 and test.log_every == 1
    assert test.lr_find_start == 1e-6 and test.hyperparameters["learning_rate"] == 3.0
    assert test.hyperparameters["clip_norm"] == 1.0  # every knob is kept
    assert test.name == f"LR range test · {config.label}"
    assert test.checkpoint_every == 0 and test.sharpness_every == 0
    suggested = lr_find.training_config(test, 0.002)
    assert suggested.kind == "train" and suggested.name is None
    assert suggested.hyperparameters["learning_rate"] == 0.002
    assert suggested.replace(max_steps=50) == config.replace(
        hyperparameters={**config.hyperparameters, "learning_rate": 0.002}
    )


def test_a_start_rate_at_or_above_the_learning_rate_is_refused_by_name() -> None:
    with pytest.raises(InvalidInput) as caught:
        RunConfig(kind="lr_find", lr_find_start=0.5, hyperparameters={"learning_rate": 0.1})
    assert set(caught.value.errors) == {"lr_find_start"}
    # A training run ignores the field.
    RunConfig(lr_find_start=0.5, hyperparameters={"learning_rate": 0.1})
