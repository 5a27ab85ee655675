"""Pure tensor transformations that the optimizer knobs are made of.

Each function takes tensors and returns tensors: no variables, no side effects, so each
can be tested on its own and composed in `base.LabOptimizer` in a documented order (the
way Optax composes gradient transformations). All of them work eagerly, inside
`tf.function`, and under XLA. (`tf_variable` only unwraps the variable the stages write.)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import keras
import tensorflow as tf


def tf_variable(variable: Any) -> tf.Variable:
    """The `tf.Variable` (possibly distributed) behind a Keras variable."""
    return variable.value if isinstance(variable, keras.Variable) else variable


def squared_norm(tensor: tf.Tensor) -> tf.Tensor:
    """‖t‖² as a float32 scalar, in one read of `t` (no squared copy is written)."""
    return 2.0 * tf.nn.l2_loss(tf.cast(tensor, tf.float32))


def sum_of_squares(tensors: Sequence[tf.Tensor]) -> tf.Tensor:
    """Σ‖t‖² over all `tensors`, as a float32 scalar."""
    return tf.add_n([squared_norm(t) for t in tensors])


def global_norm(tensors: Sequence[tf.Tensor]) -> tf.Tensor:
    """The L2 norm of all `tensors` concatenated, computed without concatenating."""
    return tf.sqrt(sum_of_squares(tensors))


def ball_scale(norm: tf.Tensor, radius: tf.Tensor) -> tf.Tensor:
    """min(1, radius / norm): the factor that maps a vector of `norm` into the ball.

    Written as radius / max(norm, radius) so that it is exactly 1 inside the ball and
    finite when `norm` is 0.
    """
    return radius / tf.maximum(norm, radius)


def scale_all(tensors: Sequence[tf.Tensor], scale: tf.Tensor) -> list[tf.Tensor]:
    """Every tensor multiplied by the scalar `scale` (cast to its dtype)."""
    return [t * tf.cast(scale, t.dtype) for t in tensors]


def gradient_noise(
    shape: tf.TensorShape, dtype: tf.DType, seed: int, step: tf.Tensor, index: int
) -> tf.Tensor:
    """Standard normal noise for the `index`-th gradient at optimizer step `step`.

    Stateless: the draw depends only on (seed, step, index), so every replica of a
    `tf.distribute` strategy adds the same noise, a restored checkpoint continues the same
    sequence, and tests can reproduce it.
    """
    key = tf.stack([tf.constant(seed, tf.int64), tf.cast(step, tf.int64)])
    key = tf.random.experimental.stateless_fold_in(key, index)
    return tf.random.stateless_normal(shape, seed=key, dtype=dtype)


def top_k_count(size: int, fraction: float) -> int:
    """How many of `size` entries top-k keeps: ⌈fraction·size⌉, at least one."""
    return max(1, math.ceil(fraction * size))


def keep_top_k(tensor: tf.Tensor, fraction: float) -> tf.Tensor:
    """`tensor` with all but its ⌈fraction·n⌉ largest-magnitude entries set to zero.

    Exactly k entries survive (ties go to the lower index, as in `tf.math.top_k`).
    """
    size = tensor.shape.num_elements()
    k = top_k_count(size, fraction)
    if k >= size:
        return tensor
    flat = tf.reshape(tensor, [-1])
    _, indices = tf.math.top_k(tf.abs(flat), k=k, sorted=False)
    kept = tf.scatter_nd(indices[:, None], tf.gather(flat, indices), [size])
    return tf.reshape(kept, tf.shape(tensor))


def replica_mean(value: Any) -> Any:
    """`value`'s mean across the replicas, the same in every one, computed once.

    Reductions (norms, sums) that each replica computes on identical inputs may still
    differ in the last bit (multithreaded kernels add in varying order), and a scale
    derived from them would let mirrored copies drift apart. Outside a multi-replica step,
    `value` itself.
    """
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return value
    return context.all_reduce("MEAN", value)
