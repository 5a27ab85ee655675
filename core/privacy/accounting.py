"""The privacy that DP-SGD spends: ε at δ after a number of steps, as Google's
`dp-accounting` computes it.

A step of DP-SGD (Abadi et al. 2016) samples its batch by Poisson sampling at rate
q = B/n (each of the n training examples joins it with probability q, independently of
the others), clips each example's gradient to L2 norm C (g ← g·min(1, C/‖g‖)), sums them,
adds Gaussian noise N(0, σ²C²·I) once to the sum, and divides by the fixed B (not by the
sampled batch's size, which depends on the data). Adding or removing one example moves
the sum by at most C, so a step is the Gaussian mechanism with noise multiplier σ (the
noise's standard deviation over that sensitivity) run on a Poisson subsample: the event
`PoissonSampledDpEvent(q, GaussianDpEvent(σ))`, under add-or-remove-one adjacency. T
steps are that event composed T times; composition holds although each step's gradient
depends on the steps before it.

The run is then (ε, δ)-differentially private: for any two datasets that differ by one
example, and any set S of outcomes (the T noisy sums, hence every checkpoint and the
final model), P[run ∈ S] ≤ e^ε·P[run' ∈ S] + δ. δ is fixed (well below 1/n); ε is what
these functions report, a guarantee: the smaller, the more private.

Two accountants compute it (`ACCOUNTANTS`):

- "rdp": Rényi DP. It bounds the Rényi divergence of one step at a fixed list of orders α
  (dp-accounting's default, 1.1 to 1024); composition adds, so T steps' RDP is T times one
  step's at each order, and ε is the best over the orders of a conversion to (ε, δ)
  (dp-accounting's `compute_epsilon`: Proposition 12 of Canonne, Kamath and Steinke
  2020). Cheap at any T, but the conversion is not tight: its ε is an upper bound, above
  the true one.
- "pld": the privacy loss distribution. It composes the distribution of the privacy
  loss itself (by FFT, on a grid of losses 1e-4 apart, rounded pessimistically, so that
  its ε stays an upper bound) and reads ε at δ off it: nearly tight, below RDP's, but
  too slow to run after every step, mostly in building one step's distribution
  (docs/privacy.md gives both costs, measured).

`epsilon` is the exact figure of one run length; `Odometer` is what a run logs live after
every step (cheap with RDP; on a grid of step counts with PLD, never below the exact
figure); `last_step_within` is the most steps a budget on ε allows. `dp_accounting` is
imported on first use: the dashboard reads `ACCOUNTANTS` without its two seconds of SciPy.
"""

from __future__ import annotations

import bisect
import math
import numbers
from typing import Any, Final

from core.knobs import InvalidInput
from core.lazy import lazy_module

dp_accounting = lazy_module("dp_accounting")

ACCOUNTANTS: Final = ("rdp", "pld")
#: With PLD, `Odometer` computes ε exactly at step counts this factor apart (at every
#: count while the factor adds less than one step: 1 to 10 at 1.1); what it logs between
#: two of them is at most that factor of steps ahead (docs/privacy.md: what it costs in ε).
PLD_GRID_GROWTH: Final = 1.1
#: The spacing of PLD's grid of privacy losses (dp-accounting's default).
PLD_DISCRETIZATION: Final = 1e-4


def _real(value: object) -> float | None:
    """`value` as a float when it is a real number (not a bool), else None."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return float(value)
    return None


def _count(value: object) -> int | None:
    """`value` as an int when it is an integer (not a bool), else None."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    return None


def _errors(
    sampling_rate: object, noise_multiplier: object, delta: object, accountant: object
) -> dict[str, str]:
    """What is wrong with the settings every function takes, field by field."""
    errors = {}
    q = _real(sampling_rate)
    if q is None or not 0 < q <= 1:
        errors["dp_sampling_rate"] = f"must be a number in (0, 1], not {sampling_rate!r}"
    sigma = _real(noise_multiplier)
    if sigma is None or not 0 <= sigma < math.inf:
        errors["dp_noise"] = f"must be a finite number ≥ 0, not {noise_multiplier!r}"
    d = _real(delta)
    if d is None or not 0 < d < 1:
        errors["dp_delta"] = f"must be a number in (0, 1), not {delta!r}"
    if accountant not in ACCOUNTANTS:
        errors["dp_accountant"] = f"must be one of {', '.join(ACCOUNTANTS)}, not {accountant!r}"
    return errors


