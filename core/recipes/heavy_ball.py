"""Heavy-ball momentum at its optimal β (Polyak 1964; Goh, "Why Momentum Really Works",
Distill 2017): on a quadratic whose Hessian's eigenvalues lie in [μ, L], κ = L/μ, the
heavy ball w⁺ = w − η·∇f(w) + β·(w − w⁻) converges fastest at

    η* = (2 / (√L + √μ))²,   β* = ((√κ − 1) / (√κ + 1))²,

where every eigen-direction's error falls by ρ* = (√κ − 1)/(√κ + 1) a step, against
(κ − 1)/(κ + 1) for gradient descent at its best rate 2/(L + μ). (Each direction of
curvature λ follows z² − (1 + β − η·λ)·z + β = 0.) Above β*, at η*, every direction's
roots are complex, of modulus √β > ρ*. Below it the extreme directions' roots are real,
the larger beyond ρ*, and the stiffest one's leaves the unit circle once
β < η*·L/2 − 1 ≈ 0.65: at β = 0, 1 − η*·L ≈ −2.3 and the run diverges.

The lab's `momentum` optimizer is Keras's SGD with momentum, exactly the heavy ball
(v ← β·v − η·g; w ← w + v). It trains the `linear` model on `quadratic` (see
`core.data.synthetic`): the mean squared error of x·w + b is exactly such a quadratic,
its 21 eigenvalues log-spaced over [0.02, 2], κ = 100, so η* ≈ 1.65, β* ≈ 0.669 and
ρ* = 9/11 ≈ 0.818. Full batch (one step an epoch, the loss logged at every step), 250
steps, at η* with β = 0, 0.5, β*, 0.8 and 0.9; seeds change only the initial weights
(the batch is the whole split, in whatever order).

Measured (`optlab recipe run heavy_ball --seed S`, S = 0-4, and `--control`): β* reaches
1e-10 × its first loss in 78-80 steps, β = 0.8 in 104, β = 0.9 in 217; β = 0 and 0.5
diverge. The rate fitted over the later half of β*'s steps is 0.832-0.833, 1.7% above
ρ*, as NumPy's float64 model of the same runs says: at η* and β* the extreme
eigenvalues' modes are critically damped (a double root) and fall as k·ρ*ᵏ, not ρ*ᵏ. At
a tenth of η*, the control, the best β is about (1 − √(η·μ))² ≈ 0.89: β = 0.9 gets there
in 207-212 steps and β* not in 250, its rate 0.988-0.989.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from core.data import synthetic as quadratic
from core.readable import number
from core.recipes.readings import final, series, steps_to
from core.recipes.recipe import (
    Arm,
    Control,
    Judgement,
    Outcome,
    Paper,
    Recipe,
    Results,
    quiet_run,
)
from core.store import Metrics

ROOT_KAPPA = math.sqrt(quadratic.KAPPA)
RATE = (ROOT_KAPPA - 1) / (ROOT_KAPPA + 1)  # ρ*: the error's factor a step at η*, β*
BEST_MOMENTUM = RATE**2  # β*
LEARNING_RATE = (2 / (math.sqrt(quadratic.LARGEST) + math.sqrt(quadratic.SMALLEST))) ** 2
GD_RATE = (quadratic.KAPPA - 1) / (quadratic.KAPPA + 1)  # plain GD at its best η
MOMENTA = (0.0, 0.5, BEST_MOMENTUM, 0.8, 0.9)
STEPS = 250
TARGET = 1e-10  # the loss a run must reach, as a fraction of its first
MARGIN = 0.15  # the next best arm takes ≥ 15% more steps than β*'s
TOLERANCE = 0.05  # β*'s measured rate within ±5% of ρ*


def key(momentum: float) -> str:
    """`β* = 0.669` for the optimal momentum, else `β = 0.8`."""
    return f"β* = {number(momentum, 3)}" if momentum == BEST_MOMENTUM else f"β = {momentum:g}"


def fitted_rate(metrics: Metrics, until: float) -> float:
    """The factor ρ by which √loss falls a step: loss ∝ ρ^(2k), so ρ = exp(slope / 2) of
    a least-squares line through log loss against the step, over the later half of the
    steps up to `until` (steps from the first; +∞: the whole run). The later half leaves
    out the first steps' transient. Over a diverged run's finite losses, ρ > 1; NaN with
    fewer than two losses."""
    steps, losses = series(metrics, "loss")
    steps = steps - steps[0] if len(steps) else steps
    kept = np.isfinite(losses) & (losses > 0) & (steps <= until)
    steps, losses = steps[kept], losses[kept]
    if len(steps) < 2:
        return math.nan
    late = steps >= min(steps[-1] / 2, steps[-2])  # at least the last two losses
    slope = np.polyfit(steps[late], np.log(losses[late]), 1)[0]
    return float(np.exp(slope / 2))


class HeavyBall(Recipe):
    name = "heavy_ball"
    title = "Heavy-ball momentum at its optimal β"
    paper = Paper("Goh", 2017, "Distill", "Why Momentum Really Works")
    claim = (
        "On a quadratic of condition number κ, heavy-ball momentum at η* converges fastest "
        "at β* = ((√κ − 1)/(√κ + 1))², by (√κ − 1)/(√κ + 1) a step."
    )
    measure = (
        f"Full-batch SGD with momentum on the linear model's squared error on `quadratic` "
        f"(κ = {quadratic.KAPPA:g}), at η* = {number(LEARNING_RATE, 3)} with β = "
        f"{', '.join(f'{number(m, 3)}' for m in MOMENTA)} ({STEPS} steps): the steps each run "
        f"takes to a loss ≤ {TARGET:g} × its first (never, if it diverges), and the rate "
        "ρ = exp(slope/2) of a line through log loss over the later half of those steps. "
        f"Reproduced when β* = {number(BEST_MOMENTUM, 3)} gets there first, every other β taking "
        f"≥ {MARGIN:.0%} more steps, and its ρ is within ±{TOLERANCE:.0%} of "
        f"(√κ − 1)/(√κ + 1) = {number(RATE, 3)}; not when another β is as fast, β* never gets "
        "there, or its ρ is off; inconclusive when β* is first by less than the margin."
    )
    charts: ClassVar[tuple[str, ...]] = ("loss", "grad_norm")
    control = Control(
        {"learning_rate": LEARNING_RATE / 10},
        "Every arm at a tenth of η*, where the optimal momentum is about "
        "(1 − √(η·μ))² ≈ 0.89: a larger β wins, and β*'s rate is nowhere near "
        "(√κ − 1)/(√κ + 1).",
    )
    runtime_s = 8.0  # 4-14 s at seeds 0-4 (3 runs at once), beside other training

    def arms(self) -> tuple[Arm, ...]:
        return tuple(
            Arm(
                key(momentum),
                quiet_run(
                    dataset="quadratic",
                    model="linear",
                    optimizer="momentum",
                    hyperparameters={"learning_rate": LEARNING_RATE, "momentum": momentum},
                    batch_size=quadratic.TRAIN_SIZE,  # the whole split: one step an epoch
                    epochs=STEPS,
                    val_every=STEPS,
                ),
            )
            for momentum in MOMENTA
        )

    def judge(self, results: Results) -> Judgement:
        steps, rates = {}, {}
        for momentum in MOMENTA:
            runs = results.get(key(momentum), ())
            metrics = runs[0].metrics if runs else None
            steps[momentum] = math.nan if metrics is None else steps_to(metrics, "loss", TARGET)
            rates[momentum] = math.nan if metrics is None else fitted_rate(metrics, steps[momentum])
        star = results.get(key(BEST_MOMENTUM), ())
        # As trained (a probe may set another): the rate β*'s run logged.
        trained_at = final(star[0].metrics, "learning_rate") if star else math.nan
        numbers = {
            "η, as trained": trained_at,
            "closed form (√κ − 1)/(√κ + 1)": RATE,
            "GD's at its best η, (κ − 1)/(κ + 1)": GD_RATE,
        }
        for momentum in MOMENTA:
            numbers[f"steps to target, {key(momentum)}"] = steps[momentum]
            numbers[f"rate, {key(momentum)}"] = rates[momentum]
        best = steps[BEST_MOMENTUM]
        others = {m: s for m, s in steps.items() if m != BEST_MOMENTUM}
        runner_up = min(others, key=lambda m: (math.isnan(others[m]), others[m]))
        next_best = others[runner_up]
        rate_off = abs(rates[BEST_MOMENTUM] / RATE - 1)
        numbers["next best ÷ β*'s steps"] = next_best / best if best else math.nan
        numbers["β*'s rate ÷ closed form"] = rates[BEST_MOMENTUM] / RATE
        reproduced: Outcome
        if not (math.isfinite(best) and next_best > best and rate_off <= TOLERANCE):
            reproduced = "no"  # another β as fast, β* never there, or not at its rate
        elif next_best >= best * (1 + MARGIN):
            reproduced = "yes"
        else:
            reproduced = "inconclusive"
        sentence = _sentence(trained_at, steps, rates, runner_up)
        return Judgement(reproduced, numbers, sentence)


def _sentence(
    trained_at: float, steps: dict[float, float], rates: dict[float, float], runner_up: float
) -> str:
    def took(momentum: float) -> str:
        count = steps[momentum]
        return "never" if math.isinf(count) else f"in {count:.0f} steps"

    at = f"η* = {number(LEARNING_RATE, 3)}"
    if math.isfinite(trained_at) and not math.isclose(trained_at, LEARNING_RATE, rel_tol=1e-6):
        at = f"η = {number(trained_at, 3)} ({at})"
    grew = [key(m) for m, rate in rates.items() if rate > 1]
    return (
        f"At {at}, {key(BEST_MOMENTUM)} reached {TARGET:g} × its first loss "
        f"{took(BEST_MOMENTUM)}, the next best ({key(runner_up)}) {took(runner_up)}"
        + (f"; the loss grew at {' and '.join(grew)}" if grew else "")
        + f". β*'s √loss fell by {number(rates[BEST_MOMENTUM], 3)} a step, the closed form's "
        f"(√κ − 1)/(√κ + 1) = {number(RATE, 3)}."
    )


RECIPE = HeavyBall()
