"""`Evaluation`: a run's loss and scores on the whole test split, one traced step a batch."""

from __future__ import annotations

import functools
from typing import Any

import keras
import tensorflow as tf

from core.training.losses import SingleTask


class Evaluation:
    """Calling it gives `val_loss` and `val_<score>` for each of the task's scores
    (accuracy, or mean absolute error), means over every example of `batches`."""

    def __init__(self, batches: tf.data.Dataset, model: keras.Model, task: SingleTask) -> None:
        self.batches = batches
        # A partial of a function, not a method: TensorFlow counts retraces per function
        # code, so every run's evaluation would share one count and warn of retracing; and
        # it holds the model, not `self`, so no reference cycle keeps the model alive.
        self._batch = tf.function(functools.partial(_batch_sums, model, task), autograph=False)

    def __call__(self) -> dict[str, float]:
        totals: dict[str, float] = {}
        for batch in self.batches:
            for key, value in self._batch(*batch).items():
                totals[key] = totals.get(key, 0.0) + float(value)
        count = max(totals.pop("count"), 1.0)
        return {f"val_{key}": value / count for key, value in totals.items()}


def _batch_sums(model: keras.Model, task: SingleTask, x: tf.Tensor, y: Any) -> dict[str, tf.Tensor]:
    """A test batch's summed loss, its size, and the task's summed scores."""
    outputs = model(x, training=False)
    total = task.total(task.losses(outputs, y))
    sums = {"loss": tf.reduce_sum(total), "count": tf.cast(tf.shape(total)[0], tf.float32)}
    return sums | task.scores(outputs, y)
