"""A run's learning rate: its hyperparameter as it is, or a `LiveSchedule` around it."""

from __future__ import annotations

from typing import Any

from core.optimizers.schedules import RANGE_TEST, LiveSchedule
from core.training.config import LR_FIND, RunConfig


def scheduled(config: RunConfig, total_steps: int) -> dict[str, Any]:
    """The run's hyperparameters, the learning rate a `LiveSchedule` over `total_steps`
    when the run has a schedule or a warm-up (a range test always has one)."""
    hyperparameters = dict(config.hyperparameters)
    range_test = config.kind == LR_FIND
    if config.lr_schedule == "constant" and config.warmup_steps == 0 and not range_test:
        return hyperparameters
    schedule = LiveSchedule(
        hyperparameters["learning_rate"],  # every knob is filled in: the peak
        RANGE_TEST if range_test else config.lr_schedule,
        config.warmup_steps,
        total_steps,
        start_rate=config.lr_find_start if range_test else None,
    )
    return {**hyperparameters, "learning_rate": schedule}
