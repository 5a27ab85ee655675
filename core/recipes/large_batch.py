"""Large batches find sharper minima (Keskar, Mudigere, Nocedal, Smelyanskiy & Tang,
ICLR 2017): trained to the same low training loss, a large batch ends where the loss is
sharper than where a small batch ends.

Adam (as Keskar et al.) at η = 0.01 on digits with the MLP, at a batch of 128 for 40
epochs (440 steps) and at the full training split (1,438) for 160 (160 steps), 5 seeds
each. Keskar et al. train both until the training accuracy is about 100%; here the full
batch trains more epochs so both reach a like training loss (about 5e-4). The sharpness
of cross-entropy falls as its loss does (at seed 0 the full batch's went from 7.4 at loss
1e-2 to 0.85 at 5e-4 and 0.22 at 1.6e-4), so a comparison at unlike losses measures how
far training got, not the batch. Both arms measure the sharpness, and the training loss
beside it, on the same examples: the whole training split (`sharpness_examples`).
"""

from __future__ import annotations

import math
from typing import ClassVar

from core.readable import number
from core.recipes.readings import comparable, finals, mean, paired_test
from core.recipes.recipe import Arm, Control, Judgement, Paper, Recipe, Results, digits_mlp
from core.training.instruments.sharpness import LOSS

SMALL, LARGE = 128, 1_438
EPOCHS = {SMALL: 40, LARGE: 160}
SEEDS = 5
#: The least difference of final sharpness that counts as the large batch's: an interval
#: wholly below it says no.
SMALLEST = 0.2
#: How far apart the arms' mean training losses may end (a ratio) and still compare.
LIKE_LOSS = 2.0
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
    claim = "Trained to a like training loss, a large batch ends at a sharper minimum."
    measure = (
        f"The final sharpness of {SEEDS} seeds at batch {LARGE} ({EPOCHS[LARGE]} epochs of "
        f"Adam) against {SEEDS} at batch {SMALL} ({EPOCHS[SMALL]} epochs), both on the whole "
        "training split, seed for seed (run k of each arm shares seed k): when their mean "
        f"training losses there end within a factor of {LIKE_LOSS:g}, reproduced when the "
        "95% t interval of the mean difference (large − small) is above 0, not when it is "
        f"below {SMALLEST:g}; else inconclusive."
    )
    charts: ClassVar[tuple[str, ...]] = ("sharpness", "loss", "val_loss")
    control = Control(
        {"batch_size": SMALL, "epochs": EPOCHS[SMALL]},
        f"One batch size, {SMALL}, and one length for both arms: nothing is left to make "
        "one sharper.",
    )
    runtime_s = 45.0

    def arms(self) -> tuple[Arm, ...]:
        return tuple(
            Arm(
                key,
                digits_mlp(
                    optimizer="adam",
                    hyperparameters={"learning_rate": 0.01},
                    batch_size=batch,
                    epochs=EPOCHS[batch],
                    sharpness_every=None,  # 5 times a run, the last at its end
                    sharpness_examples=LARGE,
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
            "train loss, small batch (mean)": mean(finals(small, LOSS)),
            "train loss, large batch (mean)": mean(finals(large, LOSS)),
            "val_loss, small batch (mean)": mean(finals(small, "val_loss")),
            "val_loss, large batch (mean)": mean(finals(large, "val_loss")),
        }
        if len(small) < SEEDS or len(large) < SEEDS:
            return Judgement("no", numbers, "Waiting for runs of both batch sizes.")
        losses = [numbers[f"train loss, {arm} batch (mean)"] for arm in ("large", "small")]
        ratio = losses[0] / losses[1] if losses[1] > 0 else math.inf
        numbers["train loss ratio (large / small)"] = ratio
        test = paired_test(comparable(large, "sharpness"), comparable(small, "sharpness"))
        numbers |= test.numbers("difference (large − small)")
        sentence = (
            f"Final sharpness {number(numbers['sharpness, large batch (mean)'], 3)} at batch "
            f"{LARGE} against {number(numbers['sharpness, small batch (mean)'], 3)} at batch "
            f"{SMALL}: a "
            f"difference of {number(test.mean, 3)}{test.interval_text()}, at training losses "
            f"{number(losses[0], 3)} and {number(losses[1], 3)}"
        )
        if not 1 / LIKE_LOSS <= ratio <= LIKE_LOSS:  # NaN too: a diverged arm
            sentence += f", more than {LIKE_LOSS:g}× apart: not comparable."
            return Judgement("inconclusive", numbers, sentence)
        return Judgement(test.outcome(SMALLEST), numbers, sentence + ".")


RECIPE = LargeBatch()
