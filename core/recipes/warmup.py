"""Warmup rescues Adam at a large learning rate (Goyal et al., 2017; Liu et al., ICLR
2020): without warmup, the first steps at a large rate do damage that the rest of the
run does not repair (here: ReLU units that die); growing the rate over the first steps
avoids it.

Adam at η = 0.2 on digits with the MLP, batch 64, 8 epochs (176 steps) on a cosine
schedule, with no warmup and with 50 warmup steps, 5 seeds each. At a constant rate
(no decay) 100 warmup steps did not help in a trial at η = 0.1 and 0.3: after the warmup,
the same large rate does the same damage; the decay is part of the case.
"""

from __future__ import annotations

from typing import ClassVar

from core.readable import number
from core.recipes.readings import comparable, finals, mean, paired_test
from core.recipes.recipe import Arm, Control, Judgement, Paper, Recipe, Results, digits_mlp

RATE = 0.2
WARMUP = 50
SEEDS = 5
#: The least difference of final val_loss that counts as warmup's effect (the published
#: one is about 0.8): an interval wholly below it says no.
SMALLEST = 0.25
COLD, WARM = "no warmup", f"{WARMUP} warmup steps"


class Warmup(Recipe):
    name = "warmup"
    title = "Warmup rescues Adam at a large learning rate"
    paper = Paper(
        "Liu, Jiang, He, Chen, Liu, Gao & Han",
        2020,
        "ICLR",
        "On the Variance of the Adaptive Learning Rate and Beyond (after Goyal et al., 2017)",
    )
    claim = (
        "At a large learning rate, Adam without warmup diverges or ends worse; with warmup "
        "it converges."
    )
    measure = (
        f"The final val_loss of {SEEDS} seeds without warmup against {SEEDS} with {WARMUP} "
        f"warmup steps (Adam, η = {RATE:g}, cosine schedule), compared seed for seed "
        "(run k of each arm shares seed k; a diverged run counts as +∞): "
        "reproduced when the 95% t interval of the mean difference (no warmup − warmup) "
        f"is above 0, not when it is below {SMALLEST:g}, else inconclusive; with a "
        "diverged run, reproduced when the run without warmup ends worse at every seed, "
        "not when at none."
    )
    charts: ClassVar[tuple[str, ...]] = ("val_loss", "loss", "learning_rate")
    control = Control(
        {"warmup_steps": 0},
        "No warmup in either arm: the two arms are the same runs.",
    )
    runtime_s = 15.0

    def arms(self) -> tuple[Arm, ...]:
        return tuple(
            Arm(
                key,
                digits_mlp(
                    optimizer="adam",
                    hyperparameters={"learning_rate": RATE},
                    batch_size=64,
                    epochs=8,
                    lr_schedule="cosine",
                    warmup_steps=warmup,
                ),
                SEEDS,
            )
            for key, warmup in ((COLD, 0), (WARM, WARMUP))
        )

    def judge(self, results: Results) -> Judgement:
        cold, warm = results.get(COLD, ()), results.get(WARM, ())
        numbers = {
            "val_loss, no warmup (mean)": mean(finals(cold, "val_loss")),
            "val_loss, warmup (mean)": mean(finals(warm, "val_loss")),
            "val_accuracy, no warmup (mean)": mean(finals(cold, "val_accuracy")),
            "val_accuracy, warmup (mean)": mean(finals(warm, "val_accuracy")),
            "diverged, no warmup": float(sum(run.diverged for run in cold)),
            "diverged, warmup": float(sum(run.diverged for run in warm)),
        }
        if len(cold) < SEEDS or len(warm) < SEEDS:
            return Judgement("no", numbers, "Waiting for runs with and without warmup.")
        test = paired_test(comparable(cold, "val_loss"), comparable(warm, "val_loss"))
        numbers |= test.numbers("difference (no warmup − warmup)")
        sentence = (
            f"Final val_loss {number(numbers['val_loss, no warmup (mean)'], 3)} without warmup "
            f"against {number(numbers['val_loss, warmup (mean)'], 3)} with it (val_accuracy "
            f"{numbers['val_accuracy, no warmup (mean)']:.1%} against "
            f"{numbers['val_accuracy, warmup (mean)']:.1%}): a difference of "
            f"{number(test.mean, 3)}{test.interval_text()}."
        )
        return Judgement(test.outcome(SMALLEST), numbers, sentence)


RECIPE = Warmup()
