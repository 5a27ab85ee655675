"""`Divergence`: the first step of a run whose loss or weights stopped being finite."""

from __future__ import annotations

from typing import Any

import tensorflow as tf


class Divergence:
    """Keeps, in a variable the traced step writes, the first optimizer step whose loss
    or parameter norm was not finite (-1 while there is none)."""

    def __init__(self) -> None:
        self.first = tf.Variable(tf.constant(-1, tf.int64), trainable=False)

    def check(self, loss: tf.Tensor, optimizer: Any) -> None:
        """Records the optimizer's current step if it is the first with a non-finite
        `loss` or parameter norm (in the traced step)."""
        finite = tf.math.is_finite(loss)
        if "param_norm" in optimizer.stats:
            # A ReLU net can keep a finite loss while NaN weights spread behind dead units.
            finite &= tf.math.is_finite(tf.convert_to_tensor(optimizer.stats["param_norm"]))
        first_bad = (self.first < 0) & ~finite
        self.first.assign(tf.where(first_bad, optimizer.iterations, self.first))
