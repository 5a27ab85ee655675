"""The Optuna samplers and the pruner a `SweepPlan` runs with (this module imports Optuna)."""

from __future__ import annotations

from typing import Any, Final

import optuna

from core.sweep.plan import MAX_SEED, SweepPlan


class AskTellGridSampler(optuna.samplers.GridSampler):
    """`GridSampler` that leaves stopping to the sweep.

    `GridSampler.after_trial` calls `study.stop()` once the grid is covered, which raises
    `RuntimeError` outside `study.optimize` (optuna/optuna#5141); a sweep never asks for
    more trials than its grid has points anyway.
    """

    def after_trial(self, *args: Any, **kwargs: Any) -> None:
        pass


def make_sampler(plan: SweepPlan, trials_so_far: int) -> optuna.samplers.BaseSampler:
    """A fresh sampler for `plan`. Random and TPE seeds move on by `trials_so_far`, so that a
    resumed sweep does not replay its first values; a grid keeps its seed, which fixes the
    order of its points (trial `k` of a fresh study takes the `k`-th) across resumptions."""
    if plan.sampler == "grid":
        return AskTellGridSampler(plan.grid(), seed=plan.seed)
    seed = (plan.seed + trials_so_far) % (MAX_SEED + 1)
    if plan.sampler == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    # constant_liar: trials still training count as poor results, which keeps trials that
    # train at the same time from crowding into the same region.
    return optuna.samplers.TPESampler(seed=seed, constant_liar=True)


#: Trials that finish before the default pruner judges any: a tenth of the budget, within
#: these bounds. Optuna's own default, 5, would exempt a quarter of a 20-trial sweep; with
#: 3 the median pruner saved 34-46% of a 20-trial sweep's steps at the same best value,
#: with 5 only 21-31% (bench figure 19, sampler seeds 0-2).
STARTUP_TRIALS: Final = (3, 5)


def startup_trials(n_trials: int) -> int:
    """How many trials of a sweep of `n_trials` finish before the default pruner judges any."""
    low, high = STARTUP_TRIALS
    return min(high, max(low, n_trials // 10))


def default_pruner(n_trials: int) -> optuna.pruners.BasePruner:
    """Median pruning: a trial stops when its best validation accuracy so far is below the
    median of earlier trials' at the same step. The first `startup_trials(n_trials)` trials
    always finish, and a trial is judged from its first validation on (the end of its first
    epoch unless the config's `val_every` is set)."""
    return optuna.pruners.MedianPruner(n_startup_trials=startup_trials(n_trials), n_warmup_steps=0)
