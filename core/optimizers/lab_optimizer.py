"""`LabOptimizer`: the base of every optimizer in the lab, and the order its knobs act in.

One optimizer step, for gradients g and parameters θ (all trainable variables at once):

{order}

Each line after the all-reduce is a stage of `core.optimizers.stages`, where the knobs are
declared. The stages that need every gradient or every parameter at once (clipping, noise,
top-k, the projection) run after the all-reduce, on identical values in every replica,
and every new value is written through `strategy.extended.update`, so mirrored copies
never drift apart, by the optimizer's own `assign` (as Keras requires: a row update stays
a scatter): `keras_internals.CollectiveOptimizer` plugs the step into Keras so. This is
why the knobs live here and not in Keras's `global_clipnorm`, which clips each replica's
gradient before the sum.

A sparse gradient (an embedding's `tf.IndexedSlices`) is applied to the rows it touches
only, and written with a scatter, when the algorithm is `row_local` and every knob that is
on acts row by row (not noise, top-k, weight decay, pruning or the projection, which read
or write every row); otherwise it is made dense first.

A knob set to `None` is left out of the traced step and costs nothing. A numeric knob that
is set lives in a variable: `set_knob` changes it for the next step without retracing.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any, ClassVar

import keras
import numpy as np
import tensorflow as tf

from core.knobs import InvalidInput, Knob, live_change, validate
from core.optimizers import stages
from core.optimizers.keras_internals import CollectiveOptimizer
from core.optimizers.optimizer_catalog import BUILTIN
from core.optimizers.schedules import LiveSchedule
from core.optimizers.stages import (
    COMMON_KNOBS,
    SCALAR_STATS,
    STAGES,
    TELEMETRY,
    VECTOR_STATS,
    Assignment,
)
from core.optimizers.transforms import tf_variable

__doc__ = (__doc__ or "").format(order=stages.order_text())  # the order, from the stages
__all__ = ["SCALAR_STATS", "VECTOR_STATS", "Assignment", "LabOptimizer", "tf_variable"]


def _as_float(value: Any) -> float:
    """A float32 variable's value as the shortest float that reads back the same
    (0.004, not 0.004000000189989805), so configs round-trip cleanly."""
    return float(str(np.float32(value)))


def documented(
    doc: str | None, knobs: Sequence[Knob], registered: Sequence[tuple[str, str]] = ()
) -> str | None:
    """A class docstring, `doc` (its own text), followed by its `Registered as:` section
    (each name it is registered under, with its update rule, as the catalog holds it) and
    its `Knobs:` section; sections already there are made again."""
    if not doc:
        return doc
    text = inspect.cleandoc(doc).split("\n\nRegistered as:\n")[0].split("\n\nKnobs:\n")[0]
    if registered:
        rules = "\n".join(f"    {name}: {rule}" for name, rule in registered)
        text += f"\n\nRegistered as:\n{rules}"
    return f"{text}\n\n{knobs_section(knobs)}"


def knobs_section(knobs: Sequence[Knob]) -> str:
    """A docstring's `Knobs:` section: each knob's name, default, range and help."""
    lines = ["Knobs:"]
    for knob in knobs:
        facts = [f"default {knob.default!r}"]
        if knob.range_text():
            facts.append(f"in {knob.range_text()}")
        if knob.optional:
            facts.append("None: off")
        if knob.live:
            facts.append("live")
        lines.append(f"    {knob.name} ({', '.join(facts)}): {knob.help}")
    return "\n".join(lines)


class LabOptimizer(CollectiveOptimizer):
    """Base class of the lab's optimizers: the knobs of `COMMON_KNOBS` on any algorithm.

    Subclasses declare their own knobs in `knobs` and write only the algorithm, either per
    variable (`propose`, with per-variable slots named in `slot_names`) or on the whole
    flattened parameter vector (see `GlobalVectorOptimizer`). The constructor takes every
    knob as a keyword argument, fills the knob's default for the ones not given, and
    raises `InvalidInput` naming every bad field.

    Args:
        learning_rate: A float > 0 (live) or a `keras.optimizers.schedules`
            `LearningRateSchedule`.
        telemetry: Record what each step did in `stats` (see `SCALAR_STATS`,
            `VECTOR_STATS`): norms, clipping, projection, per-variable steps.
        name: The optimizer's name; its variables are created under it.
        **hyperparameters: Any other knob of the optimizer (see `knobs`).
    """

    knobs: ClassVar[tuple[Knob, ...]] = COMMON_KNOBS
    slot_names: ClassVar[tuple[str, ...]] = ()
    #: Whether `propose` is zero where the gradient is and reads no slots, so that a
    #: sparse gradient's step may be computed on the rows it touches alone.
    row_local: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Appends the update rules the catalog declares for the class and its knobs to
        its docstring, so that `help(Adam)` shows adamw's rule and beta_1."""
        super().__init_subclass__(**kwargs)
        implementation = f"{cls.__module__}:{cls.__qualname__}"
        rules = [(s.name, s.update_rule) for s in BUILTIN if s.implementation == implementation]
        cls.__doc__ = documented(cls.__doc__, cls.knobs, rules)

    def __init__(
        self,
        learning_rate: float | keras.optimizers.schedules.LearningRateSchedule | None = None,
        *,
        telemetry: bool = False,
        name: str | None = None,
        **hyperparameters: Any,
    ) -> None:
        schedule = None
        if callable(learning_rate):  # a `LearningRateSchedule`, or a function of nothing
            schedule, learning_rate = learning_rate, None
        if learning_rate is not None:
            hyperparameters["learning_rate"] = learning_rate
        hyperparameters["telemetry"] = telemetry  # validated with the knobs, kept apart
        values = validate((*self.knobs, TELEMETRY), hyperparameters, owner=type(self).__name__)
        telemetry = values.pop("telemetry")
        # Keras applies its own weight decay and clipping when given them: it gets neither.
        super().__init__(learning_rate=schedule or values["learning_rate"], name=name)
        self._values = values
        self.telemetry: bool = telemetry
        # Read when a step is traced: with telemetry, whether the step also measures the
        # per-variable statistics (`VECTOR_STATS`): a bool, or a boolean tensor that the
        # lab's trainer passes its step, so that one trace serves the steps that log
        # per-layer statistics and those that do not.
        self.per_variable_stats: bool | tf.Tensor = True
        if isinstance(schedule, LiveSchedule):  # its peak is the live learning rate
            schedule.rate = self.add_variable(
                (),
                initializer=keras.initializers.Constant(schedule.peak),
                dtype="float32",
                aggregation="only_first_replica",
                name="learning_rate",
            )
        self._live = {
            knob.name: self.add_variable(
                (),
                initializer=keras.initializers.Constant(values[knob.name]),
                dtype="float32",
                aggregation="only_first_replica",
                name=knob.name,
            )
            for knob in self.knobs
            if knob.live and knob.name != "learning_rate" and values[knob.name] is not None
        }
        self._stages = [stage(self, values, STAGES) for stage in STAGES]
        self._telemetry = next(s for s in self._stages if isinstance(s, stages.Telemetry))

    # Knobs ----------------------------------------------------------------------------

    def get_knob(self, name: str) -> Any:
        """The current value of knob `name` (live knobs read their variable)."""
        if name == "learning_rate":
            rate = self.live_variables.get(name, self.learning_rate)
            return _as_float(tf.convert_to_tensor(rate).numpy())
        if name in self._live:
            return _as_float(self._live[name].numpy())
        if name not in self._values:
            raise InvalidInput({name: f"unknown hyperparameter for {type(self).__name__}"})
        return self._values[name]

    def set_knob(self, name: str, value: float) -> float:
        """Changes a live knob from the next step on, without retracing.

        Raises `InvalidInput` naming the field when the value is invalid, the
        knob is not live, or it was off (`None`) when the optimizer was made.
        """
        was_on = name == "learning_rate" or name in self._live
        try:
            value = live_change(self.knobs, name, value, was_on=was_on)
        except ValueError as exc:
            raise InvalidInput({name: str(exc)}) from None
        if name == "learning_rate" and isinstance(self.learning_rate_holder, LiveSchedule):
            self.learning_rate_holder.rate.assign(value)  # the schedule's peak: it scales it
        elif name == "learning_rate":
            self.learning_rate = value
        else:
            self._live[name].assign(value)
        return value

    @property
    def live_variables(self) -> dict[str, keras.Variable]:
        """The variables of the live knobs that are on, by knob name (learning rate first,
        or a `LiveSchedule`'s peak; none for another schedule)."""
        lr = self.learning_rate_holder
        if isinstance(lr, LiveSchedule):
            lr = lr.rate
        first = {"learning_rate": lr} if isinstance(lr, keras.Variable) else {}
        return first | self._live

    def applied_learning_rate(self) -> tf.Tensor:
        """The rate the last step took: a schedule's η_t, not its peak."""
        lr = self.learning_rate_holder
        if isinstance(lr, keras.optimizers.schedules.LearningRateSchedule):
            return tf.cast(lr(self.iterations - 1), tf.float32)
        return tf.cast(self.learning_rate, tf.float32)

    @property
    def stats(self) -> dict[str, keras.Variable]:
        """What the last step measured (see `SCALAR_STATS`, `VECTOR_STATS`); empty unless
        the optimizer was made with `telemetry=True`."""
        return dict(self._telemetry.variables) if self.built else {}

    # Variables --------------------------------------------------------------------------

    def build(self, var_list: list[keras.Variable]) -> None:
        if self.built:
            return
        super().build(var_list)
        self._slots = self.build_slots(var_list)
        for stage in self._stages:
            stage.build(var_list)

    def build_slots(self, var_list: list[keras.Variable]) -> dict[str, list[keras.Variable]]:
        """Creates the algorithm's state; by default one slot per variable per `slot_names`."""
        return {name: self.add_optimizer_variables(var_list, name) for name in self.slot_names}

    # The step -------------------------------------------------------------------------

    def new_values(
        self,
        grads: list[tf.Tensor],
        variables: list[tf.Variable],
        indices: list[int],
        learning_rate: Any,
    ) -> list[Assignment]:
        """The step, through the stages: each gradient whole, or only the rows it touches
        when every stage acts row by row (see `Stage.row_local`); as new values for the
        stages' variables and the algorithm's, then the parameters."""
        step_grads, step_params, step_rows = [], [], []
        for g, variable, i in zip(grads, variables, indices, strict=True):
            if isinstance(g, tf.IndexedSlices) and all(s.row_local(i) for s in self._stages):
                rows, g = summed_rows(g)
                param = tf.gather(variable, rows)
            else:
                rows, param = None, tf.convert_to_tensor(variable)
                g = dense(g, param)
            step_grads.append(tf.cast(g, param.dtype))
            step_params.append(param)
            step_rows.append(rows)
        step = stages.Step.start(
            grads=step_grads,
            params=step_params,
            variables=variables,
            rows=step_rows,
            indices=indices,
            lr=tf.cast(learning_rate, tf.float32),
        )
        step = stages.run(self._stages, step)
        new_params = [
            new if rows is None else tf.IndexedSlices(new, rows)
            for new, rows in zip(step.new_params, step.rows, strict=True)
        ]
        return [*step.assignments, *zip(variables, new_params, strict=True)]

    # The algorithm ----------------------------------------------------------------------

    def propose_all(
        self,
        grads: Sequence[tf.Tensor],
        params: Sequence[tf.Tensor],
        indices: Sequence[int],
        learning_rate: tf.Tensor,
    ) -> tuple[list[tf.Tensor], list[Assignment]]:
        """Step 5 for every variable: the proposed steps Δ and the new state values.

        The default calls `propose` per variable with that variable's slots.
        """
        steps, assignments = [], []
        for g, theta, i in zip(grads, params, indices, strict=True):
            slots = {name: tf_variable(self._slots[name][i]) for name in self.slot_names}
            step, new_slots = self.propose(
                g, theta, learning_rate, **{n: tf.convert_to_tensor(s) for n, s in slots.items()}
            )
            steps.append(step)
            assignments += [(slots[name], value) for name, value in new_slots.items()]
        return steps, assignments

    def propose(
        self, gradient: tf.Tensor, param: tf.Tensor, learning_rate: tf.Tensor, **slots: tf.Tensor
    ) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
        """The algorithm for one variable: returns (Δ, new slot values by name).

        Pure: read `gradient`, `param` and the current `slots`, return new values; the
        base class writes them. Δ includes the learning rate and its sign.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement `propose`.")

    # Serialization ----------------------------------------------------------------------

    def get_config(self) -> dict[str, Any]:
        learning_rate = super().get_config()["learning_rate"]
        if isinstance(learning_rate, float):
            learning_rate = _as_float(learning_rate)
        config = {"name": self.name, "learning_rate": learning_rate, "telemetry": self.telemetry}
        for knob in self.knobs:
            if knob.name == "learning_rate":
                continue
            value = self.get_knob(knob.name)
            if knob.type == "rules":
                value = [rule.to_dict() for rule in value]
            config[knob.name] = value
        return config


def summed_rows(gradient: tf.IndexedSlices) -> tuple[tf.Tensor, tf.Tensor]:
    """A sparse gradient as (the rows it touches, each once; their gradients): rows given
    twice add up, as `tf.IndexedSlices` means."""
    rows, positions = tf.unique(gradient.indices)
    return rows, tf.math.unsorted_segment_sum(gradient.values, positions, tf.size(rows))


def dense(gradient: Any, param: tf.Tensor) -> tf.Tensor:
    """A sparse gradient (an embedding's `tf.IndexedSlices`, whatever its `dense_shape`)
    as the dense tensor it stands for: clipping, noise, top-k and projection act on whole
    tensors. Rows given twice add up, as `tf.IndexedSlices` means."""
    if isinstance(gradient, tf.IndexedSlices):
        return tf.math.unsorted_segment_sum(gradient.values, gradient.indices, tf.shape(param)[0])
    return gradient
