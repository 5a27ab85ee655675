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
from core.readable import number
from core.recipes.readings import comparable
from core.recipes.recipe import Arm, Control, Judgement, Outcome, Paper, Recipe, Results, digits_mlp

RATES = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0)
SEEDS = 2
BEST = len(RATES) // 3  # "among the best": the best third
#: Scores this close (relatively) tie; a tie counts against the suggestion's rate.
TIE = 0.005
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
        f"{RATES[-1]:g}; a diverged run counts as +∞), every rate within {TIE:.1%} of it or "
        f"better ranked ahead of it: reproduced when it ranks in the best third (at most "
        f"{BEST}), not when in the worse half (beyond {len(RATES) // 2}), else inconclusive."
    )
    charts: ClassVar[tuple[str, ...]] = ("loss", "val_loss", "learning_rate")
    control = Control(
        {"learning_rate": 0.1},
        "Every run at η = 0.1, the range test's end too: the sweep's arms differ by no "
        "rate, so no rate of it is better than the others.",
    )
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
        if suggestion is None or not ranked:
            return Judgement("no", numbers, "Waiting for the range test and the sweep.")
        nearest = min(RATES, key=lambda r: abs(math.log(r / suggestion)))
        rank = tied_rank(scores, nearest)
        numbers["nearest sweep rate"] = nearest
        numbers["its rank (1 = best; ties against it)"] = float(rank)
        if rank <= BEST:
            reproduced: Outcome = "yes"
        else:
            reproduced = "no" if rank > len(RATES) // 2 else "inconclusive"
        sentence = (
            f"The range test suggests η = {number(suggestion, 3)}; the nearest rate of the sweep, "
            f"{nearest:g}, ranks {rank:g} of {len(ranked)} by val_loss, ties against it "
            f"(best: {', '.join(f'{r:g}' for r in ranked[:BEST])})."
        )
        return Judgement(reproduced, numbers, sentence)


def tied_rank(scores: dict[float, float], rate: float) -> float:
    """`rate`'s rank by score (1 = lowest), every other rate within `TIE` of it or lower
    counted ahead of it; NaN while its runs train."""
    mine = scores[rate]
    if math.isnan(mine):
        return math.nan
    ahead = [r for r, s in scores.items() if r != rate and s <= mine + TIE * abs(mine)]
    return 1.0 + len(ahead)


RECIPE = LrRangeTest()
