"""`PrivateGradients`: DP-SGD's gradient (Abadi et al., 2016), in place of the task's.

For a batch B_t of examples i, each sampled with probability q (a Poisson sample of
expected size B = q·n, `core.data.poisson_batches`), with g_i = ∇ℓ_i(θ):

    ḡ_i = g_i · min(1, C / ‖g_i‖₂)                     (each example's gradient clipped)
    g̃  = (Σ_{i ∈ B_t} ḡ_i + N(0, σ²C²·I)) / B          (noise once, divided by B)

‖g_i‖₂ is the norm over every trainable variable at once. For a model of `Dense` and
`Conv2D` layers (every model of the catalog) the clipped sum comes from one backward pass
without any example's gradient (`core.training.ghost_clipping`); for any other, from one
Jacobian of the per-example losses, vectorized (`experimental_use_pfor`): one forward
pass, no loop over the examples, but a gradient per example held at once. B is the
expected batch, not the one drawn: dividing by the drawn size would make the update depend
on it beyond what the accounting covers.

Under a `tf.distribute` strategy each replica returns its share divided by B, which the
optimizer's all-reduce sums, and only the first replica adds the noise: the sum holds it
once, as the accounting assumes, not once per replica. The noise is drawn from the run's
seed, the step and the variable alone (stateless), so that a resumed run draws the same.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from core.training.ghost_clipping import TINY, GhostClipping
from core.training.losses import Gradients, SingleTask


class PrivateGradients:
    """DP-SGD's gradients of a task's loss on `model`, clipped per example to `clip`, with
    Gaussian noise of standard deviation `noise`·`clip` added to their sum, divided by
    `expected_batch`; the noise of step `step` (a variable, read in the traced step) is
    drawn from `(seed, step)`. `ghost=False` takes the Jacobian's way for every model."""

    def __init__(
        self,
        task: SingleTask,
        model: keras.Model,
        *,
        clip: float,
        noise: float,
        expected_batch: float,
        seed: int,
        step: tf.Variable,
        ghost: bool = True,
    ) -> None:
        self.task = task
        self.model = model
        self.clip = float(clip)
        self.noise = float(noise)
        self.expected_batch = float(expected_batch)
        self.seed = int(seed)
        self.step = step
        self.ghost = GhostClipping(model, task) if ghost and GhostClipping.covers(model) else None

    def __call__(self, model: keras.Model, x: tf.Tensor, y: object) -> Gradients:
        """The replica's share of g̃ for the batch `(x, y)`, and the task's sums; `model`
        is the one given at construction (the trainer's gradient functions take it)."""
        if model is not self.model:
            raise ValueError("model: not the model these private gradients were made for")
        variables = model.trainable_variables
        if self.ghost is not None:
            summed, outputs, losses = self.ghost(x, y, self.clip)
        else:
            summed, outputs, losses = self._jacobian_sum(x, y)
        noised = [g + noise for g, noise in zip(summed, self._noise(variables), strict=True)]
        grads = [g / self.expected_batch for g in noised]
        return Gradients(grads, self.task.sums(outputs, y, losses))

    def _jacobian_sum(
        self, x: tf.Tensor, y: object
    ) -> tuple[list[tf.Tensor], object, dict[str, tf.Tensor]]:
        """Σ_i ḡ_i from each example's gradient, the outputs, and the losses by task."""
        with tf.GradientTape() as tape:
            outputs = self.model(x, training=True)
            losses = self.task.losses(outputs, y)
            per_example = self.task.total(losses)
        jacobians = tape.jacobian(
            per_example,
            self.model.trainable_variables,
            unconnected_gradients=tf.UnconnectedGradients.ZERO,
            experimental_use_pfor=True,
        )
        return clipped_sum(jacobians, self.clip), outputs, losses

    def _noise(self, variables: list[tf.Variable]) -> list[tf.Tensor]:
        """N(0, σ²C²) for each variable on the first replica, zeros on the others."""
        context = tf.distribute.get_replica_context()
        first = tf.cast(tf.equal(context.replica_id_in_sync_group, 0), tf.float32)
        seed = tf.stack([tf.constant(self.seed, tf.int64), tf.cast(self.step, tf.int64)])
        return [
            first
            * tf.random.stateless_normal(
                v.shape,
                seed=tf.random.experimental.stateless_fold_in(seed, i),
                stddev=self.noise * self.clip,
                dtype=tf.float32,
            )
            for i, v in enumerate(variables)
        ]


def clipped_sum(jacobians: list[tf.Tensor], clip: float) -> list[tf.Tensor]:
    """Σ_i ḡ_i for per-example gradients `jacobians` (each variable's, `[examples,
    *shape]`), each example's scaled to an L2 norm of at most `clip` over all variables."""
    squares = [
        tf.reduce_sum(tf.reshape(tf.square(j), [tf.shape(j)[0], -1]), axis=1) for j in jacobians
    ]
    norms = tf.sqrt(tf.add_n(squares))
    scale = tf.minimum(1.0, clip / tf.maximum(norms, TINY))
    return [tf.tensordot(scale, j, axes=1) for j in jacobians]
