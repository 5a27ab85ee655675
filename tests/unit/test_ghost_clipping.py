"""Ghost clipping (`core.training.ghost_clipping`) against each example's gradient made
(the Jacobian's way, itself checked against float64 in test_private_gradients.py): every
model of the catalog, one head and two, and convolutions the catalog does not hold
(strides, dilation, "valid" padding, activations other than relu, no bias); and the models
it must leave to the Jacobian."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from core.models.building import build
from core.models.model_catalog import catalog
from core.training.ghost_clipping import GhostClipping
from core.training.losses import MultiTask, SingleTask
from core.training.private_gradients import PrivateGradients

EXAMPLES, CLASSES = 12, 10


def clipped(model: keras.Model, task: SingleTask, x, y, clip: float, ghost: bool):
    step = tf.Variable(0, dtype=tf.int64)
    gradients = PrivateGradients(
        task, model, clip=clip, noise=0.0, expected_batch=1.0, seed=0, step=step, ghost=ghost
    )
    assert (gradients.ghost is not None) == ghost
    return [g.numpy() for g in gradients(model, tf.constant(x), y).grads]


def labels(multitask: bool, seed: int = 2):
    y = np.random.default_rng(seed).integers(0, CLASSES, EXAMPLES)
    if multitask:
        return {"digit": tf.constant(y), "parity": tf.constant(y % 2)}
    return tf.constant(y)


def assert_same_as_the_jacobians(model: keras.Model, shape, multitask: bool = False) -> None:
    x = np.random.default_rng(1).normal(size=(EXAMPLES, *shape)).astype(np.float32)
    task = MultiTask(EXAMPLES, {"digit": 1.0, "parity": 0.5}) if multitask else SingleTask(EXAMPLES)
    y = labels(multitask)
    made = clipped(model, task, x, y, 1e9, ghost=False)
    norms = np.sqrt(sum(np.sum(g**2) for g in made))  # of the sum: a clip that bites
    clip = 0.1 * norms / EXAMPLES
    ghost = clipped(model, task, x, y, clip, ghost=True)
    jacobian = clipped(model, task, x, y, clip, ghost=False)
    assert sum(np.sum(g**2) for g in jacobian) < 0.5 * norms**2  # clipped indeed
    for got, want in zip(ghost, jacobian, strict=True):
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=1e-6 * np.abs(want).max())


@pytest.mark.parametrize("multitask", [False, True], ids=["one head", "two heads"])
@pytest.mark.parametrize("name", [m.name for m in catalog()])
def test_every_catalog_model_clips_as_its_jacobians_do(name: str, multitask: bool) -> None:
    shape = (12, 12, 1)
    model = build(name, input_shape=shape, num_classes=CLASSES, seed=3, multitask=multitask)
    assert GhostClipping.covers(model)
    assert_same_as_the_jacobians(model, shape, multitask)


def test_convolutions_with_strides_dilation_and_other_activations() -> None:
    inputs = keras.Input((9, 9, 3))
    h = keras.layers.Conv2D(4, 3, strides=2, padding="same", activation="tanh")(inputs)
    h = keras.layers.Conv2D(5, 2, dilation_rate=2, activation="gelu", use_bias=False)(h)
    h = keras.layers.Dense(6, activation="sigmoid")(h)  # on a 3-d input: a Dense per pixel
    h = keras.layers.Flatten()(keras.layers.Dropout(0.0)(h))
    outputs = keras.layers.Dense(CLASSES)(h)
    model = keras.Model(inputs, outputs)
    assert GhostClipping.covers(model)
    assert_same_as_the_jacobians(model, (9, 9, 3))


def _shared_dense() -> keras.Model:
    inputs = keras.Input((4,))
    dense = keras.layers.Dense(4)
    return keras.Model(inputs, keras.layers.Dense(CLASSES)(dense(dense(inputs))))


def _normalized() -> keras.Model:
    inputs = keras.Input((4,))
    h = keras.layers.LayerNormalization()(keras.layers.Dense(4)(inputs))
    return keras.Model(inputs, keras.layers.Dense(CLASSES)(h))


def _nested() -> keras.Model:
    inner = keras.Sequential([keras.Input((4,)), keras.layers.Dense(4)])
    inputs = keras.Input((4,))
    return keras.Model(inputs, keras.layers.Dense(CLASSES)(inner(inputs)))


class _Subclassed(keras.Model):
    def __init__(self) -> None:
        super().__init__()
        self.dense = keras.layers.Dense(CLASSES)

    def call(self, inputs):
        return self.dense(inputs)


def _subclassed() -> keras.Model:
    model = _Subclassed()
    model(np.zeros((1, 4), np.float32))
    return model


@pytest.mark.parametrize(
    "make",
    [_shared_dense, _normalized, _nested, _subclassed],
    ids=["a layer called twice", "a normalization", "a model within", "a subclassed model"],
)
def test_other_models_take_the_jacobians_way(make) -> None:
    model = make()
    assert not GhostClipping.covers(model)
    with pytest.raises(ValueError, match="model"):
        GhostClipping(model, SingleTask(EXAMPLES))
    x = np.random.default_rng(1).normal(size=(EXAMPLES, 4)).astype(np.float32)
    step = tf.Variable(0, dtype=tf.int64)
    gradients = PrivateGradients(
        SingleTask(EXAMPLES), model, clip=0.1, noise=0.0, expected_batch=1.0, seed=0, step=step
    )
    assert gradients.ghost is None
    assert all(np.isfinite(g.numpy()).all() for g in gradients(model, x, labels(False)).grads)
