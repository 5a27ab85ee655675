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
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from core import data, models, optimizers
from core.engine import precision
from core.engine.config import LR_FIND, RunConfig, instrument_intervals
from core.engine.instruments import INSTRUMENTS, Instrument, Measurements, ReplicaStep
from core.engine.live import TASK_WEIGHT
from core.engine.tasks import task_of
from core.engine.telemetry import Telemetry
from core.optimizers.schedules import RANGE_TEST, LiveSchedule

__all__ = ["Measurements", "Trainer"]

EVAL_BATCH = 500
RELEASE_THREAD = "optlab-batches-release"  # see `Trainer.close`


class Trainer:
    """Builds everything a run trains with, in the calling thread, under `strategy`.

    Attributes:
        model, optimizer: What trains.
        task: What the model learns (losses, gradients, the sums logged as means).
        telemetry: The running sums and the logged row.
        steps_per_epoch: Full batches per pass over the training split.
        total_steps: Steps the run will take (epochs, capped by `max_steps`).
        instrument_intervals: Each instrument's interval in steps, 0 when off.
        layers: The layer names that per-layer statistics are keyed by.
        first_batch: The run's first batch (the sharpness's fixed batch).

    A trainer made with `start=S` takes the batches of steps S + 1 on; `restore` then
    gives it the state a checkpoint of step S saved, and it continues that run exactly.
    """

    def __init__(
        self, config: RunConfig, strategy: tf.distribute.Strategy, *, start: int = 0
    ) -> None:
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

        split = functools.partial(
            data.pipeline, dataset, seed=config.batch_seed, multitask=config.multitask
        )
        epochs = math.ceil(self.total_steps / self.steps_per_epoch)
        batches = functools.partial(
            split, "train", batch_size=config.batch_size, drop_remainder=True, epochs=epochs
        )
        train = batches(start=start)
        self._test = split("test", batch_size=EVAL_BATCH, epochs=1)
        # The first batch fingerprints the batch order.
        self.first_batch = next(iter(batches().take(1)))
        self.first_batch_sha256 = _sha256(self.first_batch)
        with strategy.scope():
            with precision.policy(config.precision):
                self.model = models.build(
                    config.model,
                    input_shape=dataset.input_shape,
                    num_classes=dataset.num_classes,
                    seed=config.seed,
                    multitask=config.multitask,
                )
            self.optimizer = optimizers.build(
                config.optimizer,
                **self._scheduled(config.hyperparameters),
                telemetry=config.telemetry,
            )
            self.optimizer.build(self.model.trainable_variables)
            self.scaler = precision.loss_scaler(config.precision, self.optimizer)
            if self.scaler is not None:
                self.scaler.build(self.model.trainable_variables)
        self.weights_sha256 = _sha256(self.model.get_weights())
        self._batches = iter(  # passed into the traced step, which takes each batch
            strategy.experimental_distribute_dataset(train)
            if strategy.num_replicas_in_sync > 1
            else train
        )
        self.task = task_of(config, dataset.problem)
        if self.scaler is not None:
            self.task.loss_scale = self.scaler.dynamic_scale
        self.telemetry = Telemetry(self.model, self.optimizer, self.task)
        self.layers = self.telemetry.layers
        self._first_nonfinite = tf.Variable(tf.constant(-1, tf.int64), trainable=False)
        self._saver: tf.train.Checkpoint | None = None
        self.instruments: dict[str, Instrument] = {
            name: INSTRUMENTS[name](self)
            for name, every in self.instrument_intervals.items()
            if every > 0
        }
        # TensorFlow counts retraces per function code, so the methods of many trainers
        # would share one count and warn of retracing; a partial is counted on its own.
        self._train_step = tf.function(functools.partial(Trainer._train_step_fn, self))
        self._eval_batch = tf.function(functools.partial(Trainer._eval_batch_fn, self))
        self._traces: dict[tuple[bool, tuple[str, ...]], Callable[..., dict[str, Any]]] = {}

    def _scheduled(self, hyperparameters: Mapping[str, Any]) -> dict[str, Any]:
        """The hyperparameters, the learning rate a `LiveSchedule` when the run has one
        (a range test always has one)."""
        config = self.config
        range_test = config.kind == LR_FIND
        if config.lr_schedule == "constant" and config.warmup_steps == 0 and not range_test:
            return dict(hyperparameters)
        schedule = LiveSchedule(
            hyperparameters["learning_rate"],  # every knob is filled in: the peak
            RANGE_TEST if range_test else config.lr_schedule,
            config.warmup_steps,
            self.total_steps,
            start_rate=config.lr_find_start if range_test else None,
        )
        return {**hyperparameters, "learning_rate": schedule}

    # Training ---------------------------------------------------------------------------

    def step(self, step: int, *, log: bool) -> Measurements:
        """Runs optimizer step number `step` (1-based) on the next batch, with the
        instruments whose interval divides `step`; returns what they measured and, when
        `log`, everything to log (running means since the last log, the step's telemetry).

        One call into the traced step, and one host round trip only on steps that log or
        measure something.
        """
        due = [self.instruments[name] for name in self._due(step)]
        traced = tuple(instrument.name for instrument in due if instrument.traced)
        outputs = self._traced_step(log, traced)(self._batches, log=log, due=traced)
        measured = Measurements()
        if log or due:
            first_nonfinite = int(outputs["first_nonfinite"])
            measured.diverged_at = first_nonfinite if first_nonfinite >= 0 else None
        if log:
            measured.values |= self.telemetry.row(outputs["logged"], outputs["per_layer"])
        for instrument in due:
            instrument.read(outputs, measured)
        return measured

    def _traced_step(self, log: bool, due: tuple[str, ...]) -> Callable[..., dict[str, Any]]:
        """The training step traced for this mix of logging and instruments, as a concrete
        function: calling the `tf.function` matches the arguments against its traces
        first, each step (0.5 ms in Python, 8% of a LeNet step); its trace does not."""
        key = (log, due)
        if key not in self._traces:
            self._traces[key] = self._train_step.get_concrete_function(
                self._batches, log=log, due=due
            )
        return self._traces[key]

    def close(self) -> None:
        """Lets go of the model, the optimizer and the traced functions. They hold each
        other in reference cycles (a traced function holds the trainer), which only a full
        garbage collection would free: seconds with every thread stopped, once enough
        finished runs pile up.

        The batch iterator is let go of in a thread of its own: deleting it waits for
        tf.data's autotuning thread, which backs off to sleeps of up to a minute, and a
        run stopped after a minute of training took up to 40 s to end.
        """
        for instrument in self.instruments.values():
            instrument.close()
        self._train_step = self._eval_batch = self._saver = None
        self._traces = {}
        self.model = self.optimizer = self.scaler = self.telemetry = None
        self.instruments = {}
        held, self._batches = [self._batches], None
        threading.Thread(target=held.clear, name=RELEASE_THREAD, daemon=True).start()

    # Checkpoints ------------------------------------------------------------------------

    @property
    def state(self) -> list[tf.Variable]:
        """Every variable that the steps after this one depend on: the model's, the
        optimizer's (slots, iterations, live knobs, error feedback), the running sums and
        initial weights of the telemetry, the instruments' running state, and a multi-task
        run's loss weights. With the
        batch position (`start`), the whole state of a run: the batch order and the
        gradient noise are functions of the seed and the step."""
        return [
            *self.model.variables,
            *self.optimizer.variables,
            *self.telemetry.variables,
            *(v for instrument in self.instruments.values() for v in instrument.variables),
            *self.task.variables,
            *self._scaler_variables(),
            self._first_nonfinite,
        ]

    def _scaler_variables(self) -> list[tf.Variable]:
        """A float16 run's loss scale and its count of finite steps since it last grew."""
        return [] if self.scaler is None else [self.scaler.step_counter, self.scaler.dynamic_scale]

    def save(self, prefix: str) -> None:
        """Writes `state` to the TensorFlow checkpoint `prefix` (`.index` and `.data-*`)."""
        self._checkpoint().write(prefix)

    def restore(self, prefix: str) -> None:
        """Reads `state` back from `prefix`; raises if the checkpoint does not fit."""
        self._checkpoint().read(prefix).assert_consumed()

    def _checkpoint(self) -> tf.train.Checkpoint:
        """One `tf.train.Checkpoint` of `state` for the run: made once, not per save."""
        if self._saver is None:
            self._saver = tf.train.Checkpoint(state=self.state)
        return self._saver

    def measures(self, step: int) -> bool:
        """Whether an instrument measures at `step`."""
        return bool(self._due(step))

    def _due(self, step: int) -> list[str]:
        """The instruments that measure at `step` (see `instrument_intervals`)."""
        return [
            name
            for name, every in self.instrument_intervals.items()
            if every > 0 and step % every == 0
        ]

    def get_knob(self, name: str) -> Any:
        """The current value of a knob: the optimizer's, or a task weight."""
        if name.startswith(TASK_WEIGHT):
            return float(self.task.weight(name).numpy())
        return self.optimizer.get_knob(name)

    def set_knob(self, name: str, value: float) -> float:
        """Changes a live knob (see `core.engine.live`, which checks the value) from the
        next step on; returns the value set."""
        if name.startswith(TASK_WEIGHT):
            self.task.weight(name).assign(float(value))
            return float(value)
        return self.optimizer.set_knob(name, value)

    def _train_step_fn(self, batches: Any, *, log: bool, due: tuple[str, ...]) -> dict[str, Any]:
        x, y = next(batches)  # in the graph: no Python round trip for the batch
        instruments = [self.instruments[name] for name in due]
        replica_step = functools.partial(self._replica_step, instruments=instruments)
        per_replica = self.strategy.run(replica_step, args=(x, y))
        self.telemetry.accumulate(per_replica, self.strategy)
        summed = frozenset().union(*(instrument.summed for instrument in instruments))
        outputs = {
            name: self.strategy.reduce("SUM" if name in summed else "MEAN", value, axis=None)
            for name, value in per_replica.items()
            if not self.telemetry.owns(name)
        }
        self._check_finite(self.strategy.reduce("SUM", per_replica["loss"], axis=None))
        for instrument in instruments:
            instrument.finish(outputs)
        outputs["first_nonfinite"] = self._first_nonfinite.read_value()
        if log:
            outputs["logged"], outputs["per_layer"] = self.telemetry.logged()
        return outputs

    def _replica_step(
        self, x: tf.Tensor, y: Any, *, instruments: list[Instrument]
    ) -> dict[str, tf.Tensor]:
        context = tf.distribute.get_replica_context()

        def all_reduced(grads: list[tf.Tensor]) -> list[tf.Tensor]:
            return context.all_reduce("SUM", grads) if context.num_replicas_in_sync > 1 else grads

        variables = self.model.trainable_variables
        gradients = functools.partial(self.task.gradients, self.model)
        step = ReplicaStep(x, y, variables, gradients, all_reduced)
        taken = (instrument.gradients(step) for instrument in instruments)
        step.computed = next((g for g in taken if g is not None), None) or gradients(x, y)
        for task, grads in (step.computed.per_task or {}).items():
            step.terms[f"grad_norm/{task}"] = tf.linalg.global_norm(all_reduced(grads))
        before = [instrument.before_update(step) for instrument in instruments]
        self._apply(step.computed.grads, variables)
        for instrument, state in zip(instruments, before, strict=True):
            instrument.after_update(step, state)
        return step.computed.sums | step.terms

    def _apply(self, grads: list[tf.Tensor], variables: list[tf.Variable]) -> None:
        """The optimizer's step; a float16 run's through Keras's loss scaling, which skips
        a step whose gradients overflowed and adapts the scale. The gradients are the
        true ones (see `SingleTask.loss_scale`): scaled again, exactly, for it to unscale."""
        if self.scaler is None:
            self.optimizer.apply(grads, variables)
            return
        scale = self.scaler.dynamic_scale
        self.scaler.apply([g * tf.cast(scale, g.dtype) for g in grads], variables)

    def _check_finite(self, loss: tf.Tensor) -> None:
        """Records the first step with a non-finite loss or parameter norm."""
        finite = tf.math.is_finite(loss)
        if "param_norm" in self.optimizer.stats:
            # A ReLU net can keep a finite loss while NaN weights spread behind dead units.
            finite &= tf.math.is_finite(tf.convert_to_tensor(self.optimizer.stats["param_norm"]))
        first_bad = (self._first_nonfinite < 0) & ~finite
        self._first_nonfinite.assign(
            tf.where(first_bad, self.optimizer.iterations, self._first_nonfinite)
        )

    # Validation -------------------------------------------------------------------------

    def evaluate(self) -> dict[str, float]:
        """Loss and the task's scores (accuracy, or mean absolute error) on the whole
        test split."""
        totals: dict[str, float] = {}
        for batch in self._test:
            for key, value in self._eval_batch(*batch).items():
                totals[key] = totals.get(key, 0.0) + float(value)
        count = max(totals.pop("count"), 1.0)
        return {f"val_{key}": value / count for key, value in totals.items()}

    def _eval_batch_fn(self, x: tf.Tensor, y: Any) -> dict[str, tf.Tensor]:
        outputs = self.model(x, training=False)
        total = self.task.total(self.task.losses(outputs, y))
        sums = {"loss": tf.reduce_sum(total), "count": tf.cast(tf.shape(total)[0], tf.float32)}
        return sums | self.task.scores(outputs, y)


def _sha256(arrays: Any) -> str:
    digest = hashlib.sha256()
    for array in tf.nest.flatten(arrays):
        digest.update(np.ascontiguousarray(np.asarray(array)).tobytes())
    return digest.hexdigest()
