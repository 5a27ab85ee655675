"""The seed articles' projected gradient descent, written their way: on one flat vector.

The articles concatenate every parameter into x and every gradient into g, compute
x ← x − η·g and x ← x·min(1, r/‖x‖) on the whole vector, and split x back into the
variables. Figure 3 times it next to `projected_gd`, which gets the same result per
variable, to show what the concatenation costs. It is a reference for the bench only,
not an optimizer the lab offers.
"""

from __future__ import annotations

import tensorflow as tf

from core.optimizers import COMMON_KNOBS, GlobalVectorOptimizer, Knob

BALL_RADIUS = Knob(
    "ball_radius",
    "float",
    1.0,
    "Radius r of the L2 ball that `update` projects the whole vector onto.",
    low=0.0,
    high=1e6,
    low_open=True,
)


class ConcatenatedProjectedGD(GlobalVectorOptimizer):
    """x ← x − η·g;  x ← x·min(1, r/‖x‖), on the concatenation of all parameters.

    The projection is part of `update`, as in the articles, so the lab's own `radius`
    knob stays off (it would project a second time).
    """

    knobs = (*COMMON_KNOBS, BALL_RADIUS)

    def update(self, x: tf.Tensor, g: tf.Tensor) -> tf.Tensor:
        x = x - tf.cast(self.learning_rate, x.dtype) * g
        radius = tf.constant(self.get_knob("ball_radius"), x.dtype)
        # r / ‖x‖ is +inf when x = 0, and min(1, inf) = 1: the zero vector stays put.
        return x * tf.minimum(tf.constant(1.0, x.dtype), radius / tf.norm(x))
