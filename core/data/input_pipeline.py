"""`pipeline`: a `tf.data` input pipeline over a loaded `Dataset`, shuffled per run seed;
`poisson_batches`: DP-SGD's training batches, each example in each with a probability.

The shuffle is stateless: each pass over the data is ordered by a permutation drawn from
`(seed, pass number)` alone, never from TensorFlow's global or per-thread seed state. So a
seed gives the same batches bit for bit on every call, even while other pipelines run in
other threads, and each pass is ordered differently from the one before.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

from core.data.dataset import Dataset

if TYPE_CHECKING:
    import tensorflow as tf


def pipeline(
    dataset: Dataset,
    split: str,
    *,
    batch_size: int,
    seed: int,
    shuffle: bool | None = None,
    drop_remainder: bool = False,
    epochs: int | None = None,
    multitask: bool = False,
    start: int = 0,
) -> tf.data.Dataset:
    """Batches of one split of `dataset`, as a prefetched `tf.data.Dataset` of `(x, y)`.

    Args:
        dataset: What `load` returned.
        split: `"train"` or `"test"`.
        batch_size: Examples per batch.
        seed: Orders the examples; the same seed gives the same batches, bit for bit.
        shuffle: Reorder each pass with a permutation of `(seed, pass)`; by default only
            the train split is shuffled, and the test split keeps its stored order.
        drop_remainder: Drop the last, smaller batch of each pass.
        epochs: Passes over the split, each in its own order; `None` repeats forever (the
            caller counts steps), as `tf.data.Dataset.repeat` does.
        multitask: Yield `(x, {"digit": y, "parity": y % 2})` for the two-headed models
            instead of `(x, y)`; for digit datasets the second target is the digit's parity.
        start: Leave out the first `start` batches, as a run resumed after `start` steps
            does (their examples are never gathered).

    Returns:
        A `tf.data.Dataset` of float32 images `(batch, height, width, channels)` and int64
        labels `(batch,)`. No batch spans two passes.

    Raises:
        ValueError: A bad `split`, `batch_size` or `epochs`; the message names the field.
    """
    x, y = dataset.split(split)
    if isinstance(batch_size, bool) or operator.index(batch_size) < 1:
        raise ValueError(f"batch_size: must be a positive integer (got {batch_size!r})")
    if epochs is not None and (isinstance(epochs, bool) or operator.index(epochs) < 1):
        raise ValueError(f"epochs: must be a positive integer or None (got {epochs!r})")
    if shuffle is None:
        shuffle = split == "train"

    import tensorflow as tf

    count = len(y)
    images, labels = tf.constant(x), tf.constant(y)
    run_seed = tf.constant(operator.index(seed), tf.int64)

    def one_pass(epoch: tf.Tensor) -> tf.data.Dataset:
        order = tf.range(count, dtype=tf.int64)
        if shuffle:
            order = tf.random.experimental.stateless_shuffle(
                order, seed=tf.stack([run_seed, epoch])
            )
        return tf.data.Dataset.from_tensor_slices(order).batch(batch_size, drop_remainder)

    gather = _gatherer(images, labels, multitask)
    passes = tf.data.Dataset.counter() if epochs is None else tf.data.Dataset.range(epochs)
    return (
        passes.flat_map(one_pass)
        .skip(start)
        .map(gather, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        .prefetch(tf.data.AUTOTUNE)
    )


def poisson_batches(
    dataset: Dataset,
    *,
    rate: float,
    seed: int,
    steps: int,
    multitask: bool = False,
    start: int = 0,
) -> tf.data.Dataset:
    """The training batches of steps `start + 1` … `steps` by Poisson sampling, as DP-SGD's
    accounting assumes (Abadi et al., 2016): step t's batch holds each training example
    independently with probability `rate`, from uniform draws of `(seed, t)` alone, so a
    batch's size varies (rate·n on average) and a resumed run draws the same batches.

    Returns:
        A `tf.data.Dataset` of `(x, y)` as `pipeline`'s, of batches of any size (none is
        possible), in the examples' stored order.
    """
    x, y = dataset.split("train")
    if not 0 < rate <= 1:
        raise ValueError(f"rate: must be in (0, 1] (got {rate!r})")

    import tensorflow as tf

    count = len(y)
    run_seed = tf.constant(operator.index(seed), tf.int64)
    gather = _gatherer(tf.constant(x), tf.constant(y), multitask)

    def sampled(step: tf.Tensor) -> tf.Tensor:
        draws = tf.random.stateless_uniform([count], seed=tf.stack([run_seed, step]))
        return tf.where(draws < rate)[:, 0]

    return (
        tf.data.Dataset.range(start + 1, steps + 1)
        .map(sampled, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        .map(gather, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        .prefetch(tf.data.AUTOTUNE)
    )


def _gatherer(images: tf.Tensor, labels: tf.Tensor, multitask: bool) -> Any:
    """The batch of the examples at some indices: `(x, y)`, or with `multitask` the digit
    and its parity as the two heads' targets."""
    import tensorflow as tf

    def gather(indices: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor | dict[str, tf.Tensor]]:
        batch_x, batch_y = tf.gather(images, indices), tf.gather(labels, indices)
        if multitask:
            return batch_x, {"digit": batch_y, "parity": batch_y % 2}
        return batch_x, batch_y

    return gather
