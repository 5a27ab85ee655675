"""A run's learning rate: its hyperparameter as it is, or a `LiveSchedule` around it."""

from __future__ import annotations

from core.optimizers.schedules import RANGE_TEST, LiveSchedule
from core.training.config import LR_FIND, RunConfig


def learning_rate(config: RunConfig, total_steps: int) -> float | LiveSchedule:
    """The run's learning rate: the knob as it is, or a `LiveSchedule` over `total_steps`
    peaking at it when the run has a schedule or a warm-up (a range test always has one).
    Only this knob: the others go from the config to the optimizer untouched."""
    rate = config.hyperparameters["learning_rate"]  # every knob is filled in: the peak
    range_test = config.kind == LR_FIND
    if config.lr_schedule == "constant" and config.warmup_steps == 0 and not range_test:
        return rate
    return LiveSchedule(
        rate,
        RANGE_TEST if range_test else config.lr_schedule,
        config.warmup_steps,
        total_steps,
        start_rate=config.lr_find_start if range_test else None,
    )
