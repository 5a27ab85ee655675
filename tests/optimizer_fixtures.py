"""Small models, data and a stateful global-vector optimizer shared by optimizer tests."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from core.optimizers import GlobalVectorOptimizer


@keras.saving.register_keras_serializable(package="optlab_tests")
class GlobalHeavyBall(GlobalVectorOptimizer):
    """Heavy-ball momentum on the flat vector: u ← μ·u + g; x ← x − η·u."""

    state_names = ("velocity",)

    def update(self, x: tf.Tensor, g: tf.Tensor, velocity: tf.Tensor) -> tuple:
        velocity = 0.9 * velocity + g
        return x - tf.cast(self.learning_rate, x.dtype) * velocity, {"velocity": velocity}


def small_model(seed: int = 1) -> keras.Model:
    """A two-layer MLP with seeded initializers: identical weights on every call."""
    return keras.Sequential(
        [
            keras.Input((8,)),
            keras.layers.Dense(
                16,
                activation="tanh",
                name="hidden",
                kernel_initializer=keras.initializers.GlorotUniform(seed),
                bias_initializer=keras.initializers.RandomNormal(seed=seed + 1),
            ),
            keras.layers.Dense(
                3, name="logits", kernel_initializer=keras.initializers.GlorotUniform(seed + 2)
            ),
        ]
    )


def small_data(n: int = 128) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 8)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int64) + (x[:, 2] > 1).astype(np.int64)
    return x, y


def compile_model(model: keras.Model, optimizer: keras.optimizers.Optimizer) -> keras.Model:
    model.compile(
        optimizer=optimizer,
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model


def global_norm(weights: list) -> float:
    return float(np.sqrt(sum(np.sum(np.asarray(w, np.float64) ** 2) for w in weights)))
