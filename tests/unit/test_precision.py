"""A run's precision: 16-bit layers over float32 weights and optimizer state, and
float16's loss scaling through Keras's `LossScaleOptimizer`, with the true gradients
everywhere else."""

from __future__ import annotations

import threading

import keras
import numpy as np
import pytest
import tensorflow as tf

from core import models
from core.engine import RunConfig
from core.knobs import InvalidInput
from core.optimizers import build
from core.training.losses import task_of
from core.training.precision import loss_scaler, policy


def test_the_policy_holds_in_its_thread_only_and_is_restored() -> None:
    seen: list[str] = []
    with policy("mixed_bfloat16"):
        model = models.build("mlp", input_shape=(4,), num_classes=3, seed=0)
        other = threading.Thread(target=lambda: seen.append(keras.config.dtype_policy().name))
        other.start()
        other.join()
    assert seen == ["float32"]  # a run in another thread keeps its own
    assert keras.config.dtype_policy().name == "float32"
    assert model.layers[-1].compute_dtype == "bfloat16"
    assert {v.dtype for v in model.trainable_variables} == {"float32"}  # master weights
    with pytest.raises(ValueError, match="precision: must be one of"), policy("float8"):
        pass
    with pytest.raises(InvalidInput, match="precision"):
        RunConfig.from_dict({"precision": "float64"})


def test_float16_gradients_are_the_true_ones_and_the_scaler_applies_them() -> None:
    x = tf.random.stateless_normal((16, 4), seed=(1, 2))
    y = tf.constant(np.arange(16) % 3)
    with policy("mixed_float16"):
        half = models.build("mlp", input_shape=(4,), num_classes=3, seed=0)
    full = models.build("mlp", input_shape=(4,), num_classes=3, seed=0)
    optimizer = build("sgd", learning_rate=0.1, telemetry=True)
    scaler = loss_scaler("mixed_float16", optimizer)
    assert loss_scaler("mixed_bfloat16", optimizer) is None
    scaler.build(half.trainable_variables)
    task = task_of(RunConfig.from_dict({"batch_size": 16}))
    task.loss_scale = scaler.dynamic_scale
    scaled = task.gradients(half, x, y).grads
    task.loss_scale = None
    reference = task.gradients(full, x, y).grads
    for g16, g32 in zip(scaled, reference, strict=True):  # unscaled: float16's rounding only
        np.testing.assert_allclose(g16.numpy(), g32.numpy(), rtol=0.05, atol=1e-3)
    before = [v.numpy() for v in half.trainable_variables]
    scale = scaler.dynamic_scale
    scaler.apply([g * scale for g in scaled], half.trainable_variables)
    after = [v.numpy() for v in half.trainable_variables]
    for b, a, g in zip(before, after, scaled, strict=True):  # x ← x − η·g, unscaled
        np.testing.assert_allclose(a, b - 0.1 * g.numpy(), rtol=1e-5, atol=1e-6)
    assert float(optimizer.stats["grad_norm"]) == pytest.approx(
        float(tf.linalg.global_norm(scaled)), rel=1e-5
    )
    scale = float(scaler.dynamic_scale)
    overflow = [tf.fill(g.shape, np.inf) for g in scaled]
    scaler.apply(overflow, half.trainable_variables)  # skipped, and the scale halves
    now = [v.numpy() for v in half.trainable_variables]
    assert all(map(np.array_equal, after, now))
    assert float(scaler.dynamic_scale) == scale / 2
