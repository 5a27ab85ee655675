"""`LiveSchedule`: a learning-rate schedule whose peak is the live `learning_rate` knob.

    η_t = η · w(t) · d(t),  t = 1, 2, ... the step being taken
    w(t) = min(1, t / W)                                  warmup over W steps (W = 0: none)
    d(t) = 1                                              constant
         = ½ (1 + cos(π p)),  p = clip((t − W) / (T − W), 0, 1)   cosine to 0 at step T
         = 0.1 ^ (number of T/2, 3T/4 that t has passed)  step
         = (η₀ / η) ^ ((T − t) / (T − 1))                    range_test: η₀ at step 1,
                                                             growing exponentially to η at T

η is a variable: a live change of the learning rate scales the whole schedule from the
next step on (the shape stays, its height changes), without retracing. The optimizer
that takes a `LiveSchedule` (see `LabOptimizer`) owns the variable and checkpoints it.
"""

from __future__ import annotations

import math
from typing import Any

import keras
import tensorflow as tf

from core.optimizers.optimizer_catalog import LR_SCHEDULES

STEP_DECAY = 0.1
STEP_MILESTONES = (0.5, 0.75)  # of the run's steps
#: The learning-rate range test's shape (see `core.lr_find`): not a choice of the
#: `lr_schedule` field, but the schedule of every run of kind `lr_find`.
RANGE_TEST = "range_test"


@keras.saving.register_keras_serializable(package="optlab")
class LiveSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """The schedule `shape` after `warmup_steps` of linear warmup, over `total_steps`,
    scaled by the peak rate `learning_rate` (see the module's docstring).

    Args:
        learning_rate: The peak rate η (> 0), the live knob's first value.
        shape: `"constant"`, `"cosine"`, `"step"` or `RANGE_TEST`.
        warmup_steps: W ≥ 0.
        total_steps: T ≥ 1, the run's length: cosine reaches 0 there, step decays at
            its half and three quarters, the range test reaches the peak.
        start_rate: η₀, the range test's first rate (0 < η₀ < η); other shapes ignore it.
    """

    def __init__(
        self,
        learning_rate: float,
        shape: str,
        warmup_steps: int,
        total_steps: int,
        start_rate: float | None = None,
    ) -> None:
        if shape not in (*LR_SCHEDULES, RANGE_TEST):
            choices = ", ".join(LR_SCHEDULES)
            raise ValueError(f"lr_schedule: must be one of {choices} (got {shape!r})")
        if not (isinstance(learning_rate, float | int) and learning_rate > 0):
            raise ValueError(f"learning_rate: must be > 0 (got {learning_rate!r})")
        if shape == RANGE_TEST and not (start_rate is not None and 0 < start_rate < learning_rate):
            raise ValueError(
                f"lr_find_start: must be in (0, learning_rate = {learning_rate:g}) "
                f"(got {start_rate!r})"
            )
        self.peak = float(learning_rate)
        self.shape = shape
        self.warmup_steps = int(warmup_steps)
        self.total_steps = max(1, int(total_steps))
        self.start_rate = None if start_rate is None else float(start_rate)
        # The live peak; the optimizer that takes the schedule makes it its variable.
        self.rate: keras.Variable | None = None

    def __call__(self, iterations: Any) -> tf.Tensor:
        """η_t for the step after `iterations` steps taken."""
        peak = self.peak if self.rate is None else self.rate
        return tf.cast(peak, tf.float32) * self.factor(iterations)

    def factor(self, iterations: Any) -> tf.Tensor:
        """w(t) · d(t): the schedule's shape, 1 at its peak."""
        t = tf.cast(iterations, tf.float32) + 1.0
        warmup = float(self.warmup_steps)
        w = tf.minimum(1.0, t / warmup) if self.warmup_steps > 0 else tf.constant(1.0)
        total = float(self.total_steps)
        if self.shape == "cosine":
            span = max(total - warmup, 1.0)
            progress = tf.clip_by_value((t - warmup) / span, 0.0, 1.0)
            return w * 0.5 * (1.0 + tf.cos(math.pi * progress))
        if self.shape == "step":
            passed = tf.add_n([tf.cast(t > m * total, tf.float32) for m in STEP_MILESTONES])
            return w * tf.pow(STEP_DECAY, passed)
        if self.shape == RANGE_TEST:
            assert self.start_rate is not None  # checked in __init__
            left = tf.clip_by_value((total - t) / max(total - 1.0, 1.0), 0.0, 1.0)
            return w * tf.pow(self.start_rate / self.peak, left)
        return w

    def get_config(self) -> dict[str, Any]:
        peak = self.peak if self.rate is None else float(self.rate.numpy())
        return {
            "learning_rate": peak,
            "shape": self.shape,
            "warmup_steps": self.warmup_steps,
            "total_steps": self.total_steps,
            "start_rate": self.start_rate,
        }
