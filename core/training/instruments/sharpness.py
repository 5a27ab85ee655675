"""Sharpness: the top Hessian eigenvalue of the loss on a fixed batch (the run's first, or
the training split's first `sharpness_examples`), to hold against 2/η
(`measures.power_iteration`)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, ClassVar

from core.lazy import lazy_module
from core.series import SeriesKey
from core.training.instruments.instrument import Instrument, Measurements
from core.training.instruments.measures import dot, power_iteration
from core.training.instruments.specs import ChartSpec, Drawn, Line, LineChart, Points, Reference

tf = lazy_module("tensorflow")  # TensorFlow when measuring, not when declaring

ITERATIONS = 10  # warm-started from the last eigenvector
# The loss on the same examples at the same weights, logged beside the sharpness: the
# sharpness of cross-entropy falls with the loss, so runs compare at a like loss.
LOSS = SeriesKey("sharpness", "loss").format()


def edge_of_stability(run: Drawn) -> Points | None:
    """2/η at each logged step: the sharpness at which plain gradient descent stops being
    stable; None for a run without a logged learning rate."""
    if "learning_rate" not in run.metrics:
        return None
    return run.metrics.steps, 2.0 / run.metrics["learning_rate"]


class Sharpness(Instrument):
    """Power iteration on Hessian-vector products, in a traced function of its own after
    the training step (about 30 passes: the costly instrument)."""

    name = "sharpness"
    field_help = "Measure sharpness, the top Hessian eigenvalue,"
    spacing = 4  # the costly one
    charts: ClassVar[Mapping[str, ChartSpec]] = {
        "sharpness": LineChart(
            "Sharpness (top Hessian eigenvalue) against 2/η",
            help="The largest Hessian eigenvalue: when it reaches 2/η (dotted) plain "
            "gradient descent is at the edge of stability and the loss starts to oscillate.",
            lines=(Line("sharpness", "sharpness", markers=True),),
            references=(Reference("2/η", edge_of_stability),),
            scale="log",
        )
    }
    metrics = ("sharpness", LOSS)
    traced = False

    def __init__(self, trainer: Any) -> None:
        super().__init__(trainer)
        rng = tf.random.Generator.from_seed(trainer.config.seed)
        variables = trainer.model.trainable_variables
        self._eigenvector = [tf.Variable(rng.normal(v.shape), trainable=False) for v in variables]
        # A partial, not a method: TensorFlow counts retraces per function code, and the
        # instruments of many runs would share one count.
        self._measure = tf.function(functools.partial(Sharpness._measure_fn, self), autograph=False)

    @property
    def variables(self) -> list[Any]:
        return self._eigenvector

    def read(self, outputs: Mapping[str, tf.Tensor], measured: Measurements) -> None:
        eigenvalue, loss = self._measure()
        measured.values["sharpness"] = float(eigenvalue)
        measured.values[LOSS] = float(loss)

    def _measure_fn(self) -> tuple[tf.Tensor, tf.Tensor]:
        """The eigenvalue on all of the fixed batch (the same value an all-reduce over
        replicas would give), and the loss there."""
        x, y = self.trainer.data.sharpness_batch
        model, task = self.trainer.model, self.trainer.task
        variables = model.trainable_variables

        def loss_on_batch() -> tf.Tensor:
            return tf.reduce_mean(task.total(task.losses(model(x, training=True), y)))

        def hvp(vector: list[tf.Tensor]) -> list[tf.Tensor]:
            with tf.GradientTape() as outer:
                with tf.GradientTape() as inner:
                    loss = loss_on_batch()
                slope = dot(inner.gradient(loss, variables), vector)
            return outer.gradient(slope, variables)

        eigenvalue, vector = power_iteration(
            hvp, [tf.convert_to_tensor(v) for v in self._eigenvector], ITERATIONS
        )
        for variable, value in zip(self._eigenvector, vector, strict=True):
            variable.assign(value)
        return eigenvalue, loss_on_batch()

    def close(self) -> None:
        self._measure = None  # type: ignore[assignment]
