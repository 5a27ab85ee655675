"""The heavy-ball recipe's verdict on synthetic stored loss series: each arm's loss falls
(or grows) by a set factor a step, as a heavy ball's does on a quadratic, and the judge
must find the steps to its target and the rate from what was stored."""

from __future__ import annotations

import math

import numpy as np
import pytest

from core.recipes import RECIPES
from core.recipes.heavy_ball import (
    BEST_MOMENTUM,
    LEARNING_RATE,
    MOMENTA,
    RATE,
    RECIPE,
    STEPS,
    TARGET,
    fitted_rate,
    key,
)
from core.recipes.readings import steps_to
from core.store import Store
from tests.unit.test_recipes import Rows, stored

FIRST = 5.0  # the first loss
FLOOR = 1e-15  # float32's: a loss stops falling there, relative to the first
#: The published arms' rates, as the closed forms give them at η*: β = 0 and 0.5
#: diverge (|1 − η*·L| ≈ 2.31, and 1.46), β* falls by about ρ* a step, β ≥ β* by √β.
PUBLISHED = {0.0: 2.31, 0.5: 1.46, BEST_MOMENTUM: 0.83, 0.8: math.sqrt(0.8), 0.9: math.sqrt(0.9)}


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "lab.sqlite") as opened:
        yield opened


def losses(rate: float, learning_rate: float = LEARNING_RATE) -> Rows:
    """The loss at steps 1 … `STEPS`, √loss multiplied by `rate` a step: falling to the
    float floor, or growing until it is no longer finite (the engine ends a run there);
    and the learning rate, as a run logs it."""
    rows = {}
    for step in range(1, STEPS + 1):
        loss = FIRST * max(rate ** (2 * (step - 1)), FLOOR)
        rows[step] = {"loss": loss if loss < 1e38 else math.inf, "learning_rate": learning_rate}
        if not loss < 1e38:
            break
    return rows


def steps_at(rate: float) -> int:
    """The steps √loss takes to fall to √TARGET × its first, by `rate` a step."""
    return math.ceil(math.log(TARGET) / (2 * math.log(rate)))


def verdict(store: Store, rates: dict[float, float], learning_rate: float = LEARNING_RATE):
    """The verdict on one run per arm, the arm of β falling by `rates[β]` a step; an arm
    missing from `rates` has not ended."""
    results = {}
    for momentum, rate in rates.items():
        status = "diverged" if rate > 1 else "completed"
        results[key(momentum)] = [stored(store, losses(rate, learning_rate), status)]
    return RECIPE.verdict(results)


def test_the_closed_form_is_goh_s_for_kappa_100() -> None:
    assert RECIPES["heavy_ball"] is RECIPE
    assert math.isclose(RATE, 9 / 11) and math.isclose(BEST_MOMENTUM, 81 / 121)
    assert math.isclose(LEARNING_RATE, 4 / (math.sqrt(2) + math.sqrt(0.02)) ** 2)
    assert BEST_MOMENTUM in MOMENTA and 0.0 in MOMENTA
    # At η*, β = 0 is gradient descent beyond 2/L: it diverges, as the grid says.
    assert LEARNING_RATE * 2.0 > 2


def test_beta_star_first_by_the_margin_at_its_closed_form_rate_reproduces(store) -> None:
    found = verdict(store, PUBLISHED)
    assert found.reproduced == "yes", found.text()
    star = key(BEST_MOMENTUM)
    assert found.numbers[f"steps to target, {star}"] == steps_at(0.83) == 62
    assert found.numbers[f"rate, {star}"] == pytest.approx(0.83)
    assert found.numbers["steps to target, β = 0.8"] == steps_at(math.sqrt(0.8)) == 104
    assert found.sentence.startswith(f"At η* = 1.65, {star} reached 1e-10 × its first loss in 62")
    assert found.numbers["steps to target, β = 0.9"] == steps_at(math.sqrt(0.9)) == 219
    assert "never" not in found.sentence.split(";")[0]
    assert "; the loss grew at β = 0 and β = 0.5." in found.sentence


def test_a_diverged_arm_never_reaches_the_target_and_its_rate_is_its_growth(store) -> None:
    found = verdict(store, PUBLISHED)
    for momentum, rate in ((0.0, 2.31), (0.5, 1.46)):
        assert math.isinf(found.numbers[f"steps to target, {key(momentum)}"])
        assert found.numbers[f"rate, {key(momentum)}"] == pytest.approx(rate)
    assert verdict(store, {**PUBLISHED, BEST_MOMENTUM: 1.2}).reproduced == "no"  # β* too


