"""`weight_norm` is read from the weights after the step, apart from the optimizer's own
`param_norm`: with the projection broken (its scale no longer applied to the weights),
the weights leave the ball, `weight_norm` says so, and the projection stage's
`param_norm` does not (its formula is never above the radius): a verdict on the weights
must read the first."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from core import optimizers
from core.optimizers import transforms
from core.training.telemetry import LayerStatistics, optimizer_readings

RADIUS = 0.5


def stepped(monkeypatch: pytest.MonkeyPatch, *, broken: bool) -> tuple[keras.Model, dict]:
    """A small model after one projected step (the projection broken or not), and what
    the telemetry reads of it."""
    if broken:  # the new parameters left unscaled, as the probe did; the stats kept
        monkeypatch.setattr(transforms, "scale_all", lambda tensors, scale: list(tensors))
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3), keras.layers.Dense(2)])
    optimizer = optimizers.build("projected_gd", learning_rate=0.1, radius=RADIUS, telemetry=True)
    optimizer.per_variable_stats = True  # what the per-layer statistics read
    grads = [tf.ones_like(v) for v in model.trainable_variables]
    optimizer.apply(grads, model.trainable_variables)
    per_layer = LayerStatistics(model, optimizer)()
    return model, {k: float(v) for k, v in optimizer_readings(optimizer, per_layer).items()}


def norm_of(model: keras.Model) -> float:
    return float(np.sqrt(sum(np.sum(np.square(v.numpy())) for v in model.trainable_variables)))


@pytest.mark.parametrize("broken", [False, True])
def test_the_weight_norm_is_the_weights_whatever_the_projection_does(monkeypatch, broken):
    model, readings = stepped(monkeypatch, broken=broken)
    assert readings["weight_norm"] == pytest.approx(norm_of(model), rel=1e-5)
    assert readings["param_norm"] <= RADIUS * (1 + 1e-5)  # the stage's, either way
    if broken:  # the weights left the ball: only `weight_norm` shows it
        assert readings["weight_norm"] > 2 * RADIUS
    else:
        assert readings["weight_norm"] <= RADIUS * (1 + 1e-5)