def _steps_error(steps: object) -> dict[str, str]:
    """What is wrong with a step count: nothing, or that it is not an integer ≥ 0."""
    count = _count(steps)
    if count is not None and count >= 0:
        return {}
    return {"steps": f"must be an integer ≥ 0, not {steps!r}"}


def _step_event(sampling_rate: float, noise_multiplier: float) -> Any:
    """One DP-SGD step as dp-accounting's event: the Gaussian mechanism of noise
    multiplier σ on a Poisson subsample at rate q."""
    return dp_accounting.PoissonSampledDpEvent(
        sampling_rate, dp_accounting.GaussianDpEvent(noise_multiplier)
    )


def _new_accountant(accountant: str) -> Any:
    """A fresh accountant of that name, with nothing composed yet."""
    if accountant == "rdp":
        return dp_accounting.rdp.RdpAccountant()
    return dp_accounting.pld.PLDAccountant(value_discretization_interval=PLD_DISCRETIZATION)


def epsilon(
    sampling_rate: float,
    noise_multiplier: float,
    steps: int,
    delta: float,
    accountant: str = "rdp",
) -> float:
    """ε at `delta` after `steps` DP-SGD steps of Poisson sampling rate q =
    `sampling_rate` and noise multiplier σ = `noise_multiplier`: the event
    `PoissonSampledDpEvent(q, GaussianDpEvent(σ))` composed `steps` times on a fresh
    `RdpAccountant` or `PLDAccountant` (`accountant`), its `get_epsilon(delta)`.

    No steps spend nothing (0.0, whatever σ); a step without noise (σ = 0) releases a
    gradient as it is, and no ε bounds that (math.inf). Raises `InvalidInput` naming each
    bad field: `dp_sampling_rate` outside (0, 1], `dp_noise` negative or not finite,
    `dp_delta` outside (0, 1), `dp_accountant` not in `ACCOUNTANTS`, `steps` below 0.
    """
    errors = _errors(sampling_rate, noise_multiplier, delta, accountant) | _steps_error(steps)
    if errors:
        raise InvalidInput(errors)
    if steps == 0:
        return 0.0
    if noise_multiplier == 0:
        return math.inf
    spent = _new_accountant(accountant)
    spent.compose(_step_event(sampling_rate, noise_multiplier), int(steps))
    return float(spent.get_epsilon(delta))


