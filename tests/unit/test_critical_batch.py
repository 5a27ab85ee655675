"""The critical-batch recipe's fit and verdict on synthetic stored metrics: loss series
made from McCandlish et al.'s model, S = S_min (1 + B_crit/B) at each batch's best rate
and more steps at the others, with a known B_crit, and a noise-scale series beside them."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from scipy import stats

from core.recipes.critical_batch import (
    BATCHES,
    LEVEL,
    NOISE_BATCH,
    RATES,
    RECIPE,
    SMALLEST_BEND,
    TARGET,
    TRAIN_SIZE,
    bend,
    budget,
    centred_mean,
    fit,
    noise_scale_at_target,
)
from core.store import Store
from tests.unit.test_recipes import Rows, stored

#: The loss falls linearly by this much over the steps to the target, on and on (never to
#: a floor within an epoch's window of the target, which would bend its centred mean).
FALL = 0.15
BEST = 3  # the index of every batch's best rate: inside the grid


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "lab.sqlite") as opened:
        yield opened


def model_steps(b_crit: float, s_min: float = 30.0) -> np.ndarray:
    return s_min * (1 + b_crit / np.asarray(BATCHES, np.float64))


def ladder(
    steps: Callable[[int], float], b_simple: float, best: int = BEST
) -> Callable[[str], Rows]:
    """Each arm's rows: a loss falling linearly by `FALL` to the target at `steps(batch)`
    times 1 + |j − best|/2 (a rate j off the best is slower), for as many steps as the arm
    trains, its epochs counted as a run counts them; `noise_scale` = `b_simple` at every
    step of `NOISE_BATCH`."""
    arms = {arm.key: arm.config for arm in RECIPE.arms()}

    def rows(key: str) -> Rows:
        config = arms[key]
        batch, rate = config.batch_size, config.hyperparameters["learning_rate"]
        s = steps(batch) * (1 + abs(RATES.index(rate) - best) / 2)
        per_epoch = TRAIN_SIZE // batch  # full batches only, as a run counts its epochs
        noise = {"noise_scale": b_simple} if batch == NOISE_BATCH else {}
        return {
            t: {"loss": max(0.0, TARGET + FALL * (1 - t / s)), "epoch": t / per_epoch} | noise
            for t in range(1, budget(batch) + 1)
        }

    return rows


def judged(store: Store, rows: Callable[[str], Rows], keys: list[str] | None = None):
    arms = [arm.key for arm in RECIPE.arms()]
    return RECIPE.verdict({key: [stored(store, rows(key))] for key in keys or arms})


def test_the_fit_finds_the_models_critical_batch() -> None:
    line = fit(BATCHES, model_steps(100.0, s_min=60.0))
    assert line is not None
    assert line.b_crit == pytest.approx(100.0, rel=0.01)
    assert line.s_min == pytest.approx(60.0, rel=0.01)
    assert line.low <= line.b_crit <= line.high and line.noise < 1e-2
    # Steps that never fall with the batch have no bend: B_crit is 0.
    flat = fit(BATCHES, np.full(len(BATCHES), 500.0))
    assert flat is not None and flat.b_crit == flat.low == 0.0
    assert flat.s_min == pytest.approx(500.0)
    # Steps that halve at every doubling bend nowhere either: B_crit without end.
    halving = fit(BATCHES, 1e5 / np.asarray(BATCHES, np.float64))
    assert halving is not None and halving.b_crit == halving.high == math.inf
    assert fit(BATCHES[:2], [800.0, 400.0]) is None  # too few batches for an interval


def test_the_fits_interval_widens_with_the_scatter() -> None:
    scatter = np.where(np.arange(len(BATCHES)) % 2, 1.2, 1 / 1.2)
    exact, noisy = fit(BATCHES, model_steps(100.0)), fit(BATCHES, model_steps(100.0) * scatter)
    assert exact is not None and noisy is not None
    assert noisy.low < 0.9 * exact.low and noisy.high > 1.1 * exact.high
    assert noisy.low < 100.0 < noisy.high


def test_a_doubling_halves_the_steps_below_the_critical_batch_not_beyond() -> None:
    steps = model_steps(100.0)
    line = fit(BATCHES, steps)
    assert line is not None
    shape = bend(BATCHES, steps, line)
    # 8 to 64 and 128 to 1,438: the model's cuts, (1 + 100/8)/(1 + 100/64) over 3
    # doublings, (1 + 100/128)/(1 + 100/1438) over 3.49.
    assert shape.below == pytest.approx((13.5 / 2.5625) ** (1 / 3), rel=0.01)
    assert shape.beyond == pytest.approx((1.78125 / (1 + 100 / 1438)) ** (1 / 3.49), rel=0.01)
    assert shape.low == pytest.approx(shape.ratio, rel=0.01)  # no scatter: no width
    # With scatter σ in each log S, log2 of the bend is off by σ·‖w‖: ±1/(d ln 2) on the
    # ends of each side, d its doublings (3 below B_crit ≈ 100, log2(1438/128) beyond).
    scatter = np.where(np.arange(len(BATCHES)) % 2, 1.2, 1 / 1.2)
    loose = fit(BATCHES, steps * scatter)
    assert loose is not None and 64 < loose.b_crit < 128
    wide = bend(BATCHES, steps * scatter, loose)
    norm = math.sqrt(2 / 3**2 + 2 / math.log2(1438 / 128) ** 2) / math.log(2)
    half_width = stats.t.ppf(0.975, len(BATCHES) - 2) * loose.noise * norm
    assert math.log2(wide.high / wide.low) / 2 == pytest.approx(half_width)
    assert wide.low < wide.ratio < wide.high
    power = 1e4 / np.sqrt(np.asarray(BATCHES, np.float64))
    straight = fit(BATCHES, power)
    assert straight is not None
    assert bend(BATCHES, power, straight).ratio == pytest.approx(1.0)


def test_the_centred_mean_has_no_lag_and_stops_at_a_blow_up() -> None:
    line = np.arange(20, dtype=np.float64)
    np.testing.assert_allclose(centred_mean(line, 5)[2:-2], line[2:-2])
    assert centred_mean(line, 4)[10] == pytest.approx(10.5)  # even: the later half wider
    blown = centred_mean(np.array([1.0, 1.0, math.inf, 1.0]), 1)
    assert blown[:2].tolist() == [1.0, 1.0] and np.isnan(blown[2:]).all()


def test_the_model_with_its_noise_scale_reproduces(store) -> None:
    verdict = judged(store, ladder(lambda b: 30.0 * (1 + 100.0 / b), b_simple=300.0))
    assert verdict.reproduced == "yes", verdict.text()
    assert verdict.numbers["B_crit (fit)"] == pytest.approx(100.0, rel=0.03)
    assert verdict.numbers["B_simple at the target"] == 300.0
    assert verdict.numbers["batches whose best rate is on the grid's edge"] == 0
    assert verdict.sentence.startswith("S is 405 steps at B = 8 and 33 steps at 1438; the fit")
    assert f"B_crit = {verdict.numbers['B_crit (fit)']:.3g} (95% interval" in verdict.sentence
    table = RECIPE.tables({})[f"Steps to a training loss of {TARGET:g}"]
    assert table.values.shape == (len(BATCHES), len(RATES)) and np.isnan(table.values).all()


@pytest.mark.parametrize(
    ("steps", "b_simple", "agrees"),
    [
        (lambda b: 30.0 * (1 + 100.0 / b), 5_000.0, False),  # B_simple 50× B_crit
        (lambda b: 100.0 * (1 + 2.0 / b), 300.0, False),  # S hardly falls: B_crit ≈ 2
        (lambda b: 1_000.0 / math.sqrt(b), 300.0, True),  # S ∝ B^−½: no bend at all
    ],
)
def test_a_noise_scale_far_off_or_no_bend_says_no(store, steps, b_simple, agrees) -> None:
    verdict = judged(store, ladder(steps, b_simple))
    assert verdict.reproduced == "no", verdict.text()
    assert (0.1 <= verdict.numbers["B_simple ÷ B_crit"] <= 10) == agrees
    if agrees:  # the fit's B_crit agrees; the shape does not
        assert verdict.numbers[f"bend {LEVEL:.0%} interval high"] < SMALLEST_BEND


def test_a_fit_too_loose_to_tell_is_inconclusive(store) -> None:
    # ±20% scatter about B_crit = 100 (the bend still clearly above 1), and B_simple 10×
    # the fitted B_crit: the range's lower end sits inside B_crit's interval.
    scatter = {b: 1.2 if i % 2 else 1 / 1.2 for i, b in enumerate(BATCHES)}
    steps = model_steps(100.0) * np.array(list(scatter.values()))
    line = fit(BATCHES, steps)
    assert line is not None and line.low < line.b_crit < line.high
    verdict = judged(store, ladder(lambda b: 30.0 * (1 + 100.0 / b) * scatter[b], 10 * line.b_crit))
    assert verdict.reproduced == "inconclusive", verdict.text()
    low, high = (verdict.numbers[f"B_crit 95% interval {end}"] for end in ("low", "high"))
    assert low < verdict.numbers["B_simple at the target"] / 10 < high
    assert verdict.numbers["bend 95% interval low"] > 1


def test_a_best_rate_on_the_grids_edge_leaves_it_inconclusive(store) -> None:
    # The model's steps, but every batch fastest at the grid's smallest rate: a smaller
    # one might be faster still, so S is only the grid's.
    verdict = judged(store, ladder(lambda b: 30.0 * (1 + 100.0 / b), 300.0, best=0))
    assert verdict.reproduced == "inconclusive", verdict.text()
    assert verdict.numbers["batches whose best rate is on the grid's edge"] == len(BATCHES)


def test_b_simple_is_read_while_the_loss_passes_the_target(store) -> None:
    # Full batch (an epoch a step, no smoothing): the loss passes TARGET·√2 at step 45 and
    # TARGET/√2 at 140 when it reaches the target at 100; B_simple logged = the step.
    rows = {
        t: {"loss": TARGET + FALL * (1 - t / 100), "epoch": float(t), "noise_scale": float(t)}
        for t in range(1, 200)
    }
    assert noise_scale_at_target(stored(store, rows).metrics) == pytest.approx(92.5)
    never = {t: {"loss": 1.0, "epoch": float(t), "noise_scale": 5.0} for t in range(1, 9)}
    assert math.isnan(noise_scale_at_target(stored(store, never).metrics))


def test_a_verdict_of_some_runs_is_partial_and_names_no_nan(store) -> None:
    rows = ladder(lambda b: 30.0 * (1 + 100.0 / b), b_simple=300.0)
    keys = [arm.key for arm in RECIPE.arms()][: 2 * len(RATES)]  # the two smallest batches
    verdict = judged(store, rows, keys)
    assert verdict.reproduced is None and verdict.ended == len(keys)
    assert verdict.numbers["S at B = 8"] == pytest.approx(30.0 * (1 + 100 / 8), abs=1)
    assert "B_crit (fit)" not in verdict.numbers and "nan" not in verdict.text()


def test_nothing_measured_is_inconclusive(store) -> None:
    # No run ever reaches the target: nothing to fit, and no B_simple at it.
    verdict = judged(store, ladder(lambda b: math.inf, b_simple=300.0))
    assert verdict.reproduced == "inconclusive"
    assert verdict.numbers["S at B = 8"] == math.inf
    assert math.isnan(verdict.numbers["B_simple at the target"])
