"""Figures 3, 4 and 16: one optimizer step, the lab's against Keras's.

A step is `optimizer.apply(gradients, variables)` in a `tf.function`, on fixed random
gradients, so only the optimizer is timed (no forward or backward pass); each optimizer
updates its own copy of the variables.

Figures 3 and 4 step a 784 → 2048 → 2048 → 2048 → 10 MLP (10,020,874 parameters). Without
XLA (Keras's default on CPU, and the engine's) TensorFlow runs every op of a step as its
own pass over the tensors, so the time of a step follows the number of passes.

Figure 16 steps an embedding table of 1M rows × 64 with the sparse gradient of a batch of
4,096 ids drawn uniformly, a few twice (`tf.IndexedSlices`, as an `Embedding` layer's).
Adam's moments decay on every row, so AdamW writes the whole table, in Keras as in the
lab; plain SGD writes only the rows the batch touched.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import keras
import tensorflow as tf

from bench import profiling
from bench.article import ConcatenatedProjectedGD
from bench.figures import Settings
from bench.rows import Measured
from bench.timing import seconds_per_call
from core import optimizers

WIDTHS = (784, 2048, 2048, 2048, 10)
LEARNING_RATE = 0.01
RADIUS = 1.0
CLIP_NORM = 1.0
# Steps per sample: tens of milliseconds each, so a sample lasts a few tenths of a second.
CALLS = 20
TABLE = (1_000_000, 64)
IDS = 4_096
# Steps per sample of the table: AdamW's take ~0.2 s each, SGD's under a millisecond.
TABLE_CALLS = {"adamw": 2, "sgd": 300}


def projected_gd(settings: Settings) -> Measured:
    """Figure 3: `projected_gd` against `keras.optimizers.SGD`."""
    return _compare(
        "projected_gd",
        lambda: optimizers.build("projected_gd", learning_rate=LEARNING_RATE, radius=RADIUS),
        lambda: keras.optimizers.SGD(LEARNING_RATE),
        settings,
    )


def projected_gd_xla(settings: Settings) -> Measured:
    """Figure 3's XLA row: `projected_gd` with its step compiled by XLA, which could fuse
    the norm of x − ηg and the scaled write into two passes, against `keras.optimizers.SGD`
    as figure 3 steps it (without XLA)."""
    return _compare(
        "projected_gd under XLA",
        lambda: optimizers.build("projected_gd", learning_rate=LEARNING_RATE, radius=RADIUS),
        lambda: keras.optimizers.SGD(LEARNING_RATE),
        settings,
        stepper_a=functools.partial(_step, jit_compile=True),
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


def embedding_adamw(settings: Settings) -> Measured:
    """Figure 16a: `adamw` against `keras.optimizers.AdamW` on an embedding table."""
    return _compare(
        "adamw",
        lambda: optimizers.build("adamw", learning_rate=LEARNING_RATE, weight_decay=0.004),
        lambda: keras.optimizers.AdamW(LEARNING_RATE, weight_decay=0.004),
        settings,
        _table_step,
        settings.pick(TABLE_CALLS["adamw"], 1),
    )


def embedding_sgd(settings: Settings) -> Measured:
    """Figure 16b: `sgd` against `keras.optimizers.SGD` on an embedding table."""
    return _compare(
        "sgd",
        lambda: optimizers.build("sgd", learning_rate=LEARNING_RATE),
        lambda: keras.optimizers.SGD(LEARNING_RATE),
        settings,
        _table_step,
        settings.pick(TABLE_CALLS["sgd"], 20),
    )


def _compare(
    name: str,
    make_a: Callable[[], keras.optimizers.Optimizer],
    make_b: Callable[[], keras.optimizers.Optimizer],
    settings: Settings,
    stepper: Callable[[keras.optimizers.Optimizer], Callable[[], None]] | None = None,
    calls: int | None = None,
    stepper_a: Callable[[keras.optimizers.Optimizer], Callable[[], None]] | None = None,
) -> Measured:
    """Seconds per step of two optimizers, interleaved, each on its own variables (the
    MLP's unless `stepper` makes another step; A's by `stepper_a` when given)."""
    stepper = stepper or _step
    step_a, step_b = (stepper_a or stepper)(make_a()), stepper(make_b())
    calls = calls or settings.pick(CALLS, 3)
    paired = settings.interleave(
        seconds_per_call(step_a, calls), seconds_per_call(step_b, calls), settle=None
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


def _step(optimizer: keras.optimizers.Optimizer, jit_compile: bool = False) -> Callable[[], None]:
    """A traced optimizer step on a fresh MLP's variables, with fixed gradients (compiled
    by XLA with `jit_compile`)."""
    variables = _mlp().trainable_variables
    gradients = [
        tf.random.stateless_normal(v.shape, seed=(0, i), stddev=1e-3)
        for i, v in enumerate(variables)
    ]
    optimizer.build(variables)

    @tf.function(jit_compile=jit_compile)
    def step() -> None:
        optimizer.apply(gradients, variables)

    return step


def _table_step(optimizer: keras.optimizers.Optimizer) -> Callable[[], None]:
    """A traced optimizer step on a fresh embedding table, with a fixed sparse gradient."""
    table = keras.Variable(
        tf.random.stateless_normal(TABLE, seed=(0, 1), stddev=0.05), name="embeddings"
    )
    ids = tf.random.stateless_uniform((IDS,), seed=(1, 2), maxval=TABLE[0], dtype=tf.int64)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.square(tf.gather(table.value, ids)))
    gradient = tape.gradient(loss, table.value)
    assert isinstance(gradient, tf.IndexedSlices)
    optimizer.build([table])

    @tf.function
    def step() -> None:
        optimizer.apply([gradient], [table])

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
