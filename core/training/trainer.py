"""`Trainer`: one run's data, model and optimizer, and its instrumented, traced steps.

The training step is a custom loop step (not `model.fit`), traced once for each set of
instruments due at a step (three kinds of step with the default intervals). It keeps running
sums of the loss and accuracy in variables and leaves the optimizer's telemetry in the
optimizer's `stats`, so no value crosses to the host except on a step that logs, when the
step itself returns everything at once: one host round trip per logged step. Under a
`tf.distribute` strategy every statistic comes from all-reduced quantities.

The lab's functions are traced without AutoGraph (`autograph=False`), as Keras traces
`model.fit`'s (`do_not_convert`): their control flow is Python over Python values, or
explicit `tf.cond` / `tf.while_loop`, so there is nothing to convert, and converting the
source of the step's call tree was most of a process's first trace (the time to a first
point is bench figure 15 in `bench/results.md`). A plugin's model or optimizer is traced as
under `model.fit`: without AutoGraph there either.

A `Trainer` is made and used in one thread: Keras keeps name and seed state per thread.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from core import models, optimizers
from core.series import SeriesKey
from core.training import precision
from core.training.config import RunConfig, instrument_intervals
from core.training.divergence import Divergence
from core.training.evaluation import Evaluation
from core.training.instruments import INSTRUMENTS, Instrument, Measurements, ReplicaStep
from core.training.learning_rate import learning_rate
from core.training.live import weighted_task
from core.training.losses import Gradients, task_of
from core.training.private_gradients import PrivateGradients
from core.training.private_run import EPSILON, PrivateRun
from core.training.run_data import RunData, sha256
from core.training.telemetry import RunningSums

__all__ = ["Measurements", "Trainer"]

RELEASE_THREAD = "optlab-batches-release"  # see `Trainer.close`


class Trainer:
    """Builds everything a run trains with, in the calling thread, under `strategy`.

    Attributes:
        model, optimizer: What trains.
        task: What the model learns (losses, gradients, the sums logged as means).
        telemetry: The running sums and the logged row.
        data: The run's batches, and the steps they make.
        evaluate: Called, the loss and scores on the whole test split.
        divergence: The first step whose loss or weights were not finite.
        instrument_intervals: Each instrument's interval in steps, 0 when off.
        layers: The layer names that per-layer statistics are keyed by.
        private: A DP-SGD run's privacy (its ε, its last step within budget), else None.

    A trainer made with `start=S` takes the batches of steps S + 1 on; `restore` then
    gives it the state a checkpoint of step S saved, and it continues that run exactly.
    """

    def __init__(
        self, config: RunConfig, strategy: tf.distribute.Strategy, *, start: int = 0
    ) -> None:
        self.config = config
        self.strategy = strategy
        self.data = RunData.load(config, start)
        dataset = self.data.dataset
        self.instrument_intervals = instrument_intervals(config, self.data.total_steps)
        with strategy.scope():
            with precision.policy(config.precision):
                self.model = models.build(
                    config.model,
                    input_shape=dataset.input_shape,
                    num_classes=dataset.num_classes,
                    seed=config.seed,
                    multitask=config.multitask,
                )
            spec = optimizers.get_spec(config.optimizer)
            rate = learning_rate(config, self.data.total_steps)
            self.optimizer = spec.build(
                **{**config.hyperparameters, "learning_rate": rate}, telemetry=config.telemetry
            )
            self.optimizer.build(self.model.trainable_variables)
            self.scaler = precision.loss_scaler(config.precision, self.optimizer)
            if self.scaler is not None:
                self.scaler.build(self.model.trainable_variables)
        self.weights_sha256 = sha256(self.model.get_weights())
        self._batches = iter(  # passed into the traced step, which takes each batch
            strategy.experimental_distribute_dataset(self.data.train)
            if strategy.num_replicas_in_sync > 1
            else self.data.train
        )
        self.task = task_of(config, dataset.problem)
        if self.scaler is not None:
            self.task.loss_scale = self.scaler.dynamic_scale
        self.private: PrivateRun | None = None
        self._gradients: Callable[..., Gradients] = self.task.gradients
        if config.dp_clip is not None:  # DP-SGD
            self.private = PrivateRun(config, len(dataset.y_train), self.data.total_steps)
            self._gradients = PrivateGradients(
                self.task,
                self.model,
                clip=config.dp_clip,
                noise=config.dp_noise,
                expected_batch=config.batch_size,
                seed=config.seed,
                step=self.optimizer.iterations,
            )
        self.telemetry = RunningSums(self.model, self.optimizer, self.task)
        self.layers = self.telemetry.layers
        self.evaluate = Evaluation(self.data.test, self.model, self.task)
        self.divergence = Divergence()
        self._saver: tf.train.Checkpoint | None = None
        self.instruments: dict[str, Instrument] = {
            name: INSTRUMENTS[name](self)
            for name, every in self.instrument_intervals.items()
            if every > 0
        }
        # TensorFlow counts retraces per function code, so the methods of many trainers
        # would share one count and warn of retracing; a partial is counted on its own.
        self._train_step = tf.function(
            functools.partial(Trainer._train_step_fn, self), autograph=False
        )
        self._traces: dict[tuple[bool, tuple[str, ...]], Callable[..., dict[str, Any]]] = {}
        self._per_layer_flags = {flag: tf.constant(flag) for flag in (False, True)}

    # Training ---------------------------------------------------------------------------

    def step(self, step: int, *, log: bool, per_layer: bool = True) -> Measurements:
        """Runs optimizer step number `step` (1-based) on the next batch, with the
        instruments whose interval divides `step`; returns what they measured and, when
        `log`, everything to log (running means since the last log, the step's telemetry,
        with its per-layer statistics if `per_layer`).

        One call into the traced step, and one host round trip only on steps that log or
        measure something.
        """
        due = [self.instruments[name] for name in self._due(step)]
        traced = tuple(instrument.name for instrument in due if instrument.traced)
        per_layer = log and per_layer
        step_fn = self._traced_step(log, traced)
        flag = self._per_layer_flag(log, per_layer)
        outputs = step_fn(self._batches, log=log, per_layer=flag, due=traced)
        measured = Measurements()
        if log or due:
            first_nonfinite = int(outputs["first_nonfinite"])
            measured.diverged_at = first_nonfinite if first_nonfinite >= 0 else None
        if log:
            measured.values |= self.telemetry.row(outputs["logged"], per_layer=per_layer)
            if self.private is not None:
                measured.values[EPSILON] = self.private.epsilon(step)
        for instrument in due:
            instrument.read(outputs, measured)
        return measured

    def _traced_step(self, log: bool, due: tuple[str, ...]) -> Callable[..., dict[str, Any]]:
        """The training step traced for this mix of logging and instruments, as a concrete
        function: calling the `tf.function` matches the arguments against its traces
        first, in Python, each step (a share of a small model's step worth saving); its
        trace does not."""
        key = (log, due)
        if key not in self._traces:
            self._traces[key] = self._train_step.get_concrete_function(
                self._batches, log=log, per_layer=self._per_layer_flag(log, True), due=due
            )
        return self._traces[key]

    def _per_layer_flag(self, log: bool, per_layer: bool) -> bool | tf.Tensor:
        """What the traced step is given for whether it measures the per-layer statistics:
        on a logged step with telemetry, a tensor, known as the step runs, so that a step
        with them and one without are one trace (see `LayerStatistics.when`); else False."""
        return self._per_layer_flags[per_layer] if log and self.config.telemetry else False

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
        self._train_step = self.evaluate = self._saver = None
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
        initial weights of the telemetry, the instruments' running state, a multi-task
        run's loss weights, a float16 run's loss scale, and the first non-finite step.
        With the batch position (`start`), the whole state of a run: the batch order and
        the gradient noise are functions of the seed and the step."""
        return [
            *self.model.variables,
            *self.optimizer.variables,
            *self.telemetry.variables,
            *(v for instrument in self.instruments.values() for v in instrument.variables),
            *self.task.variables,
            *precision.scaler_variables(self.scaler),
            self.divergence.first,
        ]

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

    def knob_holder(self, name: str) -> Any:
        """What holds the live knob `name` (checked by `core.training.live`): the task for a
        task weight, else the optimizer. Both answer `get_knob` and `set_knob`."""
        return self.task if weighted_task(name) is not None else self.optimizer

    def _train_step_fn(
        self, batches: Any, *, log: bool, per_layer: bool | tf.Tensor, due: tuple[str, ...]
    ) -> dict[str, Any]:
        x, y = next(batches)  # in the graph: no Python round trip for the batch
        self.optimizer.per_variable_stats = per_layer  # what the statistics read, if any
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
        loss = self.strategy.reduce("SUM", per_replica["loss"], axis=None)
        self.divergence.check(loss, self.optimizer)
        for instrument in instruments:
            instrument.finish(outputs)
        outputs["first_nonfinite"] = self.divergence.first.read_value()
        if log:
            outputs["logged"] = self.telemetry.logged(per_layer)
        return outputs

    def _replica_step(
        self, x: tf.Tensor, y: Any, *, instruments: list[Instrument]
    ) -> dict[str, tf.Tensor]:
        context = tf.distribute.get_replica_context()

        def all_reduced(grads: list[tf.Tensor]) -> list[tf.Tensor]:
            return context.all_reduce("SUM", grads) if context.num_replicas_in_sync > 1 else grads

        variables = self.model.trainable_variables
        gradients = functools.partial(self._gradients, self.model)
        step = ReplicaStep(x, y, variables, gradients, all_reduced)
        taken = (instrument.gradients(step) for instrument in instruments)
        step.computed = next((g for g in taken if g is not None), None) or gradients(x, y)
        for task, grads in (step.computed.per_task or {}).items():
            key = SeriesKey("grad_norm", task).format()
            step.terms[key] = tf.linalg.global_norm(all_reduced(grads))
        before = [instrument.before_update(step) for instrument in instruments]
        precision.apply(self.optimizer, self.scaler, step.computed.grads, variables)
        for instrument, state in zip(instruments, before, strict=True):
            instrument.after_update(step, state)
        return step.computed.sums | step.terms
