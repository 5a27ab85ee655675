"""The learning-rate range test (Smith, WACV 2017): one short run whose learning rate
grows exponentially suggests a rate, which should be among the best of a sweep.

A range test of SGD on digits with the MLP (batch 64, 200 steps from 1e-4 to 10; the
lab's suggestion, see `core.engine.lr_find`), then the same config trained for 3 epochs
at 6 log-spaced rates from 0.01 to 3, 2 seeds each, scored by the mean final val_loss.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from core.engine.lr_find import RangeTest, range_test_config
from core.recipes.readings import comparable
from core.recipes.recipe import Arm, Judgement, Paper, Recipe, Results, digits_mlp

RATES = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0)
SEEDS = 2
TEST = "range test"
BASE = digits_mlp(optimizer="sgd", batch_size=64, epochs=3)


def key(rate: float) -> str:
    return f"η = {rate:g}"


class LrRangeTest(Recipe):
    name = "lr_range_test"
    title = "Learning-rate range test"
    paper = Paper(
        "Smith",
        2017,
        "WACV",
        "Cyclical Learning Rates for Training Neural Networks",
    )
    claim = "The range test's suggested learning rate is among the best of a sweep."
    measure = (
        f"The sweep's rate nearest the suggestion (in log) against the sweep's ranking by "
        f"mean final val_loss over {SEEDS} seeds ({len(RATES)} rates from {RATES[0]:g} to "
        f"{RATES[-1]:g}; a diverged run counts as +∞): reproduced when it is in the best "
        f"third ({len(RATES) // 3} rates)."
    )
    charts: ClassVar[tuple[str, ...]] = ("loss", "val_loss", "learning_rate")
    runtime_s = 20.0

    def arms(self) -> tuple[Arm, ...]:
        test = Arm(TEST, range_test_config(BASE, steps=200, start=1e-4, end=10.0))
        sweep = tuple(
            Arm(key(rate), BASE.replace(hyperparameters={"learning_rate": rate}), SEEDS)
            for rate in RATES
        )
        return (test, *sweep)

    def judge(self, results: Results) -> Judgement:
        numbers: dict[str, float] = {}
        tests = results.get(TEST, ())
        suggestion = RangeTest.of(tests[0].metrics).suggestion if tests else None
        numbers["suggestion"] = math.nan if suggestion is None else suggestion
        scores = {}
        for rate in RATES:
            runs = results.get(key(rate), ())
            scores[rate] = float(np.mean(comparable(runs, "val_loss"))) if runs else math.nan
            numbers[f"val_loss at η={rate:g}"] = scores[rate]
        ranked = sorted((r for r in RATES if not math.isnan(scores[r])), key=scores.__getitem__)
        best = ranked[: len(RATES) // 3]
        if suggestion is None or not ranked:
            return Judgement(False, numbers, "Waiting for the range test and the sweep.")
        nearest = min(RATES, key=lambda r: abs(math.log(r / suggestion)))
        rank = ranked.index(nearest) + 1 if nearest in ranked else math.nan
        numbers["nearest sweep rate"] = nearest
        numbers["its rank (1 = best)"] = float(rank)
        sentence = (
            f"The range test suggests η = {suggestion:.3g}; the nearest rate of the sweep, "
            f"{nearest:g}, ranks {rank} of {len(ranked)} by val_loss (best: "
            f"{', '.join(f'{r:g}' for r in best)})."
        )
        return Judgement(nearest in best, numbers, sentence)


RECIPE = LrRangeTest()
