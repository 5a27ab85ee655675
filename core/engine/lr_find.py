"""The learning-rate range test (Smith 2017; fastai's and Lightning's `lr_find`): a short
run whose learning rate grows exponentially, read as its loss against the rate, with the
rate it suggests.

    η_t = η₀ · (η₁ / η₀) ^ ((t − 1) / (T − 1)),  t = 1 … T    (η₀ = lr_find_start,
                                                               η₁ = learning_rate)

A run of kind `lr_find` (`range_test_config`) trains under that schedule (`LiveSchedule`'s
`RANGE_TEST` shape) with any optimizer and any knob (a radius, clipping), logs every step,
neither validates nor saves checkpoints, and ends once its loss explodes (`Explosion`).
`RangeTest.of` reads its logged losses and rates. The suggestion is the rate where the
smoothed log-loss falls fastest per step: for gradient descent on a quadratic of curvature
λ, log L_{t+1} − log L_t = 2 log|1 − η_t λ|, steepest at η = 1/λ, the rate at which one
step removes the most of the loss (fastai and Lightning take the steepest slope of the
loss itself, which favours smaller rates while the loss is still high).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.readable import number
from core.store.metrics import Metrics
from core.training.config import DEFAULTS, INSTRUMENT_FIELDS, LR_FIND, RunConfig

STEPS = 200
START = 1e-7
END = 10.0
#: The test ends once the smoothed loss is this many times its lowest value (fastai's).
EXPLODES_AT = 4.0
#: The smoothing of the loss that `Explosion` watches (an exponential moving average,
#: debiased): its weight on the past.
WATCH_SMOOTHING = 0.9
#: Steps before `Explosion` may end the test: the first losses are too few to smooth.
WATCH_FROM = 5
#: The suggestion's smoothing: a centered moving average over this fraction of the steps
#: on each side (at least one step), which shifts no feature of the curve, unlike a
#: running average.
SMOOTHING_SPAN = 1 / 40
NAME_PREFIX = "LR range test · "


def range_test_config(
    config: RunConfig, *, steps: int = STEPS, start: float = START, end: float = END
) -> RunConfig:
    """`config` as a range test of `steps` steps from rate `start` to `end`: every step
    logged, no instrument, validation or checkpoint, and the data repeated as needed."""
    return config.replace(
        **_test_fields(steps, start),
        name=config.name or f"{NAME_PREFIX}{config.label}",
        hyperparameters={**config.hyperparameters, "learning_rate": end},
    )


def training_config(config: RunConfig, learning_rate: float) -> RunConfig:
    """The training run that a range test of `config` suggests: its model, data and
    knobs with `learning_rate`, and the run fields the test set back to their defaults."""
    name = config.name
    return config.replace(
        **{key: DEFAULTS[key] for key in _test_fields(STEPS, START)},
        name=None if name is None or name.startswith(NAME_PREFIX) else name,
        hyperparameters={**config.hyperparameters, "learning_rate": learning_rate},
    )


def _test_fields(steps: int, start: float) -> dict[str, Any]:
    return {
        "kind": LR_FIND,
        "lr_find_start": start,
        "max_steps": steps,
        "epochs": 10_000,  # the run's length is `steps`, however small the dataset
        "lr_schedule": "constant",
        "warmup_steps": 0,
        "log_every": 1,
        "val_every": None,
        "checkpoint_every": 0,
        **dict.fromkeys(INSTRUMENT_FIELDS, 0),
    }


class Explosion:
    """Watches a range test's losses, step by step; says when the test should end."""

    def __init__(self) -> None:
        self.average = 0.0
        self.count = 0
        self.lowest = math.inf

    def ended(self, loss: float) -> str | None:
        """Takes the next step's loss; the reason the test ends there, or None."""
        if not math.isfinite(loss):
            return f"the loss is {loss}"
        self.count += 1
        self.average = WATCH_SMOOTHING * self.average + (1 - WATCH_SMOOTHING) * loss
        smoothed = self.average / (1 - WATCH_SMOOTHING**self.count)
        if self.count >= WATCH_FROM and smoothed > EXPLODES_AT * self.lowest:
            return (
                f"the loss exploded: {number(smoothed)} (smoothed) is over {EXPLODES_AT:g}× "
                f"its lowest, {number(self.lowest)}"
            )
        self.lowest = min(self.lowest, smoothed)
        return None


@dataclass(frozen=True)
class RangeTest:
    """A range test's curve: the rate, loss and smoothed loss of each step it logged
    with a finite loss, and its suggestion.

    Attributes:
        rates, losses, smoothed: One value per step; `smoothed` on the loss's scale.
        suggested_at: The index in `rates` of the suggestion, None while the curve is
            too short to have a slope or never falls.
    """

    rates: np.ndarray
    losses: np.ndarray
    smoothed: np.ndarray
    suggested_at: int | None

    @property
    def suggestion(self) -> float | None:
        """The suggested learning rate (see `suggested_at`)."""
        return None if self.suggested_at is None else float(self.rates[self.suggested_at])

    @classmethod
    def of(cls, metrics: Metrics) -> RangeTest:
        """The curve of a range test's stored metrics (its steps so far)."""
        if "loss" not in metrics or "learning_rate" not in metrics:
            empty = np.empty(0)
            return cls(empty, empty, empty, None)
        rates, losses = metrics["learning_rate"], metrics["loss"]
        kept = np.isfinite(rates) & np.isfinite(losses)
        return cls.from_curve(rates[kept], losses[kept])

    @classmethod
    def from_curve(cls, rates: Any, losses: Any) -> RangeTest:
        """The curve and suggestion of `losses` taken at `rates` (in step order)."""
        rates = np.asarray(rates, np.float64)
        losses = np.asarray(losses, np.float64)
        positive = bool(len(losses)) and bool(np.all(losses > 0))
        values = np.log(losses) if positive else losses
        reach = max(1, round(len(values) * SMOOTHING_SPAN))
        smoothed = centered_average(values, reach)
        index = steepest_fall(smoothed, reach)
        return cls(rates, losses, np.exp(smoothed) if positive else smoothed, index)


def centered_average(values: np.ndarray, reach: int) -> np.ndarray:
    """Each value averaged with up to `reach` neighbours on each side (fewer at the ends,
    as many on both sides, so the ends are not pulled)."""
    sums = np.concatenate([[0.0], np.cumsum(values)])
    out = np.empty_like(values)
    for i in range(len(values)):
        half = min(reach, i, len(values) - 1 - i)
        out[i] = (sums[i + half + 1] - sums[i - half]) / (2 * half + 1)
    return out


def steepest_fall(smoothed: np.ndarray, skip: int) -> int | None:
    """The index where `smoothed` falls fastest, before its lowest point and after the
    first `skip` values; None if it never falls there."""
    if len(smoothed) < 2 * skip + 3:
        return None
    lowest = int(np.argmin(smoothed))
    slopes = np.gradient(smoothed)
    window = slopes[skip : lowest + 1]
    if not len(window) or window.min() >= 0:
        return None
    return skip + int(np.argmin(window))
