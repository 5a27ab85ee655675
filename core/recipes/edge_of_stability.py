"""Edge of stability (Cohen, Kaur, Li, Kolter & Talwalkar, ICLR 2021): full-batch gradient
descent at step size η drives the sharpness up (progressive sharpening) until it reaches
2/η, where it hovers while the loss keeps falling, non-monotonically.

Two runs of full-batch GD (the batch is the whole training split) on digits with the MLP,
at η = 0.25 and 0.5, 200 steps each, sharpness every 5 steps. With the cross-entropy loss
the sharpness drifts below 2/η once the loss nears zero (Cohen et al. §3 and appendix C;
here after about 250 steps at η = 0.25: over steps 300-600 its median is 5.4, 2/η = 8),
so the runs cover the phase the claim is about, and the measure says so.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from core.readable import number
from core.recipes.readings import series
from core.recipes.recipe import Arm, Control, Judgement, Paper, Recipe, Results, digits_mlp, said

RATES = (0.25, 0.5)
STEPS = 200
TOLERANCE = 0.25  # each late median within ±25% of 2/η
RATIO = (1.5, 2.5)  # the two plateaus differ by "about 2×"
TRAIN_SIZE = 1_438  # digits' training split: one batch, one step per epoch


def key(rate: float) -> str:
    return f"η = {rate:g}"


class EdgeOfStability(Recipe):
    name = "edge_of_stability"
    title = "Edge of stability"
    paper = Paper(
        "Cohen, Kaur, Li, Kolter & Talwalkar",
        2021,
        "ICLR",
        "Gradient Descent on Neural Networks Typically Occurs at the Edge of Stability",
    )
    claim = (
        "Full-batch gradient descent raises the sharpness until it reaches 2/η, then hovers there."
    )
    measure = (
        f"The median sharpness over the second half of each run (steps {STEPS // 2}-{STEPS}) "
        f"against 2/η, at η = {RATES[0]:g} and {RATES[1]:g}: reproduced when both are within "
        f"±{TOLERANCE:.0%} of 2/η and their ratio is in [{RATIO[0]:g}, {RATIO[1]:g}] (2/η "
        "differs by 2×)."
    )
    charts: ClassVar[tuple[str, ...]] = ("sharpness", "loss")
    control = Control(
        {"learning_rate": 0.02},
        "Both arms at η = 0.02, whose 2/η = 100 the sharpness does not reach in "
        f"{STEPS} steps: nothing holds it at the stated 2/η of either arm.",
    )
    runtime_s = 20.0

    def arms(self) -> tuple[Arm, ...]:
        return tuple(
            Arm(
                key(rate),
                digits_mlp(
                    optimizer="sgd",
                    hyperparameters={"learning_rate": rate},
                    batch_size=TRAIN_SIZE,
                    epochs=STEPS,
                    sharpness_every=5,
                    val_every=50,
                ),
            )
            for rate in RATES
        )

    def reference_lines(self) -> dict[str, list[tuple[str, float]]]:
        return {"sharpness": [(f"2/η at η = {rate:g}", 2 / rate) for rate in RATES]}

    def judge(self, results: Results) -> Judgement:
        numbers: dict[str, float] = {}
        medians = []
        for rate in RATES:
            runs = results.get(key(rate), ())
            median = first = math.nan
            if runs:
                steps, values = series(runs[0].metrics, "sharpness")
                late = values[steps > steps[-1] / 2] if len(steps) else values
                median = float(np.median(late)) if len(late) else math.nan
                first = float(values[0]) if len(values) else math.nan
            medians.append(median)
            numbers[f"2/η at η={rate:g}"] = 2 / rate
            numbers[f"first sharpness at η={rate:g}"] = first
            numbers[f"late median at η={rate:g}"] = median
            numbers[f"late median ÷ 2/η at η={rate:g}"] = median * rate / 2
        ratio = medians[0] / medians[1]
        numbers["plateau ratio"] = ratio
        near = all(abs(m * r / 2 - 1) <= TOLERANCE for m, r in zip(medians, RATES, strict=True))
        doubled = RATIO[0] <= ratio <= RATIO[1]
        sentence = (
            f"Late median sharpness {number(medians[0], 3)} at η = {RATES[0]:g} (2/η = "
            f"{2 / RATES[0]:g}) and {number(medians[1], 3)} at η = {RATES[1]:g} (2/η = "
            f"{2 / RATES[1]:g}): {medians[0] * RATES[0] / 2:.0%} and "
            f"{medians[1] * RATES[1] / 2:.0%} of 2/η, a ratio of {ratio:.2f}."
        )
        return Judgement(said(near and doubled), numbers, sentence)


RECIPE = EdgeOfStability()
