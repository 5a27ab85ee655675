"""Large batches find sharper minima (Keskar, Mudigere, Nocedal, Smelyanskiy & Tang,
ICLR 2017): trained for the same number of epochs, a large batch ends where the loss is
sharper than where a small batch ends.

Adam (as Keskar et al.) at η = 0.01 on digits with the MLP for 40 epochs, at a batch of
128 and at the full training split (1,438), 3 seeds each; both reach about 100% training
accuracy. The lab's sharpness is the top Hessian eigenvalue on each run's first batch:
128 examples for the small batch, the whole split for the large one.
"""

from __future__ import annotations

from typing import ClassVar

from core.recipes.readings import comparable, finals, mean, paired_test
from core.recipes.recipe import Arm, Control, Judgement, Paper, Recipe, Results, digits_mlp

SMALL, LARGE = 128, 1_438
EPOCHS = 40
SEEDS = 3
#: The least difference of final sharpness that counts as the large batch's: an interval
#: wholly below it says no.
SMALLEST = 0.5
SMALL_KEY, LARGE_KEY = f"batch {SMALL}", f"batch {LARGE} (full)"


class LargeBatch(Recipe):
    name = "large_batch"
    title = "Large batches find sharper minima"
    paper = Paper(
        "Keskar, Mudigere, Nocedal, Smelyanskiy & Tang",
        2017,
        "ICLR",
        "On Large-Batch Training for Deep Learning: Generalization Gap and Sharp Minima",
    )
    claim = "For the same number of epochs, a large batch ends at a sharper minimum."
    measure = (
        f"The final sharpness of {SEEDS} seeds at batch {LARGE} against {SEEDS} at batch "
        f"{SMALL} ({EPOCHS} epochs of Adam each), seed for seed (run k of each arm shares "
        "seed k): reproduced when the 95% t interval of the mean difference (large − "
        f"small) is above 0, not when it is below {SMALLEST:g}, else inconclusive."
    )
    charts: ClassVar[tuple[str, ...]] = ("sharpness", "loss", "val_loss")
    control = Control(
        {"batch_size": SMALL},
        f"One batch size, {SMALL}, for both arms: nothing is left to make one sharper.",
    )
    runtime_s = 30.0

    def arms(self) -> tuple[Arm, ...]:
        return tuple(
            Arm(
                key,
                digits_mlp(
                    optimizer="adam",
                    hyperparameters={"learning_rate": 0.01},
                    batch_size=batch,
                    epochs=EPOCHS,
                    sharpness_every=None,  # about 5 times a run, the last at its end
                ),
                SEEDS,
            )
            for key, batch in ((SMALL_KEY, SMALL), (LARGE_KEY, LARGE))
        )

    def judge(self, results: Results) -> Judgement:
        small, large = results.get(SMALL_KEY, ()), results.get(LARGE_KEY, ())
        numbers = {
            "sharpness, small batch (mean)": mean(finals(small, "sharpness")),
            "sharpness, large batch (mean)": mean(finals(large, "sharpness")),
            "train loss, small batch (mean)": mean(finals(small, "loss")),
            "train loss, large batch (mean)": mean(finals(large, "loss")),
            "val_loss, small batch (mean)": mean(finals(small, "val_loss")),
            "val_loss, large batch (mean)": mean(finals(large, "val_loss")),
        }
        if len(small) < SEEDS or len(large) < SEEDS:
            return Judgement("no", numbers, "Waiting for runs of both batch sizes.")
        test = paired_test(comparable(large, "sharpness"), comparable(small, "sharpness"))
        numbers |= test.numbers("difference (large − small)")
        sentence = (
            f"Final sharpness {numbers['sharpness, large batch (mean)']:.3g} at batch {LARGE} "
            f"against {numbers['sharpness, small batch (mean)']:.3g} at batch {SMALL}: a "
            f"difference of {test.mean:.3g}{test.interval_text()}."
        )
        return Judgement(test.outcome(SMALLEST), numbers, sentence)


RECIPE = LargeBatch()
