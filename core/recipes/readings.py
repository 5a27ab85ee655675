"""The numbers a verdict reads off a recipe's stored metrics: a series as logged, a
run's final value, a group's values for a group test, and what a group test says."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from core.group_comparison import Comparison
from core.recipes.recipe import Outcome, RunResult
from core.store import Metrics


def series(metrics: Metrics, key: str) -> tuple[np.ndarray, np.ndarray]:
    """The steps at which `key` was logged and its values there (finite or not)."""
    if key not in metrics:
        return np.empty(0, np.int64), np.empty(0)
    logged = ~np.isnan(metrics[key])
    return metrics.steps[logged], metrics[key][logged]


def last_epoch(metrics: Metrics, key: str) -> np.ndarray:
    """`key`'s values logged in the run's last epoch, as the run itself counted its epochs:
    its `epoch` series is the step over the run's steps an epoch (full batches only, so
    digits' 1,438 examples make 22 steps of 64, not 23), and the last epoch's steps are
    those past the start of the epoch its last logged step ends. All of `key`'s values
    when the run logged no epoch."""
    steps, values = series(metrics, key)
    epoch_steps, epochs = series(metrics, "epoch")
    if not len(epochs) or not epochs[-1] > 0:
        return values
    steps_per_epoch = epoch_steps[-1] / epochs[-1]
    start = (math.ceil(epochs[-1]) - 1) * steps_per_epoch
    return values[steps > start + 1e-9 * steps_per_epoch]


def final(metrics: Metrics, key: str) -> float:
    """`key`'s last logged value; NaN when it was never logged."""
    _, values = series(metrics, key)
    return float(values[-1]) if len(values) else math.nan


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


def group_outcome(test: Comparison, smallest: float) -> Outcome:
    """What a group test of A − B says of a claim that A is larger: `yes` when its
    interval lies above 0; `no` when it lies below `smallest`, the least difference the
    claim counts (no effect that large: an equivalence test's logic); else
    `inconclusive`. Without an interval (a run diverged, or one run a group): `yes` when
    every A is larger than every B, `no` when none is."""
    if test.low is not None and test.high is not None:
        if test.low > 0:
            return "yes"
        return "no" if test.high < smallest else "inconclusive"
    if min(test.a) > max(test.b):
        return "yes"
    return "no" if max(test.a) <= min(test.b) else "inconclusive"
