"""`Instrument`: one measurement taken at its own interval, after Cockpit's quantities.

An instrument owns when it is due (its `{name}_every` run field, declared by its `spacing`
and `field_help`, see `core.training.config.instrument_intervals`), what it adds to a
training step on each replica (its terms), how the terms combine into its values once
reduced over replicas, how they are read on the host into `Measurements`, and its charts
(`charts`: what they draw and how to read them, plain data that `core.charts` draws, see
`specs`). The Trainer loops over the instruments due at a step; each step kind (which
instruments are due) is traced once.

Declaring one imports no TensorFlow (modules here name it through `core.lazy`): the run
fields and the dashboard read the declarations in processes that never train.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from core.training.instruments.specs import ChartSpec

if TYPE_CHECKING:
    import tensorflow as tf

    from core.training.losses import Gradients
    from core.training.trainer import Trainer


@dataclass
class Measurements:
    """What a step measured: values for the metrics (logged telemetry and instruments),
    per-layer histograms (`{"edges": [...], "grad"|"weight": {layer: counts}}`) when due,
    and the step the run diverged at, if it has (known on steps that log or measure)."""

    values: dict[str, float] = field(default_factory=dict)
    histograms: dict[str, Any] | None = None
    diverged_at: int | None = None  # the first step with a non-finite loss or weights


@dataclass
class ReplicaStep:
    """One replica's share of a training step, as instruments see it.

    Attributes:
        x, y: This replica's part of the batch.
        variables: The trainable variables.
        gradients: The task's gradients on a batch, `gradients(x, y)`.
        all_reduced: Sums a list of tensors over replicas (the identity on one).
        computed: The step's gradients, once taken.
        terms: Per-replica outputs of the instruments, reduced over replicas afterwards.
    """

    x: tf.Tensor
    y: Any
    variables: list[Any]
    gradients: Callable[[tf.Tensor, Any], Gradients]
    all_reduced: Callable[[list[tf.Tensor]], list[tf.Tensor]]
    computed: Gradients | None = None
    terms: dict[str, tf.Tensor] = field(default_factory=dict)


class Instrument:
    """A measurement, by default traced into the training step.

    Attributes:
        name: Its name; its interval is the run field `{name}_every`.
        field_help: What its interval field measures, completed by "every this many
            steps".
        spacing: Its default interval in base intervals (a run takes about
            `MEASUREMENTS_PER_RUN / spacing` measurements when its field is empty).
        charts: Its charts on the Instruments panel, by key (`core.charts` draws them).
        help: How to read each of its charts, by key (their `help`).
        metrics: The metric names it writes (Measurements.values keys).
        traced: Whether it measures inside the training step (else only in `read`).
        summed: Terms that add up over replicas; the others are all-reduced already, and
            their mean is taken.
    """

    name: ClassVar[str]
    field_help: ClassVar[str]
    spacing: ClassVar[int] = 1
    charts: ClassVar[Mapping[str, ChartSpec]] = {}
    help: ClassVar[Mapping[str, str]] = {}
    metrics: ClassVar[tuple[str, ...]] = ()
    traced: ClassVar[bool] = True
    summed: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Takes its `help` from its charts: each caption is declared once."""
        super().__init_subclass__(**kwargs)
        cls.help = {key: chart.help for key, chart in cls.charts.items()}

    def __init__(self, trainer: Trainer) -> None:
        self.trainer = trainer

    @property
    def variables(self) -> list[tf.Variable]:
        """Its running state, which a checkpoint keeps (none by default)."""
        return []

    def gradients(self, step: ReplicaStep) -> Gradients | None:
        """The step's gradients, when this instrument takes them its own way; else None."""
        return None

    def before_update(self, step: ReplicaStep) -> Any:
        """Runs on each replica before the optimizer's update; what it returns is passed
        to `after_update`."""
        return None

    def after_update(self, step: ReplicaStep, before: Any) -> None:
        """Runs on each replica after the optimizer's update."""
        return  # a body AutoGraph can convert: a docstring alone is none

    def finish(self, outputs: dict[str, tf.Tensor]) -> None:
        """Turns its reduced terms in `outputs` into its values (in the traced step)."""
        return

    def read(self, outputs: Mapping[str, tf.Tensor], measured: Measurements) -> None:
        """Reads its values from the step's `outputs` into `measured` (on the host)."""
        for name in self.metrics:
            measured.values[name] = float(outputs[name])

    def close(self) -> None:
        """Lets go of what holds the instrument in a reference cycle (a traced function)."""