def test_a_larger_beta_first_says_no(store) -> None:
    # The control's, at η*/10: nothing diverges, and β = 0.9 is the fastest.
    control = {0.0: 0.994, 0.5: 0.991, BEST_MOMENTUM: 0.989, 0.8: 0.977, 0.9: math.sqrt(0.9)}
    found = verdict(store, control, LEARNING_RATE / 10)
    assert found.reproduced == "no", found.text()
    assert math.isinf(found.numbers[f"steps to target, {key(BEST_MOMENTUM)}"])
    assert found.numbers["η, as trained"] == pytest.approx(LEARNING_RATE / 10)
    assert found.sentence == (
        f"At η = 0.165 (η* = 1.65), {key(BEST_MOMENTUM)} reached 1e-10 × its first loss "
        "never, the next best (β = 0.9) in 219 steps. β*'s √loss fell by 0.989 a step, the "
        "closed form's (√κ − 1)/(√κ + 1) = 0.818."
    )


def test_beta_star_first_but_not_at_its_rate_says_no(store) -> None:
    # First by far, but at 0.9 a step: 10% off (√κ − 1)/(√κ + 1), beyond the ±5%.
    found = verdict(store, {**PUBLISHED, BEST_MOMENTUM: 0.85, 0.8: 0.95, 0.9: 0.96})
    assert found.reproduced == "yes"  # 0.85: 3.9% off
    found = verdict(store, {**PUBLISHED, BEST_MOMENTUM: 0.9, 0.8: 0.95, 0.9: 0.96})
    assert found.reproduced == "no", found.text()
    assert found.numbers["β*'s rate ÷ closed form"] == pytest.approx(0.9 / RATE)


def test_beta_star_first_by_less_than_the_margin_is_inconclusive(store) -> None:
    close = math.exp(math.log(TARGET) / 2 / 66.5)  # 67 steps, against β*'s 62: 8% more
    found = verdict(store, {**PUBLISHED, 0.8: close})
    assert found.reproduced == "inconclusive", found.text()
    assert found.numbers["next best ÷ β*'s steps"] == pytest.approx(67 / 62)
    assert verdict(store, {**PUBLISHED, 0.8: 0.83}).reproduced == "no"  # a tie


def test_a_partial_verdict_shows_what_has_ended(store) -> None:
    found = verdict(store, {BEST_MOMENTUM: 0.83, 0.0: 2.31})
    assert found.reproduced is None and (found.ended, found.total) == (2, 5)
    assert found.numbers[f"rate, {key(BEST_MOMENTUM)}"] == pytest.approx(0.83)
    assert "rate, β = 0.8" not in found.numbers and "nan" not in found.text()
    assert found.sentence.startswith("The verdict waits for 3 more run(s): β = 0.5,")


def test_the_rate_is_fitted_over_the_later_half_of_the_steps_to_the_target(store) -> None:
    # A critically damped mode falls as k·ρᵏ: over the later half, near ρ·(1 + 1/k).
    rho = 0.8
    rows = {k: {"loss": (k * rho**k) ** 2} for k in range(1, 201)}
    metrics = stored(store, rows).metrics
    until = steps_to(metrics, "loss", TARGET)
    first_below = next(k for k in rows if rows[k]["loss"] <= TARGET * rows[1]["loss"])
    assert until == first_below - 1 == 71
    assert rho < fitted_rate(metrics, until) < rho * (1 + 1 / 40)
    whole = np.polyfit(np.arange(72), np.log([rows[k]["loss"] for k in range(1, 73)]), 1)[0]
    assert fitted_rate(metrics, until) < math.exp(whole / 2)  # the transient, left out
    assert math.isnan(fitted_rate(stored(store, {1: {"loss": 1.0}}).metrics, math.inf))


def test_steps_to_a_target_read_off_the_loss(store) -> None:
    metrics = stored(store, {3: {"loss": 2.0}, 4: {"loss": 1.0}, 6: {"loss": 0.1}}).metrics
    assert steps_to(metrics, "loss", 0.5) == 1 and steps_to(metrics, "loss", 0.05) == 3
    assert math.isinf(steps_to(metrics, "loss", 0.01))
    assert math.isinf(steps_to(stored(store, {1: {"loss": math.inf}}).metrics, "loss", 0.5))
    assert math.isinf(steps_to(metrics, "val_loss", 0.5))  # never logged
