"""The numbers a verdict reads off a recipe's stored metrics: a series as logged, a
run's final value, a group's values for a group test, and what a group test says."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from core.group_comparison import paired_interval
from core.readable import number
from core.recipes.recipe import Outcome, RunResult
from core.store import Metrics


def series(metrics: Metrics, key: str) -> tuple[np.ndarray, np.ndarray]:
    """The steps at which `key` was logged and its values there (finite or not)."""
    if key not in metrics:
        return np.empty(0, np.int64), np.empty(0)
    logged = ~np.isnan(metrics[key])
    return metrics.steps[logged], metrics[key][logged]


def steps_per_epoch(metrics: Metrics) -> float | None:
    """The run's steps an epoch, as it counted them: its `epoch` series is the step over
    that (full batches only, so digits' 1,438 examples make 22 steps of 64, not 23);
    None when it logged no epoch."""
    epoch_steps, epochs = series(metrics, "epoch")
    if not len(epochs) or not epochs[-1] > 0:
        return None
    return float(epoch_steps[-1] / epochs[-1])


def last_epoch(metrics: Metrics, key: str) -> np.ndarray:
    """`key`'s values logged in the run's last epoch, as the run itself counted its epochs
    (`steps_per_epoch`): those past the start of the epoch its last logged step ends.
    All of `key`'s values when the run logged no epoch."""
    steps, values = series(metrics, key)
    per_epoch = steps_per_epoch(metrics)
    if per_epoch is None:
        return values
    _, epochs = series(metrics, "epoch")
    start = (math.ceil(epochs[-1]) - 1) * per_epoch
    return values[steps > start + 1e-9 * per_epoch]


def final(metrics: Metrics, key: str) -> float:
    """`key`'s last logged value; NaN when it was never logged."""
    _, values = series(metrics, key)
    return float(values[-1]) if len(values) else math.nan


def steps_to(metrics: Metrics, key: str, fraction: float) -> float:
    """The steps from `key`'s first logged value to the first at most `fraction` × it (a
    loss falling to a target): +∞ when none is, or the first is not finite, or it was
    never logged."""
    steps, values = series(metrics, key)
    if not len(values) or not math.isfinite(values[0]):
        return math.inf
    below = np.flatnonzero(values <= fraction * values[0])
    return float(steps[below[0]] - steps[0]) if len(below) else math.inf


def finals(runs: Sequence[RunResult], key: str) -> list[float]:
    """`key`'s last logged value in each run."""
    return [final(run.metrics, key) for run in runs]


def mean(values: Sequence[float]) -> float:
    """The mean, NaN for no values (while runs train)."""
    return float(np.mean(values)) if len(values) else math.nan


def comparable(runs: Sequence[RunResult], key: str) -> list[float]:
    """`key`'s final value in each run, for a group test: +inf for a run that diverged
    or never logged a finite value (the worst, for a loss)."""
    values = []
    for run, value in zip(runs, finals(runs, key), strict=True):
        values.append(math.inf if run.diverged or not math.isfinite(value) else value)
    return values


@dataclass(frozen=True)
class PairedTest:
    """A against B seed for seed: the k-th run of each arm shares its seed (initial weights
    and batch order, as a recipe's repeats do), so their difference holds what the arms
    differ by, not what the seeds do.

    Attributes:
        differences: a_k − b_k for each seed k (±∞ when one of the pair diverged, 0
            when both did).
        low, high: The 95% t interval of their mean; None when one is infinite.
    """

    differences: tuple[float, ...]
    low: float | None
    high: float | None

    @property
    def mean(self) -> float:
        return float(np.mean(self.differences))

    def numbers(self, difference: str) -> dict[str, float]:
        """What a verdict shows of it: the mean difference, named `difference`, and the
        interval (NaN without one)."""
        return {
            difference: self.mean,
            "95% interval low (seed for seed)": math.nan if self.low is None else self.low,
            "95% interval high (seed for seed)": math.nan if self.high is None else self.high,
        }

    def interval_text(self) -> str:
        """`(95% interval 0.03 to 1.5, seed for seed)`, or nothing without an interval."""
        if self.low is None or self.high is None:
            return ""
        return f" (95% interval {number(self.low, 3)} to {number(self.high, 3)}, seed for seed)"

    def outcome(self, smallest: float) -> Outcome:
        """What the test says of a claim that A is larger: `yes` when the interval lies
        above 0; `no` when it lies below `smallest`, the least difference the claim counts
        (no effect that large: an equivalence test's logic); else `inconclusive`. Without
        an interval: `yes` when A is larger at every seed, `no` when at none."""
        if self.low is not None and self.high is not None:
            if self.low > 0:
                return "yes"
            return "no" if self.high < smallest else "inconclusive"
        if all(d > 0 for d in self.differences):
            return "yes"
        return "no" if all(d <= 0 for d in self.differences) else "inconclusive"


def paired_test(a: Sequence[float], b: Sequence[float]) -> PairedTest:
    """`a` against `b`, the k-th of each a pair; raises `ValueError` for fewer than two
    pairs or groups of different sizes."""
    if len(a) != len(b):
        raise ValueError(f"paired groups differ in size ({len(a)} and {len(b)})")
    differences = tuple(
        float(x - y) if math.isfinite(x) or math.isfinite(y) else 0.0
        for x, y in zip(a, b, strict=True)
    )
    if not all(math.isfinite(d) for d in differences):
        return PairedTest(differences, None, None)
    return PairedTest(differences, *paired_interval(differences))