class Odometer:
    """The ε a run has spent after each step, made once for the run's (q, σ, δ,
    accountant): `epsilon_at(steps)` is what it logs as `dp_epsilon` after a step.

    Both accountants compose T copies of one step, so the Odometer builds one step's
    accounting once and each ε from it (`exact`), equal to `epsilon`'s to the bit. With
    RDP that is one step's RDP at each order, times T, then dp-accounting's conversion
    `compute_epsilon`: about 0.1 ms, exact after every step.

    With PLD it is one step's privacy loss distribution, self-composed T times by FFT:
    still about 0.1 s (docs/privacy.md), too slow after every step. So `epsilon_at` is
    exact only at a grid of step counts (each the one before times `growth`, rounded up,
    and at least one more), computed lazily and once each; a step between two of them
    logs the ε of the next (`exact_steps`). ε only grows with the steps, so that is an
    upper bound of the step's own ε: it may overstate what was spent, never understate
    it, and it never decreases from one step to the next. `exact` gives a run's last
    step its own figure.
    """

    def __init__(
        self,
        sampling_rate: float,
        noise_multiplier: float,
        delta: float,
        accountant: str = "rdp",
        *,
        growth: float = PLD_GRID_GROWTH,
    ) -> None:
        errors = _errors(sampling_rate, noise_multiplier, delta, accountant)
        if errors:
            raise InvalidInput(errors)
        if _real(growth) is None or not 1 < growth < math.inf:
            raise ValueError(f"growth must be a finite number > 1, not {growth!r}")
        self.sampling_rate = float(sampling_rate)
        self.noise_multiplier = float(noise_multiplier)
        self.delta = float(delta)
        self.accountant = accountant
        self.growth = float(growth)
        self._grid = [0]  # PLD's step counts, in order, grown as far as asked
        self._on_grid: dict[int, float] = {}  # PLD's ε at the counts computed so far
        self._one_step: Any = None  # one step's RDP vector or PLD, built on first need

    def _build_one_step(self) -> Any:
        """One step's accounting, as the accountant of `epsilon` composes it: the RDP of
        the event at each order, or the PLD of the subsampled Gaussian mechanism."""
        if self.accountant == "rdp":
            one_step = dp_accounting.rdp.RdpAccountant()
            one_step.compose(_step_event(self.sampling_rate, self.noise_multiplier))
            return one_step.orders, one_step.rdp
        return dp_accounting.pld.privacy_loss_distribution.from_gaussian_mechanism(
            standard_deviation=self.noise_multiplier,
            value_discretization_interval=PLD_DISCRETIZATION,
            sampling_prob=self.sampling_rate,
            neighboring_relation=dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE,
        )

    def exact(self, steps: int) -> float:
        """ε after `steps` steps, exactly as `epsilon` computes it, from one step's
        accounting built once: its RDP times `steps`, converted; or its PLD composed
        `steps` times onto the identity, as `PLDAccountant.compose` does."""
        if errors := _steps_error(steps):
            raise InvalidInput(errors)
        if steps == 0:
            return 0.0
        if self.noise_multiplier == 0:
            return math.inf
        if self._one_step is None:
            self._one_step = self._build_one_step()
        if self.accountant == "rdp":
            orders, one_step_rdp = self._one_step
            return float(
                dp_accounting.rdp.compute_epsilon(orders, steps * one_step_rdp, self.delta)[0]
            )
        identity = dp_accounting.pld.privacy_loss_distribution.identity(
            value_discretization_interval=PLD_DISCRETIZATION
        )
        composed = identity.compose(self._one_step.self_compose(int(steps)))
        return float(composed.get_epsilon_for_delta(self.delta))

    def exact_steps(self, steps: int) -> int:
        """The step count whose exact ε `epsilon_at(steps)` reports: `steps` itself with
        RDP (or when nothing is spent or nothing bounds it), else the smallest point of
        PLD's grid at or above it."""
        if errors := _steps_error(steps):
            raise InvalidInput(errors)
        if self.accountant == "rdp" or steps == 0 or self.noise_multiplier == 0:
            return int(steps)
        while self._grid[-1] < steps:
            last = self._grid[-1]
            self._grid.append(max(last + 1, math.ceil(last * self.growth)))
        return self._grid[bisect.bisect_left(self._grid, steps)]

    def epsilon_at(self, steps: int) -> float:
        """ε after `steps` steps, as a run logs it live: `exact(steps)` with RDP; with
        PLD the exact ε of `exact_steps(steps)`, at or above the step's own, computed on
        its first need and kept."""
        at = self.exact_steps(steps)
        if self.accountant == "rdp":
            return self.exact(at)
        if at not in self._on_grid:
            self._on_grid[at] = self.exact(at)
        return self._on_grid[at]


def last_step_within(
    sampling_rate: float,
    noise_multiplier: float,
    delta: float,
    budget: float,
    accountant: str,
    limit: int,
) -> int:
    """The most steps T in 0..`limit` whose exact ε at `delta` (`epsilon`'s, not the
    Odometer's grid) is at most `budget`: a run with `--dp-epsilon-budget` stops after
    step T, before the step that would pass it. ε only grows with the steps, so T is
    found by bisection, in about log2(limit) exact evaluations (`Odometer.exact`: one
    step's accounting built once).

    Raises `InvalidInput` as `epsilon` does (`steps` naming a `limit` below 0), and
    naming `dp_epsilon_budget` when `budget` is not a finite number > 0.
    """
    errors = _errors(sampling_rate, noise_multiplier, delta, accountant) | _steps_error(limit)
    b = _real(budget)
    if b is None or not 0 < b < math.inf:
        errors["dp_epsilon_budget"] = f"must be a finite number > 0, not {budget!r}"
    if errors:
        raise InvalidInput(errors)
    exact = Odometer(sampling_rate, noise_multiplier, delta, accountant).exact
    if exact(limit) <= budget:
        return int(limit)
    within, past = 0, int(limit)  # ε(within) ≤ budget < ε(past); ε(0) = 0 < budget
    while past - within > 1:
        middle = (within + past) // 2
        within, past = (middle, past) if exact(middle) <= budget else (within, middle)
    return within
