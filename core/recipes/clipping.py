"""Clipping lets a larger step train (Zhang, He, Sra & Jadbabaie, ICLR 2020): at a
learning rate where plain gradient descent blows up, clipping the gradient's norm keeps
the steps bounded where the loss is steep, and the run trains.

SGD at η = 2 on digits with the MLP, batch 64, 5 epochs (110 steps), plain and with
`clip_norm` = 1, 3 seeds each. Plain SGD there does not reach NaN: its ReLU network
blows up in its first steps and dies, its loss stuck at chance (ln 10 ≈ 2.3).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from core.readable import number
from core.recipes.readings import finals, last_epoch, mean, series
from core.recipes.recipe import (
    Arm,
    Control,
    Judgement,
    Outcome,
    Paper,
    Recipe,
    Results,
    RunResult,
    digits_mlp,
)

RATE = 2.0
CLIP = 1.0
SEEDS = 3
FAILED = 0.9  # a run that ends above 90% of its first loss did not train
TRAINED = 0.25  # one that ends below 25% of it did
PLAIN, CLIPPED = "plain SGD", f"clip_norm = {CLIP:g}"


def loss_ratio(run: RunResult) -> float:
    """The mean loss over the last epoch's steps ÷ the first step's loss (+∞ diverged)."""
    _, losses = series(run.metrics, "loss")
    if run.diverged or not len(losses) or not np.isfinite(losses).all():
        return float("inf")
    return float(np.mean(last_epoch(run.metrics, "loss")) / losses[0])


def ratios(runs: Sequence[RunResult]) -> list[float]:
    return [loss_ratio(run) for run in runs]


class Clipping(Recipe):
    name = "clipping"
    title = "Clipping lets a larger step train"
    paper = Paper(
        "Zhang, He, Sra & Jadbabaie",
        2020,
        "ICLR",
        "Why Gradient Clipping Accelerates Training: A Theoretical Justification for Adaptivity",
    )
    claim = "At a learning rate where plain SGD diverges, SGD with clip_norm converges."
    measure = (
        f"Each run's last-epoch mean training loss ÷ its first loss, SGD at η = {RATE:g}, "
        f"{SEEDS} seeds plain and {SEEDS} with clip_norm = {CLIP:g}: reproduced when every "
        f"plain run ends above {FAILED:g} (or diverges) and every clipped one below "
        f"{TRAINED:g}; not when a plain run ends below {TRAINED:g} or a clipped one above "
        f"{FAILED:g}; else inconclusive."
    )
    charts: ClassVar[tuple[str, ...]] = ("loss", "grad_norm", "clip_active")
    control = Control(
        {"clip_norm": 1000.0},
        "A clip norm no gradient reaches: nothing is clipped, and the clipped arm is plain "
        "SGD at the same rate.",
    )
    runtime_s = 10.0

    def arms(self) -> tuple[Arm, ...]:
        return tuple(
            Arm(
                key,
                digits_mlp(
                    optimizer="sgd",
                    hyperparameters={"learning_rate": RATE, "clip_norm": clip},
                    batch_size=64,
                    epochs=5,
                ),
                SEEDS,
            )
            for key, clip in ((PLAIN, None), (CLIPPED, CLIP))
        )

    def judge(self, results: Results) -> Judgement:
        plain, clipped = results.get(PLAIN, ()), results.get(CLIPPED, ())
        plain_ratios, clipped_ratios = ratios(plain), ratios(clipped)
        numbers = {
            "loss ratio, plain (worst)": min(plain_ratios, default=float("nan")),
            "loss ratio, clipped (worst)": max(clipped_ratios, default=float("nan")),
            "diverged, plain": float(sum(run.diverged for run in plain)),
            "val_accuracy, plain (mean)": mean(finals(plain, "val_accuracy")),
            "val_accuracy, clipped (mean)": mean(finals(clipped, "val_accuracy")),
        }
        if all(r > FAILED for r in plain_ratios) and all(r < TRAINED for r in clipped_ratios):
            reproduced: Outcome = "yes" if plain and clipped else "no"
        elif any(r < TRAINED for r in plain_ratios) or any(r > FAILED for r in clipped_ratios):
            reproduced = "no"  # plain SGD trained, or a clipped run failed as plain ones do
        else:
            reproduced = "inconclusive"  # a run between "trained" and "did not train"
        plain, clipped = (
            number(numbers[f"loss ratio, {a} (worst)"], 2) for a in ("plain", "clipped")
        )
        sentence = (
            f"At η = {RATE:g}, plain SGD ended at {plain}× "
            f"its first loss or more (val_accuracy {numbers['val_accuracy, plain (mean)']:.1%}); "
            f"with clip_norm = {CLIP:g} at {clipped}× or "
            f"less (val_accuracy {numbers['val_accuracy, clipped (mean)']:.1%})."
        )
        return Judgement(reproduced, numbers, sentence)


RECIPE = Clipping()
