"""What a run learns: one classification head, a regression's one prediction, or the
multi-task model's two heads (the class and its parity, `TASKS`) trained on a weighted sum
of their losses.

The Trainer asks its task for losses, gradients and the sums it keeps between logs, and
never branches on multi-task itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import keras
import tensorflow as tf

from core.knobs import InvalidInput
from core.series import SeriesKey
from core.training.config import TASKS, RunConfig
from core.training.live import weighted_task


@dataclass
class Gradients:
    """One replica's gradients of its share of the batch loss (averaged over the global
    batch, so they add up over replicas), its sums for the logged means (`loss`, `count`,
    `accuracy`, ...), and per-task gradients of the multi-task model (else None)."""

    grads: list[tf.Tensor]
    sums: dict[str, tf.Tensor]
    per_task: dict[str, list[tf.Tensor]] | None = None

    def __add__(self, other: Gradients) -> Gradients:
        """Both parts of a batch together (the noise scale measures two halves)."""
        per_task = None
        if self.per_task is not None and other.per_task is not None:
            per_task = {
                task: _added(grads, other.per_task[task]) for task, grads in self.per_task.items()
            }
        sums = {key: value + other.sums[key] for key, value in self.sums.items()}
        return Gradients(_added(self.grads, other.grads), sums, per_task)


class SingleTask:
    """One head: the class, by cross-entropy on the logits.

    Attributes:
        means: The sums kept between logs that are logged as means per example (besides
            `loss`); `last_values` those logged as their last value.
    """

    means: tuple[str, ...] = ("accuracy",)
    last_values: tuple[str, ...] = ()

    def __init__(self, global_batch: int) -> None:
        self.global_batch = global_batch
        self.weights: dict[str, tf.Variable] = {}  # a multi-task run's loss weights
        # A float16 run's loss scale S (see `core.training.precision`): the loss is
        # differentiated times S, and the gradients divided by S again (exactly: S is a
        # power of two), so everything after sees the true gradients.
        self.loss_scale: tf.Variable | None = None

    @property
    def variables(self) -> list[tf.Variable]:
        """What a checkpoint keeps of the task: a multi-task run's loss weights."""
        return list(self.weights.values())

    def weight(self, knob: str) -> tf.Variable:
        """The variable of the knob `task_weight/<task>`; raises `InvalidInput` naming the
        knob when the run has no such task weight."""
        task = weighted_task(knob)
        weight = None if task is None else self.weights.get(task)
        if weight is None:
            raise InvalidInput({knob: "is not a task weight of this run"})
        return weight

    def get_knob(self, knob: str) -> float:
        """The current value of the task weight `knob`."""
        return float(self.weight(knob).numpy())

    def set_knob(self, knob: str, value: float) -> float:
        """Sets the task weight `knob` from the next step on; returns the value set."""
        self.weight(knob).assign(float(value))
        return float(value)

    def losses(self, outputs: Any, y: Any) -> dict[str, tf.Tensor]:
        """Per-example losses, by task (in float32, whatever the layers compute in)."""
        return {TASKS[0]: _cross_entropy(y, outputs)}

    def total(self, losses: Mapping[str, tf.Tensor]) -> tf.Tensor:
        """The training loss per example."""
        return losses[TASKS[0]]

    def scores(self, outputs: Any, y: Any) -> dict[str, tf.Tensor]:
        """The batch's sums of what is logged as a mean besides the loss (`means`): the
        correct predictions, `accuracy`, and one per further task."""
        return {"accuracy": _correct(outputs, y)}

    def sums(self, outputs: Any, y: Any, losses: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """The batch's sums of the loss, the examples and the scores."""
        total = self.total(losses)
        count = tf.cast(tf.shape(total)[0], tf.float32)
        return {"loss": tf.reduce_sum(total), "count": count, **self.scores(outputs, y)}

    def gradients(self, model: keras.Model, x: tf.Tensor, y: Any) -> Gradients:
        variables = model.trainable_variables
        with tf.GradientTape() as tape:
            outputs = model(x, training=True)
            losses = self.losses(outputs, y)
            loss = self._scaled(self._average(self.total(losses)))
        grads = self._unscaled(tape.gradient(loss, variables))
        return Gradients(grads, self.sums(outputs, y, losses))

    def compile_arguments(self) -> dict[str, Any]:
        """What `keras.Model.compile` takes to train the same loss (for a saved model)."""
        return {
            "loss": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            "metrics": ["accuracy"],
        }

    def _scaled(self, loss: tf.Tensor) -> tf.Tensor:
        return loss if self.loss_scale is None else loss * self.loss_scale

    def _unscaled(self, grads: list[tf.Tensor]) -> list[tf.Tensor]:
        if self.loss_scale is None:
            return grads
        return [None if g is None else g / tf.cast(self.loss_scale, g.dtype) for g in grads]

    def _average(self, per_example: tf.Tensor) -> tf.Tensor:
        # Divided by the global batch: summed over replicas, it is the batch mean.
        return tf.nn.compute_average_loss(per_example, global_batch_size=self.global_batch)


class MultiTask(SingleTask):
    """Two heads, `{"digit": logits, "parity": logits}`, trained on Σ weight·loss; each
    task's loss, accuracy and gradient norm are logged too."""

    means = (
        "accuracy",  # the digit's: the model's main task
        *(SeriesKey("loss", task).format() for task in TASKS),
        SeriesKey("accuracy", "parity").format(),
    )
    last_values = tuple(SeriesKey("grad_norm", task).format() for task in TASKS)

    def __init__(self, global_batch: int, weights: Mapping[str, float]) -> None:
        super().__init__(global_batch)
        # Variables the traced step reads: a live change of a weight needs no retrace.
        self.weights = {
            task: tf.Variable(float(weights[task]), trainable=False, name=f"task_weight_{task}")
            for task in TASKS
        }

    def losses(self, outputs: Any, y: Any) -> dict[str, tf.Tensor]:
        return {task: _cross_entropy(y[task], outputs[task]) for task in TASKS}

    def total(self, losses: Mapping[str, tf.Tensor]) -> tf.Tensor:
        return tf.add_n([self.weights[task] * losses[task] for task in TASKS])

    def compile_arguments(self) -> dict[str, Any]:
        return {
            "loss": {
                task: keras.losses.SparseCategoricalCrossentropy(from_logits=True) for task in TASKS
            },
            "loss_weights": {task: float(weight) for task, weight in self.weights.items()},
            "metrics": {task: ["accuracy"] for task in TASKS},
        }

    def scores(self, outputs: Any, y: Any) -> dict[str, tf.Tensor]:
        return {
            "accuracy": _correct(outputs["digit"], y["digit"]),
            SeriesKey("accuracy", "parity").format(): _correct(outputs["parity"], y["parity"]),
        }

    def sums(self, outputs: Any, y: Any, losses: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        per_task = {SeriesKey("loss", task).format(): tf.reduce_sum(losses[task]) for task in TASKS}
        return super().sums(outputs, y, losses) | per_task

    def gradients(self, model: keras.Model, x: tf.Tensor, y: Any) -> Gradients:
        variables = model.trainable_variables
        with tf.GradientTape(persistent=True) as tape:
            outputs = model(x, training=True)
            losses = self.losses(outputs, y)
            task_losses = {task: self._scaled(self._average(loss)) for task, loss in losses.items()}
        # A head's variables get no gradient from the other task: zeros, not None.
        per_task = {
            task: [
                tf.zeros(v.shape, v.dtype) if g is None else g
                for g, v in zip(
                    self._unscaled(tape.gradient(task_losses[task], variables)),
                    variables,
                    strict=True,
                )
            ]
            for task in TASKS
        }
        del tape
        grads = [
            tf.add_n([self.weights[task] * per_task[task][i] for task in TASKS])
            for i in range(len(variables))
        ]
        return Gradients(grads, self.sums(outputs, y, losses), per_task)


class Regression(SingleTask):
    """One prediction per example, by the squared error; the absolute error is logged as
    its mean, `mae`."""

    means = ("mae",)

    def losses(self, outputs: Any, y: Any) -> dict[str, tf.Tensor]:
        return {TASKS[0]: tf.square(_prediction(outputs) - tf.cast(y, tf.float32))}

    def scores(self, outputs: Any, y: Any) -> dict[str, tf.Tensor]:
        """The batch's sum of absolute errors, `mae`."""
        return {"mae": tf.reduce_sum(tf.abs(_prediction(outputs) - tf.cast(y, tf.float32)))}

    def compile_arguments(self) -> dict[str, Any]:
        return {"loss": keras.losses.MeanSquaredError(), "metrics": ["mae"]}


def task_of(config: RunConfig, problem: str = "classification") -> SingleTask:
    """The task a run's config trains on a dataset of `problem` (see `PROBLEMS`)."""
    if config.multitask:
        return MultiTask(config.batch_size, config.task_weights)
    if problem == "regression":
        return Regression(config.batch_size)
    return SingleTask(config.batch_size)


def _prediction(outputs: tf.Tensor) -> tf.Tensor:
    """A regression model's `(batch, 1)` output as `(batch,)`."""
    return tf.cast(tf.squeeze(outputs, axis=-1), tf.float32)


def _cross_entropy(labels: tf.Tensor, logits: tf.Tensor) -> tf.Tensor:
    logits = tf.cast(logits, tf.float32)  # a 16-bit run's: the softmax in float32
    return keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)


def _correct(logits: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
    predicted = tf.argmax(logits, axis=-1, output_type=labels.dtype)
    return tf.reduce_sum(tf.cast(predicted == labels, tf.float32))


def _added(a: list[tf.Tensor], b: list[tf.Tensor]) -> list[tf.Tensor]:
    return [x + y for x, y in zip(a, b, strict=True)]
