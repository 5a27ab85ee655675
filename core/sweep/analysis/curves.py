"""Each trial's learning curve: the objective's values it reported while it trained
(Optuna's `FrozenTrial.intermediate_values`, what `optuna.visualization.
plot_intermediate_values` draws), with where a pruned trial stopped."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import optuna


@dataclass(frozen=True)
class LearningCurve:
    """One trial's reported values, by step.

    Attributes:
        number: The trial's number in its study.
        state: Its `TrialState` name: RUNNING, COMPLETE, PRUNED or FAIL.
        steps, values: Each report's step and value, in step order.
    """

    number: int
    state: str
    steps: tuple[int, ...]
    values: tuple[float, ...]

    @property
    def stopped_at(self) -> tuple[int, float] | None:
        """The step and value where the pruner stopped the trial; None unless pruned."""
        if self.state != "PRUNED" or not self.steps:
            return None
        return self.steps[-1], self.values[-1]


def learning_curves(study: optuna.Study) -> list[LearningCurve]:
    """The curve of every trial that reported a value, by trial number."""
    curves = []
    for trial in study.get_trials(deepcopy=False):
        reported = sorted(trial.intermediate_values.items())
        if reported:
            steps, values = zip(*reported, strict=True)
            curves.append(LearningCurve(trial.number, trial.state.name, steps, values))
    return curves
