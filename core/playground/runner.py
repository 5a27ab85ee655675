"""`Runner`: one of the lab's optimizers on one surface, its whole trajectory compiled once.

The optimizer is the lab's own Keras class (`OptimizerSpec.build`) applied to a 2-element
`keras.Variable` (x, y), with the gradient of the surface's loss from `tf.GradientTape`:
the same `apply` the lab trains with, nothing written again. Every step of a trajectory
runs inside one `tf.while_loop`, compiled by XLA once per runner (and per `capacity`): a
step is then about a microsecond (500 steps of Adam with its telemetry, 0.4 ms on 2
cores), where the same loop in a `tf.function` without XLA runs each op on its own, about
60 µs a step, and an eager loop takes milliseconds a step.

A runner is reused for every trajectory whose knobs differ only in the values of live
knobs (the learning rate, `radius`, `clip_norm`, `weight_decay`, ...: each a variable of
the optimizer, assigned before the loop starts); any other knob (momentum's μ, Adam's β)
is read when the loop is traced, so another value is another runner. Each trajectory
starts from the optimizer's state as it was built (its slots, step counter and statistics,
restored inside the loop's function), so that it depends only on its arguments.

The optimizer is made with `telemetry=True`, and the clipping and projection stages
record whether they acted (`clip_active`, `projection_active` in `LabOptimizer.stats`):
each step's flags are read there, after its `apply`.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from core.optimizers.optimizer_catalog import OptimizerSpec
from core.playground.surfaces import Surface

#: The statistics `LabOptimizer.stats` keeps of whether the clipping (`ClipNorm`) and the
#: projection (`BallProjection`) acted in the last step.
CLIPPED, PROJECTED = "clip_active", "projection_active"


@dataclass(frozen=True)
class Stepped:
    """What a runner returns: the points reached, and each step's flags.

    Attributes:
        points: Shape (n + 1, 2): the start, then the point after each of the n steps
            taken (float32 values). Stepping stops after the first point that diverged
            (outside the bounds, or not finite), which is the last.
        losses: Shape (n + 1,): the loss at each point.
        projected: Shape (n,): whether step k's new point was projected onto the ball.
        clipped: Shape (n,): whether step k's gradient was clipped.
        diverged: Whether the last point diverged.
    """

    points: np.ndarray
    losses: np.ndarray
    projected: np.ndarray
    clipped: np.ndarray
    diverged: bool


class Runner:
    """Steps optimizer `spec`, with knob values `values`, on `surface`.

    Args:
        surface: Where it steps.
        spec: The optimizer.
        values: Every knob's validated value (`spec.validate`); the live ones may change
            from one `run` to the next.
    """

    def __init__(self, surface: Surface, spec: OptimizerSpec, values: Mapping[str, Any]) -> None:
        self.surface = surface
        self._lock = threading.Lock()  # one trajectory at a time: they share the variables
        # A 2-element problem gains nothing from an accelerator, whose every launch costs more
        # than the whole step here.
        with tf.device("/CPU:0"):
            self.optimizer = spec.build(telemetry=True, **values)
            # No per-variable statistics: there is one variable, and the flags are scalars.
            self.optimizer.per_variable_stats = False
            self.point = keras.Variable(np.zeros(2, np.float32), name="xy")
            self.optimizer.build([self.point])
        live = {id(variable) for variable in self.optimizer.live_variables.values()}
        # What a trajectory starts from: every variable of the optimizer but the live knobs',
        # as built (its slots, step counter and statistics, as its algorithm starts them).
        self._state = [v for v in self.optimizer.variables if id(v) not in live]
        self._initial = [v.numpy() for v in self._state]
        self._flags = {name: self.optimizer.stats.get(name) for name in (CLIPPED, PROJECTED)}
        self._loop = tf.function(self._trajectory, autograph=False, jit_compile=True)

    def run(self, live: Mapping[str, float], start: tuple[float, float], steps: int) -> Stepped:
        """The trajectory from `start`, of at most `steps` steps, with the live knobs set
        to `live` (each must be on in this runner's optimizer)."""
        with self._lock, tf.device("/CPU:0"):
            for name, value in live.items():
                self.optimizer.set_knob(name, value)
            points, losses, projected, clipped, taken, diverged = self._loop(
                tf.constant(start, tf.float32), tf.constant(steps, tf.int32), capacity(steps)
            )
        n = int(taken)
        return Stepped(
            points=points.numpy()[: n + 1],
            losses=losses.numpy()[: n + 1],
            projected=projected.numpy()[:n],
            clipped=clipped.numpy()[:n],
            diverged=bool(diverged),
        )

    def _loss_and_gradient(self) -> tuple[tf.Tensor, tf.Tensor]:
        with tf.GradientTape() as tape:
            xy = tf.convert_to_tensor(self.point.value)
            tape.watch(xy)
            loss = self.surface.loss(xy[0], xy[1])
        return loss, tape.gradient(loss, xy)

    def _diverged(self, loss: tf.Tensor) -> tf.Tensor:
        """Whether the current point is outside the bounds (NaN is) or its loss not finite."""
        box = self.surface.bounds
        x, y = tf.unstack(tf.convert_to_tensor(self.point.value))
        inside = (x >= box.x_low) & (x <= box.x_high) & (y >= box.y_low) & (y <= box.y_high)
        return tf.logical_not(inside & tf.math.is_finite(loss))

    def _flag(self, name: str) -> tf.Tensor:
        variable = self._flags[name]
        return tf.constant(False) if variable is None else tf.convert_to_tensor(variable) > 0

    def _trajectory(self, start: tf.Tensor, steps: tf.Tensor, size: int) -> tuple[tf.Tensor, ...]:
        """The loop: arrays of `size` (+ 1) entries, filled up to the steps taken."""
        for variable, value in zip(self._state, self._initial, strict=True):
            variable.assign(value)
        self.point.assign(start)
        loss, gradient = self._loss_and_gradient()
        arrays = (
            tf.TensorArray(tf.float32, size + 1).write(0, start),
            tf.TensorArray(tf.float32, size + 1).write(0, loss),
            tf.TensorArray(tf.bool, size),
            tf.TensorArray(tf.bool, size),
        )

        def going(i: tf.Tensor, gradient: tf.Tensor, diverged: tf.Tensor, *arrays: Any) -> Any:
            return (i < steps) & tf.logical_not(diverged)

        def step(i: tf.Tensor, gradient: tf.Tensor, diverged: tf.Tensor, *arrays: Any) -> Any:
            points, losses, projected, clipped = arrays
            self.optimizer.apply([gradient], [self.point])
            loss, gradient = self._loss_and_gradient()
            return (
                i + 1,
                gradient,
                self._diverged(loss),
                points.write(i + 1, tf.convert_to_tensor(self.point.value)),
                losses.write(i + 1, loss),
                projected.write(i, self._flag(PROJECTED)),
                clipped.write(i, self._flag(CLIPPED)),
            )

        taken, _, diverged, *arrays = tf.while_loop(
            going, step, (tf.constant(0), gradient, self._diverged(loss), *arrays)
        )
        return (*(array.stack() for array in arrays), taken, diverged)


def capacity(steps: int) -> int:
    """The length of the arrays a trajectory of `steps` steps is written into: the next
    power of two, at least 64. XLA compiles a loop for arrays of one length; a trajectory
    of 300 steps and one of 500 share the compiled loop of 512, and only a length past the
    last one compiled costs another (a few tenths of a second)."""
    return max(64, 1 << (steps - 1).bit_length())
