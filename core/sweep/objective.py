"""What a sweep optimizes, chosen by name, and which way: the direction follows the objective.

- `val_accuracy` (maximize): a classification run's best validation accuracy;
- `val_loss` (minimize): its lowest validation loss, for either problem;
- `val_mae` (minimize): a regression run's lowest validation mean absolute error, the
  default of a regression dataset;
- `time_to_target` (minimize): the steps a run took to reach `target` on its problem's
  metric: the first step it validated at with a validation accuracy at least `target`
  (classification), or a validation MAE at most `target` (regression). A run that never
  reaches it fails its trial, saying so: a step count it never measured is no value.

A run logs `val_accuracy` or `val_mae`, and `val_loss`, each time it validates, and ends
with the best of each as `best_<metric>` (see `core.engine.execution.BEST`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from core.knobs import InvalidInput

#: The study's user attribute that holds its objective (`Objective.to_dict`).
OBJECTIVE_ATTR: Final = "optlab_objective"
TIME_TO_TARGET: Final = "time_to_target"
#: Every objective's name, for forms and `--objective`.
OBJECTIVE_NAMES: Final = ("val_accuracy", "val_loss", "val_mae", TIME_TO_TARGET)
#: The metric each problem is scored by, and the default objective of its sweeps.
PROBLEM_METRICS: Final = {"classification": "val_accuracy", "regression": "val_mae"}
_LABELS: Final = {
    "val_accuracy": "validation accuracy",
    "val_loss": "validation loss",
    "val_mae": "validation mean absolute error",
}


@dataclass(frozen=True)
class Objective:
    """What scores a trial, and whether more of it is better.

    Attributes:
        name: One of `OBJECTIVE_NAMES`.
        metric: The validation metric the runs log that the trial follows (and reports
            as its intermediate values): the objective's own, or for time to target the
            problem's metric the target is on.
        direction: `maximize` or `minimize`.
        label: How the objective reads in a sentence.
        target: Time to target's value of `metric` to reach; None for the others.
        problem: The problem of the dataset it scores (see `core.data.PROBLEMS`).
    """

    name: str
    metric: str
    direction: Literal["maximize", "minimize"]
    label: str
    target: float | None = None
    problem: str = "classification"

    @property
    def best_key(self) -> str:
        """The run's final metric that scores a completed trial (not time to target's)."""
        return f"best_{self.metric}"

    def value_text(self, repeats: int = 1) -> str:
        """What a trial's value is, in words, for the CLI and the Sweep page: "the best
        val_accuracy its run validated at, not the last (maximized); …". A trial of
        `repeats` runs (seeds) is valued by the mean of theirs."""
        whose = "its run" if repeats == 1 else "each run"
        mean = "" if repeats == 1 else f"the mean over its {repeats} runs (seeds) of "
        if self.name == TIME_TO_TARGET:
            reached = (
                f"{self.metric} {'≥' if self.metric == 'val_accuracy' else '≤'} {self.target:g}"
            )
            what = f"the first step at which {whose} validated at {reached}"
        else:
            what = f"the best {self.metric} {whose} validated at, not the last"
        return f"{mean}{what} ({self.direction}d); a pruned trial's, its last reported one"

    def best(self, values: list[float]) -> float:
        """The best of `values`, which must not be empty."""
        return max(values) if self.direction == "maximize" else min(values)

    def reached_at(self, steps: Sequence[int], values: Sequence[float]) -> int | None:
        """Time to target's value: the first of `steps` whose value of `metric` reaches
        `target` (at least, for accuracy; at most, for an error); None if none does."""
        assert self.target is not None
        higher = self.metric == "val_accuracy"
        for step, value in zip(steps, values, strict=True):
            if math.isfinite(value) and (value >= self.target if higher else value <= self.target):
                return int(step)
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "target": self.target, "problem": self.problem}


#: A classification's default objective.
ACCURACY: Final = Objective("val_accuracy", "val_accuracy", "maximize", _LABELS["val_accuracy"])


def objective_for(name: str | None, problem: str, target: float | None = None) -> Objective:
    """The objective `name` (default: the problem's metric) of a sweep over a dataset of
    `problem` (see `core.data.PROBLEMS`). Raises `InvalidInput` naming `objective` (one
    the dataset has no metric for) or `target` (time to target's is missing, out of the
    metric's range, or given to another objective)."""
    metric = PROBLEM_METRICS[problem]
    name = metric if name is None else name
    if name not in OBJECTIVE_NAMES:
        raise InvalidInput(
            {"objective": f"must be one of {', '.join(OBJECTIVE_NAMES)} (got {name!r})"}
        )
    if name in PROBLEM_METRICS.values() and name != metric:
        raise InvalidInput(
            {"objective": f"{name} needs a dataset that logs it; a {problem} logs {metric}"}
        )
    if name != TIME_TO_TARGET:
        if target is not None:
            raise InvalidInput({"target": f"applies to {TIME_TO_TARGET} only (got {target!r})"})
        direction: Literal["maximize", "minimize"]
        direction = "maximize" if name == "val_accuracy" else "minimize"
        return Objective(name, name, direction, _LABELS[name], problem=problem)
    if reason := _target_error(target, metric):
        raise InvalidInput({"target": reason})
    assert target is not None
    label = f"steps to {_LABELS[metric]} {'≥' if metric == 'val_accuracy' else '≤'} {target:g}"
    return Objective(TIME_TO_TARGET, metric, "minimize", label, float(target), problem)


def named(stored: Mapping[str, Any] | str | None) -> Objective:
    """The objective a study keeps in `OBJECTIVE_ATTR`: `Objective.to_dict()`, or from
    before objectives were chosen, its metric's name (None: a classification's)."""
    if not isinstance(stored, Mapping):
        metric = stored or "val_accuracy"
        problem = next(p for p, m in PROBLEM_METRICS.items() if m == metric)
        return objective_for(metric, problem)
    return objective_for(stored["name"], stored["problem"], stored.get("target"))


def _target_error(target: Any, metric: str) -> str | None:
    if target is None:
        return f"is required for {TIME_TO_TARGET}: the {_LABELS[metric]} to reach"
    if isinstance(target, bool) or not isinstance(target, int | float) or not math.isfinite(target):
        return f"must be a number (got {target!r})"
    if metric == "val_accuracy" and not 0 < target <= 1:
        return f"must be a validation accuracy in (0, 1] (got {target!r})"
    if metric == "val_mae" and target <= 0:
        return f"must be a validation MAE above 0 (got {target!r})"
    return None
