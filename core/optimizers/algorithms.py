"""The per-variable algorithms: plain gradient descent, momentum and Adam.

Each writes only step 5 of `lab_optimizer.LabOptimizer` (the proposed step Δ for one variable); the
knobs around it come from the base class. Their formulas are Keras's own, expression for
expression, so `momentum` equals `keras.optimizers.SGD(momentum=...)` and `adam` with a
`weight_decay` equals `keras.optimizers.AdamW`.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from core.optimizers.lab_optimizer import LabOptimizer
from core.optimizers.optimizer_catalog import ADAM_KNOBS, MOMENTUM_KNOBS


@keras.saving.register_keras_serializable(package="optlab")
class SGD(LabOptimizer):
    """Gradient descent: the step is −η·g."""

    row_local = True

    def propose(
        self, gradient: tf.Tensor, param: tf.Tensor, learning_rate: tf.Tensor, **slots: tf.Tensor
    ) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
        # Negate the scalar, not the tensor: one pass over the gradient instead of two.
        return gradient * -tf.cast(learning_rate, gradient.dtype), {}


@keras.saving.register_keras_serializable(package="optlab")
class Momentum(LabOptimizer):
    """Gradient descent with momentum, in Keras's form: with `nesterov`, the step is
    μ·v − η·g, with the new velocity v."""

    knobs = MOMENTUM_KNOBS
    slot_names = ("velocity",)

    def propose(
        self,
        gradient: tf.Tensor,
        param: tf.Tensor,
        learning_rate: tf.Tensor,
        *,
        velocity: tf.Tensor,
    ) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
        lr = tf.cast(learning_rate, gradient.dtype)
        momentum = tf.cast(self._values["momentum"], gradient.dtype)
        velocity = velocity * momentum - gradient * lr
        step = velocity * momentum - gradient * lr if self._values["nesterov"] else velocity
        return step, {"velocity": velocity}


@keras.saving.register_keras_serializable(package="optlab")
class Adam(LabOptimizer):
    """Adam (Kingma & Ba), in Keras's form, at step t counted from 1; with
    `epsilon_inside_sqrt` it divides by √(v + ε); with `weight_decay` it is AdamW (the
    decay is decoupled, as in `keras.optimizers.AdamW`)."""

    knobs = ADAM_KNOBS
    slot_names = ("m", "v")

    def propose(
        self,
        gradient: tf.Tensor,
        param: tf.Tensor,
        learning_rate: tf.Tensor,
        *,
        m: tf.Tensor,
        v: tf.Tensor,
    ) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
        dtype = gradient.dtype
        beta_1, beta_2 = self._values["beta_1"], self._values["beta_2"]
        epsilon = self._values["epsilon"]
        local_step = tf.cast(self.iterations + 1, dtype)
        beta_1_power = tf.pow(tf.cast(beta_1, dtype), local_step)
        beta_2_power = tf.pow(tf.cast(beta_2, dtype), local_step)
        alpha = tf.cast(learning_rate, dtype) * tf.sqrt(1 - beta_2_power) / (1 - beta_1_power)
        m = m + (gradient - m) * (1 - beta_1)
        v = v + (tf.square(gradient) - v) * (1 - beta_2)
        if self._values["epsilon_inside_sqrt"]:
            denominator = tf.sqrt(v + epsilon)
        else:
            denominator = tf.sqrt(v) + epsilon
        return (m * -alpha) / denominator, {"m": m, "v": v}
