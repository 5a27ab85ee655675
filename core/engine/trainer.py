"""`Trainer`: one run's data, model and optimizer, and its instrumented, traced steps.

The training step is a custom loop step (not `model.fit`), traced once for each set of
instruments due at a step (three kinds of step with the default intervals). It keeps running
sums of the loss and accuracy in variables and leaves the optimizer's telemetry in the
optimizer's `stats`, so no value crosses to the host except on a step that logs, when the
step itself returns everything at once: one host round trip per logged step. Under a
`tf.distribute` strategy every statistic comes from all-reduced quantities.

A `Trainer` is made and used in one thread: Keras keeps name and seed state per thread.
"""

from __future__ import annotations

import functools
import hashlib
import math
import threading
from dataclasses import dataclass, field
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from core import data, models, optimizers
from core.engine import instruments
from core.engine.config import TASKS, RunConfig, instrument_intervals

EVAL_BATCH = 500
ALPHA_TERMS = ("f0", "f1", "df0", "df1")
NOISE_SCALE_KEYS = ("noise_scale", "noise_scale/grad_sq", "noise_scale/trace")
# Single noise-scale estimates are noisy: the ratio is taken of running averages.
NOISE_SCALE_DECAY = 0.9
SHARPNESS_ITERATIONS = 10  # warm-started from the last eigenvector
RELEASE_THREAD = "optlab-batches-release"  # see `Trainer.close`
# Below this magnitude a parameter counts as zero for `sparsity/<layer>` (unless pruning
# is on: then the pruning threshold is the line).
ZERO = 1e-6


@dataclass
class Measurements:
    """What a step measured: values for the metrics (logged telemetry and instruments),
    per-layer histograms (`{"edges": [...], "grad"|"weight": {layer: counts}}`) when due,
    and the step the run diverged at, if it has (known on steps that log or measure)."""

    values: dict[str, float] = field(default_factory=dict)
    histograms: dict[str, Any] | None = None
    diverged_at: int | None = None  # the first step with a non-finite loss or weights


def layer_of(path: str) -> str:
    """The layer a variable belongs to: its path without the variable name."""
    return path.rsplit("/", 1)[0] if "/" in path else path


