"""The stages that propose the step Δ: the optimizer's algorithm, and the layer rules'
multiplier of it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from core.knobs import Knob, LayerRule
from core.optimizers.stages.composition import Stage, Step, Written

if TYPE_CHECKING:
    import keras


class Algorithm(Stage):
    """The optimizer's own step (`LabOptimizer.propose_all`), which includes −η."""

    reads = ("grads", "params", "indices", "lr")
    writes = ("steps", "assignments")
    knobs = (
        Knob(
            "learning_rate",
            "float",
            0.01,
            "Step size η.",
            low=0.0,
            high=100.0,
            low_open=True,
            live=True,
            log_scale=True,
        ),
    )
    formula = "Δ  ← algorithm(g)"
    note = "the subclass's step (it includes −η)"
    label = "the algorithm's step"

    def row_local(self, index: int) -> bool:
        return self.host.row_local

    def apply(self, step: Step) -> Written:
        steps, assignments = self.host.propose_all(step.grads, step.params, step.indices, step.lr)
        return {"steps": steps, "assignments": assignments}


class LayerMultiplier(Stage):
    reads = ("steps", "indices")
    writes = ("steps", "multipliers")
    knobs = (
        Knob(
            "layer_rules",
            "rules",
            (),
            "Per-layer step multiplier and weight decay, chosen by a regex on the variable path.",
        ),
    )
    formula = "Δ  ← m_l · Δ"
    note = "layer_rules step multiplier m_l"
    label = "`layer_rules` multiplier"

    def build(self, var_list: Sequence[keras.Variable]) -> None:
        rules = [matching_rule(self.values["layer_rules"], v) for v in var_list]
        self.multipliers = [rule.lr_mult if rule else 1.0 for rule in rules]

    def apply(self, step: Step) -> Written:
        multipliers = [self.multipliers[i] for i in step.indices]
        return {
            "steps": [
                s if m == 1.0 else s * m for s, m in zip(step.steps, multipliers, strict=True)
            ],
            "multipliers": multipliers,
        }


def matching_rule(rules: Sequence[LayerRule], variable: Any) -> LayerRule | None:
    """The first rule whose pattern is found in the variable's path, if any."""
    path = getattr(variable, "path", variable.name)
    return next((rule for rule in rules if rule.regex.search(path)), None)
