"""`PrivateRun`: what a DP-SGD run spends of privacy, step by step, and where it stops.

The accounting is `core.privacy.accounting`'s (Google's `dp-accounting`), for the batching
the run does: Poisson sampling at rate q = batch_size / n (`core.data.poisson_batches`),
each step a sampled Gaussian mechanism of noise multiplier σ = `dp_noise`. The privacy
spent after t steps, ε at δ = `dp_delta`, is logged as the metric `dp_epsilon`; with a
budget, the run takes no step that would spend more than it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from core.privacy.accounting import Odometer, last_step_within
from core.training.config import RunConfig

#: The metric a DP-SGD run logs its ε under.
EPSILON = "dp_epsilon"
#: How its batches are drawn (what the accounting assumes).
SAMPLING = "poisson"


@dataclass
class PrivateRun:
    """The privacy of a DP-SGD run of `config` on `examples` training examples, of
    `total_steps` steps at most.

    Attributes:
        rate: q, each example's probability of being in a step's batch.
        last_step: The last step within the ε budget (`total_steps` without one).
    """

    config: RunConfig
    examples: int
    total_steps: int
    rate: float = field(init=False)
    last_step: int = field(init=False)
    _odometer: Odometer = field(init=False, repr=False)
    _last_epsilon: float | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        config = self.config
        self.rate = config.batch_size / self.examples
        self._odometer = Odometer(self.rate, config.dp_noise, config.dp_delta, config.dp_accountant)
        self.last_step = self.total_steps
        if config.dp_epsilon_budget is not None:
            self.last_step = last_step_within(
                self.rate,
                config.dp_noise,
                config.dp_delta,
                config.dp_epsilon_budget,
                config.dp_accountant,
                self.total_steps,
            )

    def epsilon(self, step: int) -> float:
        """ε at δ after `step` steps, never below the step's own and non-decreasing in
        `step`: the Odometer's (with PLD the next point of its grid's), but never above
        the exact ε of the run's last step, which that step logs (so a run within its
        budget never shows more)."""
        if self._last_epsilon is None:
            self._last_epsilon = self._odometer.exact(self.last_step)
        if step >= self.last_step:
            return self._odometer.exact(step)
        return min(self._odometer.epsilon_at(step), self._last_epsilon)

    def record(self) -> dict[str, Any]:
        """What the run's start records of its privacy: n, q, the sampling, the
        accountant, δ, σ, C, the budget and the steps it allows."""
        config = self.config
        return {
            "examples": self.examples,
            "rate": self.rate,
            "sampling": SAMPLING,
            "accountant": config.dp_accountant,
            "delta": config.dp_delta,
            "noise_multiplier": config.dp_noise,
            "clip": config.dp_clip,
            "epsilon_budget": config.dp_epsilon_budget,
            "last_step": self.last_step,
        }
