"""Projection onto a ball: projected gradient descent (`projected_gd`) keeps the
parameter vector inside the ball ‖θ‖ ≤ r at every step; what that does to the gap
between training and validation is measured, not assumed.

Full-batch gradient descent (η = 0.5, 300 steps) on digits with the MLP, unconstrained
and projected onto radii 16, 13 and 10 (the unconstrained run ends near ‖θ‖ = 17.4, its
initial norm about 13.7). Full batches make the logged loss the whole training split's.

The verdict reads ‖θ‖ from the weights after each step (`weight_norm`, measured by the
telemetry from the variables, every logged step), never the optimizer's `param_norm`:
that one is the projection stage's own formula, ‖θ‖·r / max(‖θ‖, r), never above r
whatever the weights do, so a verdict on it could not fail.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from core.readable import number
from core.recipes.readings import final, series
from core.recipes.recipe import Arm, Control, Judgement, Paper, Recipe, Results, digits_mlp, said

RATE = 0.5
STEPS = 300
RADII = (None, 16.0, 13.0, 10.0)
TRAIN_SIZE = 1_438
#: float32 rounding of the norm measured.
SLACK = 1e-5


def key(radius: float | None) -> str:
    return "no projection" if radius is None else f"r = {radius:g}"


class Projection(Recipe):
    name = "projection"
    title = "Projection keeps the weights in a ball"
    paper = Paper(
        "Optimizer Lab",
        None,
        "projected_gd",
        "Projected gradient descent onto an L2 ball (see bench/article.py)",
    )
    claim = "Projected gradient descent keeps ‖θ‖ ≤ r at every step."
    measure = (
        "The largest ‖θ‖ read from the weights after each step of each projected run, "
        "against its radius "
        f"(reproduced when it is at most r·(1 + {SLACK:g}) for every radius); and, whatever "
        "it is, each run's final gap val_loss − loss (full-batch training loss)."
    )
    charts: ClassVar[tuple[str, ...]] = ("param_norm", "loss", "val_loss")
    control = Control(
        {"radius": 1000.0},
        "A radius no weight reaches: the projection never acts, and ‖θ‖ grows past the "
        "stated radii as the unconstrained run's does.",
    )
    #: What the verdict reads: the weights' norm, measured apart from the projection.
    NORM = "weight_norm"
    runtime_s = 15.0

    def arms(self) -> tuple[Arm, ...]:
        return tuple(
            Arm(
                key(radius),
                digits_mlp(
                    optimizer="sgd" if radius is None else "projected_gd",
                    hyperparameters={"learning_rate": RATE, "radius": radius},
                    batch_size=TRAIN_SIZE,
                    epochs=STEPS,
                    val_every=50,
                    per_layer_every=1,  # `weight_norm` at every step
                ),
            )
            for radius in RADII
        )

    def judge(self, results: Results) -> Judgement:
        numbers: dict[str, float] = {}
        held, gaps = [], []
        for radius in RADII:
            runs = results.get(key(radius), ())
            metrics = runs[0].metrics if runs else None
            largest = gap = math.nan
            if metrics is not None:
                _, norms = series(metrics, self.NORM)
                largest = float(np.max(norms)) if len(norms) else math.nan
                gap = final(metrics, "val_loss") - final(metrics, "loss")
                numbers[f"val_accuracy, {key(radius)}"] = final(metrics, "val_accuracy")
            numbers[f"max ‖θ‖, {key(radius)}"] = largest
            numbers[f"gap val_loss − loss, {key(radius)}"] = gap
            gaps.append(f"{number(gap, 3)} ({key(radius)})")
            if radius is not None:
                held.append(largest <= radius * (1 + SLACK))
        sentence = (
            f"‖θ‖ stayed within r at every step for {sum(held)} of {len(held)} radii; the "
            f"final gap val_loss − loss: {', '.join(gaps)}."
        )
        return Judgement(said(all(held) and len(held) == len(RADII) - 1), numbers, sentence)


RECIPE = Projection()
