"""Figures 3 and 4: one optimizer step on a 10M-parameter MLP, the lab's against Keras's.

A step is `optimizer.apply(gradients, variables)` in a `tf.function`, on fixed random
gradients, so only the optimizer is timed (no forward or backward pass). The MLP is
784 → 2048 → 2048 → 2048 → 10, 10,020,874 parameters; each optimizer updates its own copy.
Without XLA (Keras's default on CPU, and the engine's) TensorFlow runs every op of a step
as its own pass over the tensors, so the time of a step follows the number of passes.
"""

from __future__ import annotations

from collections.abc import Callable

import keras
import tensorflow as tf

from bench import profiling
from bench.article import ConcatenatedProjectedGD
from bench.figures import Settings
from bench.rows import Measured
from bench.timing import interleave, seconds_per_call
from core import optimizers

WIDTHS = (784, 2048, 2048, 2048, 10)
LEARNING_RATE = 0.01
RADIUS = 1.0
CLIP_NORM = 1.0
# Steps per sample: tens of milliseconds each, so a sample lasts a few tenths of a second.
CALLS = 20


def projected_gd(settings: Settings) -> Measured:
    """Figure 3: `projected_gd` against `keras.optimizers.SGD`."""
    return _compare(
        "projected_gd",
        lambda: optimizers.build("projected_gd", learning_rate=LEARNING_RATE, radius=RADIUS),
        lambda: keras.optimizers.SGD(LEARNING_RATE),
        settings,
    )


def concatenated_projected_gd(settings: Settings) -> Measured:
    """Figure 3's reference row: the articles' concatenate-and-split version against SGD."""
    return _compare(
        "the concatenated version",
        lambda: ConcatenatedProjectedGD(learning_rate=LEARNING_RATE, ball_radius=RADIUS),
        lambda: keras.optimizers.SGD(LEARNING_RATE),
        settings,
    )


def clip_norm(settings: Settings) -> Measured:
    """Figure 4: the lab's `clip_norm` on `sgd` against Keras's `global_clipnorm`."""
    return _compare(
        "sgd with clip_norm",
        lambda: optimizers.build("sgd", learning_rate=LEARNING_RATE, clip_norm=CLIP_NORM),
        lambda: keras.optimizers.SGD(LEARNING_RATE, global_clipnorm=CLIP_NORM),
        settings,
    )


def _compare(
    name: str,
    make_a: Callable[[], keras.optimizers.Optimizer],
    make_b: Callable[[], keras.optimizers.Optimizer],
    settings: Settings,
) -> Measured:
    """Seconds per step of two optimizers, interleaved, each on its own MLP."""
    step_a, step_b = _step(make_a()), _step(make_b())
    calls = settings.pick(CALLS, 3)
    paired = interleave(
        seconds_per_call(step_a, calls),
        seconds_per_call(step_b, calls),
        pairs=settings.pairs,
        warmup=settings.warmup,
    )

    def diagnose() -> str:
        ours, theirs = profiling.tf_ops(step_a, calls), profiling.tf_ops(step_b, calls)
        return (
            f"Profiled with tf.profiler, a step of {name} spends {ours.summary()}; "
            f"Keras's spends {theirs.summary()}."
        )

    return Measured.compared(
        paired,
        "s",
        diagnose=diagnose,
    )


def _step(optimizer: keras.optimizers.Optimizer) -> Callable[[], None]:
    """A traced optimizer step on a fresh MLP's variables, with fixed gradients."""
    variables = _mlp().trainable_variables
    gradients = [
        tf.random.stateless_normal(v.shape, seed=(0, i), stddev=1e-3)
        for i, v in enumerate(variables)
    ]
    optimizer.build(variables)

    @tf.function
    def step() -> None:
        optimizer.apply(gradients, variables)

    return step


def _mlp() -> keras.Model:
    layers = [keras.Input((WIDTHS[0],))]
    for index, width in enumerate(WIDTHS[1:], start=1):
        last = index == len(WIDTHS) - 1
        layers.append(
            keras.layers.Dense(
                width,
                activation=None if last else "relu",
                kernel_initializer=keras.initializers.GlorotUniform(seed=index),
                name=f"dense{index}",
            )
        )
    return keras.Sequential(layers)
