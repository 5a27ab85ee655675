"""The last stage: it records what the stages before it measured, in the optimizer's
variables, when the optimizer was made with `telemetry=True`. It changes nothing of the
update: it is a stage so that the chain checks what it reads, as it checks the others."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from core.knobs import Knob
from core.optimizers.stages.composition import Stage, Step, Written, neutral_stats

if TYPE_CHECKING:
    import keras

# Per-variable statistics, in the order of the variables the optimizer was built with.
VECTOR_STATS = (
    "step_sq",  # ‖θ' − θ‖² of each variable
    "param_sq",  # ‖θ'‖² of each variable
)

#: Not a knob: a constructor argument of every optimizer (and a run field), fixed for
#: the optimizer's life.
TELEMETRY = Knob(
    "telemetry",
    "bool",
    False,
    "Record gradient and parameter norms, clipping and projection activity each step.",
)


class Telemetry(Stage):
    """Records what the step did in the optimizer's `stats` (not part of the update), when
    the optimizer was made with `telemetry=True`: each scalar statistic the chain's stages
    declare (a stage that is off reports its neutral value), and `VECTOR_STATS`."""

    reads = ("params", "new_params", "indices", "stats")
    writes = ("assignments",)

    def build(self, var_list: Sequence[keras.Variable]) -> None:
        def variable(name: str, shape: tuple[int, ...]) -> keras.Variable:
            return self.host.add_variable(
                shape, dtype="float32", aggregation="only_first_replica", name=f"stat_{name}"
            )

        self.neutral = neutral_stats(self.order)
        self.variables: dict[str, keras.Variable] = {}
        if self.host.telemetry:
            self.variables = {name: variable(name, ()) for name in self.neutral}
            self.variables |= {name: variable(name, (len(var_list),)) for name in VECTOR_STATS}

    def apply(self, step: Step) -> Written:
        import tensorflow as tf

        from core.optimizers import keras_internals, transforms

        if not self.variables:
            return {}
        assignments = []
        for name, neutral in self.neutral.items():  # a stage that is off: its neutral value
            value = step.stats.get(name, neutral)
            variable = transforms.tf_variable(self.variables[name])
            assignments.append((variable, tf.cast(value, tf.float32)))
        measured = self.host.per_variable_stats
        if measured is not False:

            def step_sq() -> tf.Tensor:
                return transforms.squared_distances(step.new_params, step.params)

            if isinstance(measured, tf.Tensor):  # known as the step runs: zeros when not
                moved = keras_internals.called_cond(
                    measured, step_sq, lambda: tf.zeros([len(step.params)])
                )
            else:
                moved = step_sq()
            vectors = {
                "step_sq": transforms.replica_mean(moved),
                "param_sq": step.stats["param_sq"],
            }
            size = self.variables["step_sq"].shape[0]
            positions = tf.constant(step.indices)[:, None]
            for name in VECTOR_STATS:
                vector = tf.scatter_nd(positions, vectors[name], [size])
                assignments.append((transforms.tf_variable(self.variables[name]), vector))
        return {"assignments": assignments}
