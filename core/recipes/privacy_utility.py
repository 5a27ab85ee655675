"""The privacy/utility trade-off of DP-SGD (Abadi et al., CCS 2016): more noise spends less
privacy, a lower ε at the same δ, and costs accuracy.

The MLP on digits by DP-SGD (Adam at η = 0.003, batches of 64 on average, 8 epochs, 176
steps, C = 1, δ = 1e-5) at three noise multipliers σ, 2 seeds each. ε is the accounting's
for the run's (q, σ, steps, δ), the same for both seeds; the accuracy is the run's.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import ClassVar

from core.readable import number
from core.recipes.readings import finals, mean
from core.recipes.recipe import (
    Arm,
    Control,
    Judgement,
    Outcome,
    Paper,
    Recipe,
    Results,
    digits_mlp,
)

NOISES = (0.5, 1.0, 2.0)
CLIP, DELTA = 1.0, 1e-5
SEEDS = 2
#: ε falls with the noise when each arm's is at most this share of the one before it.
EPSILON_FALLS = 0.9
#: The accuracy falls with the noise when each arm's mean is this much below the one
#: before it; it rises (the finding fails) when one is this much above.
ACCURACY_GAP = 0.02


def key(noise: float) -> str:
    return f"σ = {noise:g}"


class PrivacyUtility(Recipe):
    name = "privacy_utility"
    title = "More noise: less privacy spent, lower accuracy"
    paper = Paper(
        "Abadi, Chu, Goodfellow, McMahan, Mironov, Talwar & Zhang",
        2016,
        "CCS",
        "Deep Learning with Differential Privacy",
    )
    claim = (
        "With DP-SGD, a larger noise multiplier σ spends less privacy (a lower ε at the "
        "same δ) and gives a less accurate model: privacy costs utility."
    )
    measure = (
        f"Each arm's ε at δ = {DELTA:g} after its last step (dp_epsilon) and its mean final "
        f"val_accuracy over {SEEDS} seeds, at σ = "
        + ", ".join(f"{noise:g}" for noise in NOISES)
        + f" (C = {CLIP:g}): reproduced when each arm's ε is at most {EPSILON_FALLS:g}× the "
        f"one before it and its accuracy at least {ACCURACY_GAP:g} below it; not when an "
        f"ε does not fall so, or an accuracy is {ACCURACY_GAP:g} above the one before it; "
        "else inconclusive."
    )
    charts: ClassVar[tuple[str, ...]] = ("val_accuracy", "dp_epsilon", "loss")
    control = Control(
        {"dp_noise": 1.0},
        "One noise multiplier in every arm: the same privacy spent, the same accuracy up to "
        "the seeds; there is no trade-off to see.",
    )
    runtime_s = 40.0

    def arms(self) -> tuple[Arm, ...]:
        return tuple(
            Arm(
                key(noise),
                digits_mlp(
                    optimizer="adam",
                    hyperparameters={"learning_rate": 0.003},
                    batch_size=64,
                    epochs=8,
                    dp_clip=CLIP,
                    dp_noise=noise,
                    dp_delta=DELTA,
                ),
                SEEDS,
            )
            for noise in NOISES
        )

    def judge(self, results: Results) -> Judgement:
        arms = [results.get(key(noise), ()) for noise in NOISES]
        epsilons = [max(finals(runs, "dp_epsilon"), default=math.nan) for runs in arms]
        accuracies = [mean(finals(runs, "val_accuracy")) for runs in arms]
        numbers = {f"ε, {key(n)}": e for n, e in zip(NOISES, epsilons, strict=True)}
        for noise, accuracy in zip(NOISES, accuracies, strict=True):
            numbers[f"val_accuracy, {key(noise)} (mean)"] = accuracy
        epsilon_falls = _each(epsilons, lambda before, after: after <= EPSILON_FALLS * before)
        accuracy_falls = _each(accuracies, lambda before, after: after <= before - ACCURACY_GAP)
        accuracy_rises = _some(accuracies, lambda before, after: after >= before + ACCURACY_GAP)
        if epsilon_falls and accuracy_falls:
            reproduced: Outcome = "yes"
        elif (_known(epsilons) and not epsilon_falls) or accuracy_rises:
            reproduced = "no"  # the privacy spent does not fall, or noise helped
        else:
            reproduced = "inconclusive"
        said = "; ".join(
            f"{key(noise)}: ε = {number(epsilon, 3)}, val_accuracy {_percent(accuracy)}"
            for noise, epsilon, accuracy in zip(NOISES, epsilons, accuracies, strict=True)
        )
        return Judgement(reproduced, numbers, f"At δ = {number(DELTA)}, {said}.")


Pairwise = Callable[[float, float], bool]


def _known(values: Sequence[float]) -> bool:
    return all(math.isfinite(v) for v in values)


def _each(values: Sequence[float], holds: Pairwise) -> bool:
    """Whether every value is known and each pair of neighbours (before, after) `holds`."""
    return _known(values) and all(holds(a, b) for a, b in itertools.pairwise(values))


def _some(values: Sequence[float], holds: Pairwise) -> bool:
    """Whether a pair of known neighbours (before, after) `holds`."""
    return any(
        math.isfinite(a) and math.isfinite(b) and holds(a, b) for a, b in itertools.pairwise(values)
    )


def _percent(value: float) -> str:
    return "–" if math.isnan(value) else f"{value:.1%}"


RECIPE = PrivacyUtility()
