"""Figure 21: what the Sweep page's knob importances cost (issue 51's loaded machine).

The page computes them once per completed trial (`ui.sweep_analysis_view` caches them until
another completes): each evaluator on all trials, then on `RESAMPLES` bootstrap resamples
for the interval (`core.sweep.analysis.importances`). Measured on a study of 100 trials of
three knobs, one of which decides the value; the detail gives 20 trials too.
"""

from __future__ import annotations

import statistics
import time

import optuna

from bench.figures import Settings
from bench.rows import Measured, Quantity
from core.sweep.analysis import METHODS, RESAMPLES, importances

SIZES = (20, 100)  # trials: a short sweep and a long one
SAMPLES = 3


def _study(trials: int) -> optuna.Study:
    """`trials` random trials of three knobs, where `x` alone decides the value."""

    def objective(trial: optuna.Trial) -> float:
        trial.suggest_float("y", 0.0, 1.0)
        trial.suggest_categorical("optimizer", ["sgd", "adam"])
        return trial.suggest_float("x", 0.0, 1.0)

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(0))
    study.optimize(objective, n_trials=trials)
    return study


def bootstrap_cost(settings: Settings) -> Measured:
    """Median seconds of the slowest evaluator's importances, with its interval, over 100
    trials."""
    samples = settings.pick(SAMPLES, 1)
    seconds: dict[tuple[int, str], float] = {}
    for method in METHODS:  # untimed: the evaluators' first calls import what they use
        importances(_study(SIZES[0]), method, resamples=1)
    for size in SIZES:
        study = _study(size)
        for method in METHODS:
            taken = []
            for _ in range(samples):
                started = time.perf_counter()
                importances(study, method)
                taken.append(time.perf_counter() - started)
            seconds[size, method] = statistics.median(taken)
    slowest = max(METHODS, key=lambda method: seconds[SIZES[-1], method])
    each = "; ".join(f"{size} trials, {method}: {s:.2f} s" for (size, method), s in seconds.items())
    return Measured(
        a=Quantity(seconds[SIZES[-1], slowest], "s"),
        detail=(
            f"{slowest} over {SIZES[-1]} trials with {RESAMPLES} bootstrap resamples, median of "
            f"{samples}; by size then method: {each}."
        ),
    )
