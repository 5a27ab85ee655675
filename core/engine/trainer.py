"""`Trainer`: one run's data, model and optimizer, and its instrumented, traced steps.

The training step is a custom loop step (not `model.fit`), traced once. It keeps running
sums of the loss and accuracy in variables and leaves the optimizer's telemetry in the
optimizer's `stats`, so no value crosses to the host until `snapshot()` reads everything
at once: one host round trip per logged step, however often steps run. Under a
`tf.distribute` strategy every statistic comes from all-reduced quantities.

A `Trainer` is made and used in one thread: Keras keeps name and seed state per thread.
"""

from __future__ import annotations

import functools
import hashlib
import math
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from core import data, models, optimizers
from core.engine.config import TASKS, RunConfig

EVAL_BATCH = 500
# Below this magnitude a parameter counts as zero for `sparsity/<layer>` (unless pruning
# is on: then the pruning threshold is the line).
ZERO = 1e-6


def layer_of(path: str) -> str:
    """The layer a variable belongs to: its path without the variable name."""
    return path.rsplit("/", 1)[0] if "/" in path else path


class Trainer:
    """Builds everything a run trains with, in the calling thread, under `strategy`.

    Attributes:
        model, optimizer: What trains.
        steps_per_epoch: Full batches per pass over the training split.
        total_steps: Steps the run will take (epochs, capped by `max_steps`).
        layers: The layer names that per-layer statistics are keyed by.
    """

    def __init__(self, config: RunConfig, strategy: tf.distribute.Strategy) -> None:
        self.config = config
        self.strategy = strategy
        dataset = data.load(config.dataset, data_dir=config.data_dir)
        self.steps_per_epoch = len(dataset.y_train) // config.batch_size
        if self.steps_per_epoch == 0:
            raise ValueError(
                f"batch_size: larger than the training split ({len(dataset.y_train)} examples)"
            )
        self.total_steps = config.epochs * self.steps_per_epoch
        if config.max_steps is not None:
            self.total_steps = min(self.total_steps, config.max_steps)
        epochs_needed = math.ceil(self.total_steps / self.steps_per_epoch)

        train = data.pipeline(
            dataset,
            "train",
            batch_size=config.batch_size,
            seed=config.seed,
            drop_remainder=True,
            epochs=epochs_needed,
            multitask=config.multitask,
        )
        self._test = data.pipeline(
            dataset,
            "test",
            batch_size=EVAL_BATCH,
            seed=config.seed,
            epochs=1,
            multitask=config.multitask,
        )
        self.first_batch_sha256 = _sha256(next(iter(train.take(1))))
        with strategy.scope():
            self.model = models.build(
                config.model,
                input_shape=dataset.input_shape,
                num_classes=dataset.num_classes,
                seed=config.seed,
                multitask=config.multitask,
            )
            self.optimizer = optimizers.build(
                config.optimizer, **config.hyperparameters, telemetry=config.telemetry
            )
            self.optimizer.build(self.model.trainable_variables)
        self.weights_sha256 = _sha256(self.model.get_weights())
        self._batches = iter(
            strategy.experimental_distribute_dataset(train)
            if strategy.num_replicas_in_sync > 1
            else train
        )

        variables = self.model.trainable_variables
        self.layers = list(dict.fromkeys(layer_of(v.path) for v in variables))
        self._segments = tf.constant([self.layers.index(layer_of(v.path)) for v in variables])
        self._sizes = tf.constant([float(v.shape.num_elements()) for v in variables])
        # Host-side sums since the last snapshot: created outside the strategy, written in
        # cross-replica context only.
        names = ["loss", "correct", "count"]
        if config.multitask:
            names += [
                "loss/digit",
                "loss/parity",
                "correct/parity",
                "grad_norm/digit",
                "grad_norm/parity",
            ]
        self._sums = {n: tf.Variable(0.0, trainable=False, name=n.replace("/", "_")) for n in names}
        self._first_nonfinite = tf.Variable(tf.constant(-1, tf.int64), trainable=False)
        # TensorFlow counts retraces per function code, so the methods of many trainers
        # would share one count and warn of retracing; a partial is counted on its own.
        self._train_step = tf.function(functools.partial(Trainer._train_step_fn, self))
        self._snapshot = tf.function(functools.partial(Trainer._snapshot_fn, self))
        self._eval_batch = tf.function(functools.partial(Trainer._eval_batch_fn, self))

    # Training ---------------------------------------------------------------------------

    def step(self) -> None:
        """Runs one optimizer step on the next batch."""
        self._train_step(next(self._batches))

    def set_knob(self, name: str, value: float) -> float:
        """Changes a live optimizer knob from the next step on; returns the value set."""
        return self.optimizer.set_knob(name, value)

    def diverged_at(self) -> int | None:
        """The first step whose loss (or, with telemetry, parameter norm) was not finite,
        if any (reads one scalar)."""
        step = int(self._first_nonfinite.numpy())
        return None if step < 0 else step

    def _train_step_fn(self, batch: tuple[Any, Any]) -> None:
        x, y = batch
        sums = self.strategy.run(self._replica_step, args=(x, y))
        for name, value in sums.items():
            if name.startswith("grad_norm/"):  # the same all-reduced value in every replica
                self._sums[name].assign(self.strategy.reduce("MEAN", value, axis=None))
            else:
                self._sums[name].assign_add(self.strategy.reduce("SUM", value, axis=None))
        loss = self.strategy.reduce("SUM", sums["loss"], axis=None)
        finite = tf.math.is_finite(loss)
        if "param_norm" in self.optimizer.stats:
            # A ReLU net can keep a finite loss while NaN weights spread behind dead units.
            finite &= tf.math.is_finite(tf.convert_to_tensor(self.optimizer.stats["param_norm"]))
        first_bad = (self._first_nonfinite < 0) & ~finite
        self._first_nonfinite.assign(
            tf.where(first_bad, self.optimizer.iterations, self._first_nonfinite)
        )

    def _replica_step(self, x: tf.Tensor, y: Any) -> dict[str, tf.Tensor]:
        variables = self.model.trainable_variables
        multitask = self.config.multitask
        with tf.GradientTape(persistent=multitask) as tape:
            outputs = self.model(x, training=True)
            losses = self._per_example_losses(outputs, y)
            total = self._weighted(losses)
            batch_loss = self._average(total)
            task_losses = {task: self._average(loss) for task, loss in losses.items()}
        sums = {"loss": tf.reduce_sum(total), "count": tf.cast(tf.shape(total)[0], tf.float32)}
        if multitask:
            # A head's variables get no gradient from the other task: zeros, not None.
            task_grads = {
                task: [
                    tf.zeros(v.shape, v.dtype) if g is None else g
                    for g, v in zip(
                        tape.gradient(task_losses[task], variables), variables, strict=True
                    )
                ]
                for task in TASKS
            }
            del tape
            grads = [
                tf.add_n([self.config.task_weights[t] * task_grads[t][i] for t in TASKS])
                for i in range(len(variables))
            ]
            context = tf.distribute.get_replica_context()
            for task in TASKS:
                reduced = (
                    context.all_reduce("SUM", task_grads[task])
                    if context.num_replicas_in_sync > 1
                    else task_grads[task]
                )
                sums[f"grad_norm/{task}"] = tf.linalg.global_norm(reduced)
                sums[f"loss/{task}"] = tf.reduce_sum(losses[task])
            sums["correct"] = _correct(outputs["digit"], y["digit"])
            sums["correct/parity"] = _correct(outputs["parity"], y["parity"])
        else:
            grads = tape.gradient(batch_loss, variables)
            sums["correct"] = _correct(outputs, y)
        self.optimizer.apply(grads, variables)
        return sums

    def _per_example_losses(self, outputs: Any, y: Any) -> dict[str, tf.Tensor]:
        if self.config.multitask:
            return {t: _cross_entropy(y[t], outputs[t]) for t in TASKS}
        return {"digit": _cross_entropy(y, outputs)}

    def _weighted(self, losses: dict[str, tf.Tensor]) -> tf.Tensor:
        """The training loss per example: the task-weighted sum for the multi-task model."""
        if not self.config.multitask:
            return losses["digit"]
        return tf.add_n([self.config.task_weights[t] * losses[t] for t in TASKS])

    def _average(self, per_example: tf.Tensor) -> tf.Tensor:
        # Divided by the global batch: summed over replicas, it is the batch mean.
        return tf.nn.compute_average_loss(per_example, global_batch_size=self.config.batch_size)

    # Telemetry --------------------------------------------------------------------------

    def snapshot(self) -> dict[str, float]:
        """Everything to log now: means since the last snapshot, and the last step's
        telemetry. One host round trip; resets the running sums."""
        scalars, per_layer = self._snapshot()
        row = {key: float(value) for key, value in scalars.items()}
        for key, values in per_layer.items():
            for layer, value in zip(self.layers, values.numpy(), strict=True):
                row[f"{key}/{layer}"] = float(value)
        return row

    def _snapshot_fn(self) -> tuple[dict[str, tf.Tensor], dict[str, tf.Tensor]]:
        sums = {k: v.read_value() for k, v in self._sums.items()}
        count = tf.maximum(sums["count"], 1.0)
        out = {"loss": sums["loss"] / count, "accuracy": sums["correct"] / count}
        if self.config.multitask:
            out |= {f"loss/{t}": sums[f"loss/{t}"] / count for t in TASKS}
            out["accuracy/parity"] = sums["correct/parity"] / count
            out |= {f"grad_norm/{t}": sums[f"grad_norm/{t}"] for t in TASKS}
        for name, variable in self.optimizer.live_variables.items():
            out[name] = tf.cast(variable, tf.float32)
        stats = self.optimizer.stats
        per_layer = self._layer_statistics(stats) if stats else {}
        out |= {
            name: tf.convert_to_tensor(stats[name])
            for name in stats
            if name in optimizers.SCALAR_STATS
        }
        for name, variable in self._sums.items():
            if not name.startswith("grad_norm/"):
                variable.assign(0.0)
        return out, per_layer

    def _layer_statistics(self, stats: dict[str, keras.Variable]) -> dict[str, tf.Tensor]:
        def per_layer(per_variable: tf.Tensor) -> tf.Tensor:
            return tf.math.unsorted_segment_sum(per_variable, self._segments, len(self.layers))

        step_norm = tf.sqrt(per_layer(tf.convert_to_tensor(stats["step_sq"])))
        param_norm = tf.sqrt(per_layer(tf.convert_to_tensor(stats["param_sq"])))
        threshold = self.optimizer.live_variables.get("prune_threshold")
        zero = tf.constant(ZERO) if threshold is None else tf.cast(threshold, tf.float32)
        zeros = tf.stack(
            [
                tf.reduce_sum(tf.cast(tf.abs(v) < zero, tf.float32))
                for v in self.model.trainable_variables
            ]
        )
        return {
            "step_norm": step_norm,
            "param_norm": param_norm,
            "update_ratio": step_norm / tf.maximum(param_norm, 1e-12),
            "sparsity": per_layer(zeros) / per_layer(self._sizes),
        }

    # Validation -------------------------------------------------------------------------

    def evaluate(self) -> dict[str, float]:
        """Loss and accuracy on the whole test split."""
        totals: dict[str, float] = {}
        for batch in self._test:
            for key, value in self._eval_batch(*batch).items():
                totals[key] = totals.get(key, 0.0) + float(value)
        count = max(totals.pop("count"), 1.0)
        return {f"val_{key}": value / count for key, value in totals.items()}

    def _eval_batch_fn(self, x: tf.Tensor, y: Any) -> dict[str, tf.Tensor]:
        outputs = self.model(x, training=False)
        losses = self._per_example_losses(outputs, y)
        total = self._weighted(losses)
        sums = {"loss": tf.reduce_sum(total), "count": tf.cast(tf.shape(total)[0], tf.float32)}
        if self.config.multitask:
            sums["accuracy"] = _correct(outputs["digit"], y["digit"])
            sums["accuracy/parity"] = _correct(outputs["parity"], y["parity"])
        else:
            sums["accuracy"] = _correct(outputs, y)
        return sums


def _cross_entropy(labels: tf.Tensor, logits: tf.Tensor) -> tf.Tensor:
    return keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)


def _correct(logits: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
    predicted = tf.argmax(logits, axis=-1, output_type=labels.dtype)
    return tf.reduce_sum(tf.cast(predicted == labels, tf.float32))


def _sha256(arrays: Any) -> str:
    digest = hashlib.sha256()
    for array in tf.nest.flatten(arrays):
        digest.update(np.ascontiguousarray(np.asarray(array)).tobytes())
    return digest.hexdigest()
