"""The instruments against closed forms: each one driven on a model built here, whose
true value is known, through the instrument's own code (`read`, `after_update`/`finish`,
`gradients`/`finish`), as the Trainer drives it.

- sharpness on least squares (a linear model, the squared error, the whole batch) is the
  top eigenvalue of the Hessian (2/n)·AᵀA, A = [X 1];
- α after a gradient-descent step on a quadratic is η·gᵀHg / gᵀg − 1 (the step's
  parabola is exact, and its minimum is at t* = gᵀg / (η·gᵀHg) of the step);
- the gradient noise scale, with per-example gradients −zᵢ, zᵢ ~ N(μ, diag σ²), is
  tr Σ / ‖G‖² = Σσ² / ‖μ‖².
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import keras
import numpy as np
import pytest
import tensorflow as tf

from core.training.instruments import Alpha, Measurements, NoiseScale, ReplicaStep, Sharpness
from core.training.losses import TASKS, Regression


def linear_model(features: int, *, bias: bool = True, seed: int = 0) -> keras.Model:
    model = keras.Sequential(
        [
            keras.Input((features,)),
            keras.layers.Dense(
                1, use_bias=bias, kernel_initializer=keras.initializers.RandomNormal(seed=seed)
            ),
        ]
    )
    return model


def least_squares(n: int = 256, features: int = 5, seed: int = 0) -> tuple[np.ndarray, ...]:
    """X with columns of different scales (a clear top eigenvalue), y a noisy linear map."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, features)) * np.linspace(0.5, 2.0, features) + 0.3
    y = x @ rng.normal(size=features) + 0.1 * rng.normal(size=n)
    return x.astype(np.float32), y.astype(np.float32)


def hessian(x: np.ndarray) -> np.ndarray:
    """(2/n)·AᵀA of the mean squared error of a linear model with a bias, A = [X 1]."""
    a = np.hstack([x, np.ones((len(x), 1))]).astype(np.float64)
    return 2.0 / len(x) * a.T @ a


def trainer_of(model: keras.Model, task: Any, x: np.ndarray, y: np.ndarray) -> Any:
    """What an instrument reads of its trainer: the config's seed and batch size, the
    model, the task and the run's batches (the sharpness measures on its fixed batch)."""
    return SimpleNamespace(
        config=SimpleNamespace(seed=0, batch_size=len(x)),
        model=model,
        task=task,
        data=SimpleNamespace(
            first_batch=(tf.constant(x), tf.constant(y)),
            sharpness_batch=(tf.constant(x), tf.constant(y)),
        ),
    )


def test_sharpness_is_the_top_eigenvalue_of_least_squares() -> None:
    x, y = least_squares()
    model = linear_model(x.shape[1])
    sharpness = Sharpness(trainer_of(model, Regression(len(x)), x, y))
    measured = Measurements()
    for _ in range(5):  # warm-started from its last eigenvector, as during training
        sharpness.read({}, measured)
    expected = float(np.linalg.eigvalsh(hessian(x))[-1])
    assert abs(measured.values["sharpness"] - expected) <= 0.01 * expected, (
        measured.values["sharpness"],
        expected,
    )
    squared_error = np.mean((model(x).numpy()[:, 0] - y) ** 2)  # at the same weights
    assert measured.values["sharpness/loss"] == pytest.approx(squared_error, rel=1e-5)


def test_alpha_of_a_gradient_step_on_a_quadratic() -> None:
    x, y = least_squares(n=128, features=4, seed=1)
    h = hessian(x)
    model = linear_model(x.shape[1], seed=1)
    task = Regression(len(x))
    alpha = Alpha(trainer_of(model, task, x, y))
    variables = model.trainable_variables
    step = ReplicaStep(tf.constant(x), tf.constant(y), variables, _gradients(model, task), list)
    step.computed = step.gradients(step.x, step.y)
    g = np.concatenate([np.ravel(t.numpy()) for t in step.computed.grads]).astype(np.float64)
    curvature = (g @ h @ g) / (g @ g)  # along the step: α = η·curvature − 1
    for rate in (0.5 / curvature, 1.0 / curvature, 1.8 / curvature):  # α = −0.5, 0, 0.8
        before = alpha.before_update(step)
        for variable, grad in zip(variables, step.computed.grads, strict=True):
            variable.assign_sub(rate * grad)
        alpha.after_update(step, before)
        outputs = dict(step.terms)
        alpha.finish(outputs)
        expected = rate * curvature - 1
        assert abs(float(outputs["alpha"]) - expected) <= 0.01, (float(outputs["alpha"]), expected)
        for variable, value in zip(variables, before, strict=True):
            variable.assign(value)  # the same start for the next rate


def _gradients(model: keras.Model, task: Any) -> Any:
    return lambda x, y: task.gradients(model, x, y)


class Linear(Regression):
    """Per-example loss −θ·zᵢ (the model's output): its gradient is −zᵢ, whatever θ."""

    def losses(self, outputs: Any, y: Any) -> dict[str, tf.Tensor]:
        return {TASKS[0]: -tf.squeeze(tf.cast(outputs, tf.float32), axis=-1)}


def test_noise_scale_is_the_trace_of_the_covariance_over_the_squared_gradient() -> None:
    rng = np.random.default_rng(0)
    features, batch, steps = 100, 1024, 200
    mean = rng.normal(size=features) * 0.2
    std = rng.uniform(0.5, 1.5, size=features)
    expected = float(np.sum(std**2) / np.sum(mean**2))
    model = linear_model(features, bias=False)
    task = Linear(batch)
    noise_scale = NoiseScale(trainer_of(model, task, np.zeros((batch, features)), np.zeros(batch)))
    for _ in range(steps):
        z = (mean + std * rng.normal(size=(batch, features))).astype(np.float32)
        step = ReplicaStep(
            tf.constant(z),
            tf.zeros(batch),
            model.trainable_variables,
            _gradients(model, task),
            list,
        )
        noise_scale.gradients(step)
        outputs = dict(step.terms)
        noise_scale.finish(outputs)
    measured = float(outputs["noise_scale"])
    assert abs(measured - expected) <= 0.1 * expected, (measured, expected)
