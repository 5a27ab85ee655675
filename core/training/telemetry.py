"""What a logged step reports: the means since the last log, the optimizer's live knobs and
statistics, and per-layer statistics (step and parameter norms, update ratio, sparsity,
distance from the initial weights).

The sums live in variables written by the traced step, so that nothing crosses to the
host except on a step that logs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import keras
import tensorflow as tf

from core import optimizers
from core.optimizers import keras_internals, transforms
from core.series import SeriesKey

if TYPE_CHECKING:  # tasks imports the run config, whose instruments import this module
    from core.training.losses import SingleTask

# Below this magnitude a parameter counts as zero for a layer's `sparsity` (unless pruning
# is on: then the pruning threshold is the line).
ZERO = 1e-6
# The weights and initial weights of at most this many entries are stacked with the others
# of their shape, once for the three measures (`transforms.per_tensor_measures`); a larger
# one is measured in place. On the bench's 100-variable MLP (48 kernels of 64 × 64) the
# statistics take 90 ops so, against 495 stacked as the optimizer stacks
# (`transforms.STACKED_AT_MOST`), in the same time: 0.82× (0.73–0.91) and 0.79×
# (0.78–0.80) of one op chain a variable (`python -m bench.per_layer_ways`). Their time
# is the passes over the weights (the zero count's comparison the most), not their ops.
STACKED_AT_MOST = 1 << 13
#: What `LayerStatistics` measures of each layer.
STATISTICS = (
    "step_norm",
    "param_norm",
    "update_ratio",
    "sparsity",
    "distance_from_init",
    "weight_norm",
)
#: The per-layer statistics that are norms, also logged over the whole model.
WHOLE_MODEL = ("distance_from_init", "weight_norm")


def layer_of(path: str) -> str:
    """The layer a variable belongs to: its path without the variable name."""
    return path.rsplit("/", 1)[0] if "/" in path else path


class LayerStatistics:
    """Per-layer statistics of a model's trainable variables, from what the optimizer's
    telemetry measured of its last step (`optimizer.stats`): step and parameter norms,
    update ratio, sparsity and distance from the weights it was made with; and, read
    from the weights themselves, their norm (`weight_norm`). Works traced
    (the lab's step) or eagerly (`LabCallback`, after a step of `fit`).

    Attributes:
        layers: The layer names the statistics are keyed by, in the model's order.
    """

    def __init__(self, model: keras.Model, optimizer: Any) -> None:
        self.model = model
        self.optimizer = optimizer
        variables = model.trainable_variables
        self.layers = list(dict.fromkeys(layer_of(v.path) for v in variables))
        self._segments = tf.constant([self.layers.index(layer_of(v.path)) for v in variables])
        self._sizes = tf.constant([float(v.shape.num_elements()) for v in variables])
        self.initial = [tf.Variable(tf.convert_to_tensor(v), trainable=False) for v in variables]

    def __call__(self) -> dict[str, tf.Tensor]:
        """Each statistic as a vector over `layers`; empty without telemetry."""
        stats = self.optimizer.stats
        if not stats:
            return {}

        def per_layer(per_variable: tf.Tensor) -> tf.Tensor:
            return tf.math.unsorted_segment_sum(per_variable, self._segments, len(self.layers))

        values = [tf.convert_to_tensor(v) for v in self.model.trainable_variables]
        step_norm = tf.sqrt(per_layer(tf.convert_to_tensor(stats["step_sq"])))
        param_norm = tf.sqrt(per_layer(tf.convert_to_tensor(stats["param_sq"])))
        threshold = self.optimizer.live_variables.get("prune_threshold")
        zero = tf.constant(ZERO) if threshold is None else tf.cast(threshold, tf.float32)

        def zeros(w: tf.Tensor, _: tf.Tensor, *, axis: list[int] | None) -> tf.Tensor:
            below = tf.abs(tf.cast(w, tf.float32)) < zero
            return tf.reduce_sum(tf.cast(below, tf.float32), axis=axis)

        def half_squares(w: tf.Tensor, _: tf.Tensor, *, axis: list[int] | None) -> tf.Tensor:
            return transforms.half_squares_measure(w, axis=axis)

        measured = transforms.per_tensor_measures(
            {
                "zeros": zeros,
                "half_squares": half_squares,
                "half_moved": transforms.half_distances_measure,
            },
            values,
            self.initial,
            stacked_at_most=STACKED_AT_MOST,
        )
        zero_counts = measured["zeros"]
        moved = 2.0 * measured["half_moved"]
        squares = 2.0 * measured["half_squares"]
        return {
            "step_norm": step_norm,
            "param_norm": param_norm,
            "update_ratio": step_norm / tf.maximum(param_norm, 1e-12),
            "sparsity": per_layer(zero_counts) / per_layer(self._sizes),
            "distance_from_init": tf.sqrt(per_layer(moved)),
            # Read from the variables after the step, apart from `param_norm`, which a
            # stage computes (a projection's is its own formula, never above the radius):
            # what a verdict on the weights reads.
            "weight_norm": tf.sqrt(per_layer(squares)),
        }

    def when(self, measured: bool | tf.Tensor) -> tuple[dict[str, tf.Tensor], dict[str, tf.Tensor]]:
        """The statistics and their norms over the whole model (`whole_model`) if
        `measured`, else nothing. `measured` is a bool known as the step is traced, or a
        boolean tensor known as it runs: then a step with them and one without are one
        trace (a short run cannot win back a second one, seconds on a model of many
        layers), and one without them returns zeros, which the row leaves out."""

        def measure() -> tuple[dict[str, tf.Tensor], dict[str, tf.Tensor]]:
            per_layer = self()  # empty without telemetry
            return per_layer, whole_model(per_layer) if per_layer else {}

        if not isinstance(measured, tf.Tensor) or not self.optimizer.stats:
            return measure() if measured else ({}, {})

        def unmeasured() -> tuple[dict[str, tf.Tensor], dict[str, tf.Tensor]]:
            zeros = tf.zeros([len(self.layers)])
            return dict.fromkeys(STATISTICS, zeros), dict.fromkeys(WHOLE_MODEL, tf.constant(0.0))

        return keras_internals.called_cond(measured, measure, unmeasured)

    def row(self, per_layer: dict[str, tf.Tensor]) -> dict[str, float]:
        """The statistics as metric values (on the host), each layer's keyed
        `SeriesKey(statistic, layer)`."""
        row = {}
        for statistic, values in per_layer.items():
            for layer, value in zip(self.layers, values.numpy(), strict=True):
                row[SeriesKey(statistic, layer).format()] = float(value)
        return row


def whole_model(per_layer: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    """The per-layer statistics that are norms, over all layers (`WHOLE_MODEL`)."""
    return {name: tf.norm(per_layer[name]) for name in WHOLE_MODEL}


def optimizer_readings(optimizer: Any, per_layer: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    """The optimizer's live knob values and scalar statistics of its last step, and, with
    the per-layer statistics, their norms over all layers (`whole_model`)."""
    live = optimizer.live_variables
    out = {name: tf.cast(variable, tf.float32) for name, variable in live.items()}
    if "learning_rate" in out:  # the rate the step took: a schedule's, not its peak
        out["learning_rate"] = optimizer.applied_learning_rate()
    if per_layer:
        out |= whole_model(per_layer)
    stats = optimizer.stats
    scalars = [name for name in stats if name in optimizers.SCALAR_STATS]
    return out | {name: tf.convert_to_tensor(stats[name]) for name in scalars}


class Logged(NamedTuple):
    """What a logged step returns (`RunningSums.logged`), as tensors."""

    scalars: dict[str, tf.Tensor]
    per_layer: dict[str, tf.Tensor]
    whole_model: dict[str, tf.Tensor]


class RunningSums:
    """The running sums of one run, and the logged row made from them.

    Attributes:
        layers: The layer names that per-layer statistics are keyed by.
    """

    def __init__(self, model: keras.Model, optimizer: Any, task: SingleTask) -> None:
        self.optimizer = optimizer
        self.task = task
        self.per_layer = LayerStatistics(model, optimizer)
        self.layers = self.per_layer.layers
        # Created outside the strategy, written in cross-replica context only.
        names = ["loss", "count", *task.means, *task.last_values]
        self._sums = {n: tf.Variable(0.0, trainable=False, name=n.replace("/", "_")) for n in names}

    @property
    def variables(self) -> list[tf.Variable]:
        """The running sums and the initial weights: what a checkpoint keeps."""
        return [*self._sums.values(), *self.per_layer.initial]

    def accumulate(self, per_replica: dict[str, Any], strategy: tf.distribute.Strategy) -> None:
        """Adds a step's sums over replicas to the running ones (in the traced step);
        a last value (a task's gradient norm, all-reduced already) replaces the old one."""
        for name, variable in self._sums.items():
            if name in self.task.last_values:
                variable.assign(strategy.reduce("MEAN", per_replica[name], axis=None))
            else:
                variable.assign_add(strategy.reduce("SUM", per_replica[name], axis=None))

    def owns(self, name: str) -> bool:
        """Whether a per-replica output is one of the running sums."""
        return name in self._sums

    def logged(self, per_layer: bool | tf.Tensor = True) -> Logged:
        """Means since the last log, last values, live knobs and statistics, and, if
        `per_layer` (see `LayerStatistics.when`), the per-layer statistics (in the
        graph); resets the sums."""
        sums = {name: variable.read_value() for name, variable in self._sums.items()}
        count = tf.maximum(sums["count"], 1.0)
        out = {name: sums[name] / count for name in ("loss", *self.task.means)}
        out |= {name: sums[name] for name in self.task.last_values}
        out |= optimizer_readings(self.optimizer, {})
        layers, whole = self.per_layer.when(per_layer)
        for name, variable in self._sums.items():
            if name not in self.task.last_values:
                variable.assign(0.0)
        return Logged(out, layers, whole)

    def row(self, logged: Logged, *, per_layer: bool = True) -> dict[str, float]:
        """The logged tensors as metric values (on the host), with the per-layer ones
        (see `LayerStatistics.row`) if the step measured them (`per_layer`)."""
        row = {key: float(value) for key, value in logged.scalars.items()}
        if not per_layer:
            return row
        row |= {key: float(value) for key, value in logged.whole_model.items()}
        return row | self.per_layer.row(logged.per_layer)