class Trainer:
    """Builds everything a run trains with, in the calling thread, under `strategy`.

    Attributes:
        model, optimizer: What trains.
        steps_per_epoch: Full batches per pass over the training split.
        total_steps: Steps the run will take (epochs, capped by `max_steps`).
        instrument_intervals: Each instrument's interval in steps, 0 when off.
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
        self.instrument_intervals = instrument_intervals(config, self.total_steps)
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
        # The first batch fingerprints the batch order and is the sharpness's fixed batch.
        self._first_batch = next(iter(train.take(1)))
        self.first_batch_sha256 = _sha256(self._first_batch)
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
        self._batches = iter(  # passed into the traced step, which takes each batch
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
        # Instrument state: θ₀ for the distance from init, running averages of the noise
        # scale's terms, and the fixed batch and last eigenvector of the sharpness.
        self._initial = [tf.Variable(tf.convert_to_tensor(v), trainable=False) for v in variables]
        self._noise_averages = tf.Variable(tf.zeros(3), trainable=False)  # grad_sq, trace, n
        rng = tf.random.Generator.from_seed(config.seed)
        self._eigenvector = [tf.Variable(rng.normal(v.shape), trainable=False) for v in variables]
        # TensorFlow counts retraces per function code, so the methods of many trainers
        # would share one count and warn of retracing; a partial is counted on its own.
        self._train_step = tf.function(functools.partial(Trainer._train_step_fn, self))
        self._sharpness = tf.function(functools.partial(Trainer._sharpness_fn, self))
        self._eval_batch = tf.function(functools.partial(Trainer._eval_batch_fn, self))

    # Training ---------------------------------------------------------------------------

    def step(self, step: int, *, log: bool) -> Measurements:
        """Runs optimizer step number `step` (1-based) on the next batch, with the
        instruments whose interval divides `step`; returns what they measured and, when
        `log`, everything to log (running means since the last log, the step's telemetry).

        One call into the traced step, and one host round trip only on steps that log or
        measure something.
        """
        due = self._due(step)
        sharpness = due.pop("sharpness")
        outputs = self._train_step(self._batches, log=log, **due)
        measured = Measurements()
        if log or any(due.values()):
            first_nonfinite = int(outputs["first_nonfinite"])
            measured.diverged_at = first_nonfinite if first_nonfinite >= 0 else None
        if log:
            measured.values |= self._row(outputs["logged"], outputs["per_layer"])
        if due["alpha"]:
            measured.values["alpha"] = float(outputs["alpha"])
        if due["noise_scale"]:
            measured.values |= {key: float(outputs[key]) for key in NOISE_SCALE_KEYS}
        if due["histogram"]:
            measured.histograms = {"edges": instruments.histogram_edges().tolist()}
            for kind in ("grad", "weight"):
                counts = outputs[f"histogram/{kind}"].numpy()
                measured.histograms[kind] = dict(zip(self.layers, counts.tolist(), strict=True))
        if sharpness:
            measured.values["sharpness"] = float(self._sharpness())
        return measured

    def close(self) -> None:
        """Lets go of the model, the optimizer and the traced functions. They hold each
        other in reference cycles (a traced function holds the trainer), which only a full
        garbage collection would free: seconds with every thread stopped, once enough
        finished runs pile up.

        The batch iterator is let go of in a thread of its own: deleting it waits for
        tf.data's autotuning thread, which backs off to sleeps of up to a minute, and a
        run stopped after a minute of training took up to 40 s to end.
        """
        self._train_step = self._sharpness = self._eval_batch = None
        self.model = self.optimizer = None
        held, self._batches = [self._batches], None
        threading.Thread(target=held.clear, name=RELEASE_THREAD, daemon=True).start()

    def measures(self, step: int) -> bool:
        """Whether an instrument measures at `step`."""
        return any(self._due(step).values())

    def _due(self, step: int) -> dict[str, bool]:
        """Which instruments measure at `step` (see `instrument_intervals`)."""
        return {
            name: every > 0 and step % every == 0
            for name, every in self.instrument_intervals.items()
        }

    def set_knob(self, name: str, value: float) -> float:
        """Changes a live optimizer knob from the next step on; returns the value set."""
        return self.optimizer.set_knob(name, value)

    def _train_step_fn(
        self,
        batches: Any,
        *,
        log: bool,
        alpha: bool,
        noise_scale: bool,
        histogram: bool,
    ) -> dict[str, Any]:
        x, y = next(batches)  # in the graph: no Python round trip for the batch
        step = functools.partial(
            self._replica_step, alpha=alpha, noise_scale=noise_scale, histogram=histogram
        )
        per_replica = self.strategy.run(step, args=(x, y))
        outputs: dict[str, tf.Tensor] = {}
        for name, value in per_replica.items():
            if name in self._sums:
                reduce = "MEAN" if name.startswith("grad_norm/") else "SUM"
                total = self.strategy.reduce(reduce, value, axis=None)
                if name.startswith("grad_norm/"):  # the same all-reduced value everywhere
                    self._sums[name].assign(total)
                else:
                    self._sums[name].assign_add(total)
            else:
                # Linear terms add up over replicas; all-reduced ones are alike everywhere.
                reduce = "SUM" if name.startswith("alpha/") else "MEAN"
                outputs[name] = self.strategy.reduce(reduce, value, axis=None)
        loss = self.strategy.reduce("SUM", per_replica["loss"], axis=None)
        finite = tf.math.is_finite(loss)
        if "param_norm" in self.optimizer.stats:
            # A ReLU net can keep a finite loss while NaN weights spread behind dead units.
            finite &= tf.math.is_finite(tf.convert_to_tensor(self.optimizer.stats["param_norm"]))
        first_bad = (self._first_nonfinite < 0) & ~finite
        self._first_nonfinite.assign(
            tf.where(first_bad, self.optimizer.iterations, self._first_nonfinite)
        )
        if alpha:
            outputs["alpha"] = instruments.alpha(*(outputs.pop(f"alpha/{k}") for k in ALPHA_TERMS))
        if noise_scale:
            outputs |= self._noise_scale(outputs.pop("noise/small_sq"), outputs.pop("noise/big_sq"))
        if histogram:
            outputs["histogram/weight"] = self._per_layer_histograms(self.model.trainable_variables)
        outputs["first_nonfinite"] = self._first_nonfinite.read_value()
        if log:
            outputs["logged"], outputs["per_layer"] = self._logged()
        return outputs

    def _replica_step(
        self, x: tf.Tensor, y: Any, *, alpha: bool, noise_scale: bool, histogram: bool
    ) -> dict[str, tf.Tensor]:
        variables = self.model.trainable_variables
        context = tf.distribute.get_replica_context()

        def all_reduced(grads: list[tf.Tensor]) -> list[tf.Tensor]:
            return context.all_reduce("SUM", grads) if context.num_replicas_in_sync > 1 else grads

        out: dict[str, tf.Tensor] = {}
        if noise_scale:
            # Two half batches: their gradients add up to the batch's, and their norms
            # against the whole batch's give the noise scale (McCandlish et al.).
            halves = [self._gradients(*part) for part in _halves(x, y)]
            grads = [a + b for a, b in zip(halves[0][0], halves[1][0], strict=True)]
            sums = {k: halves[0][1][k] + halves[1][1][k] for k in halves[0][1]}
            task_grads = _add_tasks(halves[0][2], halves[1][2])
            # Each half's gradient was averaged over the whole global batch: ×2 for its own.
            small = [all_reduced([2.0 * g for g in half[0]]) for half in halves]
            out["noise/small_sq"] = (
                instruments.dot(small[0], small[0]) + instruments.dot(small[1], small[1])
            ) / 2
            full = all_reduced(grads)
            out["noise/big_sq"] = instruments.dot(full, full)
        else:
            grads, sums, task_grads = self._gradients(x, y)
        out |= sums
        for task, gradient in (task_grads or {}).items():
            out[f"grad_norm/{task}"] = tf.linalg.global_norm(all_reduced(gradient))
        if histogram:
            out["histogram/grad"] = self._per_layer_histograms(all_reduced(grads))
        if alpha:
            before = [tf.identity(v) for v in variables]
        self.optimizer.apply(grads, variables)
        if alpha:
            # The same batch, after the step: loss and slope at both ends of the step d.
            direction = [
                tf.convert_to_tensor(v) - b for v, b in zip(variables, before, strict=True)
            ]
            grads_after, sums_after, _ = self._gradients(x, y)
            batch = float(self.config.batch_size)
            out["alpha/f0"] = sums["loss"] / batch
            out["alpha/f1"] = sums_after["loss"] / batch
            out["alpha/df0"] = instruments.dot(grads, direction)
            out["alpha/df1"] = instruments.dot(grads_after, direction)
        return out

    def _gradients(
        self, x: tf.Tensor, y: Any
    ) -> tuple[list[tf.Tensor], dict[str, tf.Tensor], dict[str, list[tf.Tensor]] | None]:
        """Gradients of this replica's share of the batch loss (averaged over the global
        batch, so they add up over replicas), its running sums, and per-task gradients of
        the multi-task model."""
        variables = self.model.trainable_variables
        multitask = self.config.multitask
        with tf.GradientTape(persistent=multitask) as tape:
            outputs = self.model(x, training=True)
            losses = self._per_example_losses(outputs, y)
            total = self._weighted(losses)
            batch_loss = self._average(total)
            task_losses = {task: self._average(loss) for task, loss in losses.items()}
        sums = {"loss": tf.reduce_sum(total), "count": tf.cast(tf.shape(total)[0], tf.float32)}
        if not multitask:
            sums["correct"] = _correct(outputs, y)
            return tape.gradient(batch_loss, variables), sums, None
        # A head's variables get no gradient from the other task: zeros, not None.
        task_grads = {
            task: [
                tf.zeros(v.shape, v.dtype) if g is None else g
                for g, v in zip(tape.gradient(task_losses[task], variables), variables, strict=True)
            ]
            for task in TASKS
        }
        del tape
        grads = [
            tf.add_n([self.config.task_weights[t] * task_grads[t][i] for t in TASKS])
            for i in range(len(variables))
        ]
        sums |= {f"loss/{task}": tf.reduce_sum(losses[task]) for task in TASKS}
        sums["correct"] = _correct(outputs["digit"], y["digit"])
        sums["correct/parity"] = _correct(outputs["parity"], y["parity"])
        return grads, sums, task_grads

    def _noise_scale(self, small_sq: tf.Tensor, big_sq: tf.Tensor) -> dict[str, tf.Tensor]:
        """B = tr(Σ)/‖G‖² from bias-corrected running averages of both estimates."""
        batch = float(self.config.batch_size)
        grad_sq, trace = instruments.noise_scale_terms(small_sq, big_sq, batch / 2, batch)
        decay = NOISE_SCALE_DECAY
        averages = self._noise_averages.assign(
            decay * self._noise_averages + (1 - decay) * tf.stack([grad_sq, trace, 1.0])
        )
        grad_sq_avg, trace_avg = averages[0] / averages[2], averages[1] / averages[2]
        # Unbiased estimates can come out negative while noise dominates: B is then unknown.
        known = (grad_sq_avg > 0) & (trace_avg > 0)
        scale = tf.where(known, trace_avg / tf.where(known, grad_sq_avg, 1.0), float("nan"))
        return {
            "noise_scale": scale,
            "noise_scale/grad_sq": grad_sq_avg,
            "noise_scale/trace": trace_avg,
        }

    def _per_layer_histograms(self, tensors: list[Any]) -> tf.Tensor:
        """[layers, bins] magnitude histograms, each layer's variables together."""
        return tf.stack(
            [
                instruments.magnitude_histogram(
                    [
                        t
                        for t, v in zip(tensors, self.model.trainable_variables, strict=True)
                        if layer_of(v.path) == layer
                    ]
                )
                for layer in self.layers
            ]
        )

    def _sharpness_fn(self) -> tf.Tensor:
        """The top Hessian eigenvalue of the loss on the run's first batch, by power
        iteration from the previous eigenvector (on all of the batch: the same value an
        all-reduce over replicas would give)."""
        x, y = self._first_batch
        variables = self.model.trainable_variables

        def hvp(vector: list[tf.Tensor]) -> list[tf.Tensor]:
            with tf.GradientTape() as outer:
                with tf.GradientTape() as inner:
                    loss = tf.reduce_mean(
                        self._weighted(self._per_example_losses(self.model(x, training=True), y))
                    )
                grads = inner.gradient(loss, variables)
                slope = instruments.dot(grads, vector)
            return outer.gradient(slope, variables)

        eigenvalue, vector = instruments.power_iteration(
            hvp, [tf.convert_to_tensor(v) for v in self._eigenvector], SHARPNESS_ITERATIONS
        )
        for variable, value in zip(self._eigenvector, vector, strict=True):
            variable.assign(value)
        return eigenvalue

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

    def _row(
        self, logged: dict[str, tf.Tensor], per_layer: dict[str, tf.Tensor]
    ) -> dict[str, float]:
        """The logged tensors as metric values; per-layer ones keyed `kind/layer`."""
        row = {key: float(value) for key, value in logged.items()}
        for key, values in per_layer.items():
            for layer, value in zip(self.layers, values.numpy(), strict=True):
                row[f"{key}/{layer}"] = float(value)
        return row

    def _logged(self) -> tuple[dict[str, tf.Tensor], dict[str, tf.Tensor]]:
        """Means since the last log and the step's telemetry (in the graph); resets the
        running sums."""
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
        if stats:
            out["distance_from_init"] = tf.norm(per_layer["distance_from_init"])
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
        moved = tf.stack(
            [
                2.0 * tf.nn.l2_loss(tf.convert_to_tensor(v) - start)
                for v, start in zip(self.model.trainable_variables, self._initial, strict=True)
            ]
        )
        return {
            "step_norm": step_norm,
            "param_norm": param_norm,
            "update_ratio": step_norm / tf.maximum(param_norm, 1e-12),
            "sparsity": per_layer(zeros) / per_layer(self._sizes),
            "distance_from_init": tf.sqrt(per_layer(moved)),
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


def _halves(x: tf.Tensor, y: Any) -> list[tuple[tf.Tensor, Any]]:
    """The first and second half of a batch (targets may be a dict, for multi-task)."""
    half = tf.shape(x)[0] // 2
    return [
        (x[:half], tf.nest.map_structure(lambda t: t[:half], y)),
        (x[half:], tf.nest.map_structure(lambda t: t[half:], y)),
    ]


def _add_tasks(
    a: dict[str, list[tf.Tensor]] | None, b: dict[str, list[tf.Tensor]] | None
) -> dict[str, list[tf.Tensor]] | None:
    if a is None or b is None:
        return None
    return {task: [x + y for x, y in zip(a[task], b[task], strict=True)] for task in a}
