"""Pure tensor transformations that the optimizer knobs are made of.

Each function takes tensors and returns tensors: no variables, no side effects, so each
can be tested on its own and composed by the stages of `core.optimizers.stages` in a
documented order (the way Optax composes gradient transformations). All of them work
eagerly, inside `tf.function`, and under XLA. (`tf_variable` only unwraps the variable the
stages write.)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import keras
import tensorflow as tf


def tf_variable(variable: Any) -> tf.Variable:
    """The `tf.Variable` (possibly distributed) behind a Keras variable."""
    return variable.value if isinstance(variable, keras.Variable) else variable


# Tensors of at most this many entries are measured stacked with the others of their shape
# and dtype (`per_tensor`): for them an op's fixed cost, about a microsecond, outweighs
# copying them into the stack (4 KB). A larger one is measured alone, in place, where its
# bytes cost more than its ops: on the bench's 100-variable MLP, stacking its 64 × 64
# kernels too made a step with the statistics 1.52× one without, against 1.32×.
STACKED_AT_MOST = 1 << 10

#: A measure of tensors: given same-shape tensors stacked along a new first axis and the
#: axes to reduce (all but the first), one value per tensor; given tensors as they are and
#: `None`, the one value of theirs.
Measure = Callable[..., tf.Tensor]


def shape_groups(
    *lists: Sequence[tf.Tensor], stacked_at_most: int = STACKED_AT_MOST
) -> list[list[int]]:
    """The positions of `lists[0]`'s tensors in groups to measure together: each tensor of
    at most `stacked_at_most` entries with the others of its static shape and dtype (and
    theirs at the same place in the other lists), each larger or dynamically shaped one
    alone; in first-seen order."""
    groups: dict[object, list[int]] = {}
    for i, tensor in enumerate(lists[0]):
        shape = tensor.shape
        small = shape.is_fully_defined() and shape.num_elements() <= stacked_at_most
        key = (tuple(shape), *(tensors[i].dtype for tensors in lists)) if small else i
        groups.setdefault(key, []).append(i)
    return list(groups.values())


def per_tensor(
    measure: Measure, *lists: Sequence[tf.Tensor], stacked_at_most: int = STACKED_AT_MOST
) -> tf.Tensor:
    """`measure` of each tensor of `lists[0]` (with the tensors at the same place in the
    other lists), as one float32 vector in their order.

    Small tensors (up to `stacked_at_most` entries) of one static shape and dtype are
    stacked and measured by one op (`shape_groups`), so their ops grow with the distinct
    small shapes, not with the tensors: a deeper model of small layers repeats the shapes
    it has, and a per-variable statistic costs it no more ops. A larger tensor is measured
    alone, by ops of its own: there the bytes, not the ops, are the cost.
    """
    return per_tensor_measures({"": measure}, *lists, stacked_at_most=stacked_at_most)[""]


def per_tensor_measures(
    measures: Mapping[str, Measure],
    *lists: Sequence[tf.Tensor],
    stacked_at_most: int = STACKED_AT_MOST,
) -> dict[str, tf.Tensor]:
    """Each of `measures` of each tensor, as `per_tensor` gives one, keyed as `measures`
    are; each measure is given every list. The tensors are stacked once for all the
    measures."""
    groups = shape_groups(*lists, stacked_at_most=stacked_at_most)
    alone = [members[0] for members in groups if len(members) == 1]
    order = [*alone, *(i for members in groups if len(members) > 1 for i in members)]
    parts: dict[str, list[tf.Tensor]] = {name: [] for name in measures}
    if alone:
        for name, measure in measures.items():
            parts[name].append(
                tf.stack([measure(*(t[i] for t in lists), axis=None) for i in alone])
            )
    for members in (members for members in groups if len(members) > 1):
        group = [_stacked(tensors, members) for tensors in lists]
        axis = list(range(1, group[0].shape.rank))
        for name, measure in measures.items():
            parts[name].append(measure(*group, axis=axis))
    back = None if order == sorted(order) else [order.index(i) for i in range(len(order))]

    def joined(pieces: list[tf.Tensor]) -> tf.Tensor:
        values = tf.concat(pieces, axis=0) if len(pieces) > 1 else pieces[0]
        return values if back is None else tf.gather(values, back)

    return {name: joined(pieces) for name, pieces in parts.items()}


def flattened(tensors: Sequence[tf.Tensor]) -> tuple[tf.Tensor, list[int]]:
    """All `tensors` as one float32 vector, in a few ops: same-shape ones stacked first
    (`shape_groups`); and the order of the tensors whose entries it holds."""
    groups = shape_groups(tensors)
    pieces = [
        tf.cast(tf.reshape(_stacked(tensors, members), [-1]), tf.float32) for members in groups
    ]
    flat = tf.concat(pieces, axis=0) if len(pieces) > 1 else pieces[0]
    return flat, [i for members in groups for i in members]


def _stacked(tensors: Sequence[Any], members: list[int]) -> tf.Tensor:
    """The tensors (or variables, read) at `members`, along a new first axis; one alone
    as it is."""
    if len(members) == 1:
        return tf.convert_to_tensor(tensors[members[0]])
    return tf.stack([tf.convert_to_tensor(tensors[i]) for i in members])


def half_squares_measure(tensor: tf.Tensor, *, axis: list[int] | None) -> tf.Tensor:
    """½‖t‖² (a `Measure`): `tf.nn.l2_loss` of one tensor, in one read of it (no squared
    copy is written); the ½ is undone once for all tensors, not once each."""
    tensor = tf.cast(tensor, tf.float32)
    if axis is None:
        return tf.nn.l2_loss(tensor)
    return 0.5 * tf.reduce_sum(tf.square(tensor), axis=axis)


def half_distances_measure(a: tf.Tensor, b: tf.Tensor, *, axis: list[int] | None) -> tf.Tensor:
    """½‖a − b‖² (a `Measure`)."""
    return half_squares_measure(tf.cast(a, tf.float32) - tf.cast(b, tf.float32), axis=axis)


def squared_norm(tensor: tf.Tensor) -> tf.Tensor:
    """‖t‖² as a float32 scalar, in one read of `t` (no squared copy is written)."""
    return 2.0 * half_squares_measure(tensor, axis=None)


def squared_norms(tensors: Sequence[tf.Tensor]) -> tf.Tensor:
    """‖t‖² of each of `tensors`, as a float32 vector (see `per_tensor`)."""
    return 2.0 * per_tensor(half_squares_measure, tensors)


def squared_distances(a: Sequence[tf.Tensor], b: Sequence[tf.Tensor]) -> tf.Tensor:
    """‖a_i − b_i‖² of each pair of tensors, as a float32 vector (see `per_tensor`)."""
    return 2.0 * per_tensor(half_distances_measure, a, b)


def sum_of_squares(tensors: Sequence[tf.Tensor]) -> tf.Tensor:
    """Σ‖t‖² over all `tensors`, as a float32 scalar."""
    return tf.reduce_sum(squared_norms(tensors))


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
