"""What a sweep optimizes: the validation metric of its dataset's problem, and which way.

A classification's trials are scored by their run's best validation accuracy (higher is
better), a regression's by its best validation mean absolute error (lower is better): a
run logs `val_accuracy` or `val_mae` each time it validates, and ends with the best of
them as `best_val_accuracy` or `best_val_mae` (see `core.engine.execution.BEST`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

#: The study's user attribute that names its objective's metric.
OBJECTIVE_ATTR: Final = "optlab_objective"


@dataclass(frozen=True)
class Objective:
    """A validation metric every trial's run logs, and whether more of it is better."""

    metric: str
    direction: Literal["maximize", "minimize"]
    label: str

    @property
    def best_key(self) -> str:
        """The run's final metric that scores a completed trial."""
        return f"best_{self.metric}"

    def best(self, values: list[float]) -> float:
        """The best of `values`, which must not be empty."""
        return max(values) if self.direction == "maximize" else min(values)


#: The objective of a sweep, by its dataset's problem (see `core.data.PROBLEMS`).
OBJECTIVES: Final = {
    "classification": Objective("val_accuracy", "maximize", "validation accuracy"),
    "regression": Objective("val_mae", "minimize", "validation mean absolute error"),
}


def named(metric: str | None) -> Objective:
    """The objective of `metric`; a study stored before objectives were kept (None) was
    a classification's."""
    for objective in OBJECTIVES.values():
        if objective.metric == (metric or "val_accuracy"):
            return objective
    raise KeyError(metric)
