"""Comparing two groups of runs over seeds: the interval's coverage, the tests' error
rates, time to a target, and the sentence."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from core.group_comparison import compare, describe, p_values_note, smallest_p, time_to_target
from core.readable import number
from tests.imports import heavy_modules_after


@pytest.mark.slow
def test_the_interval_holds_the_true_difference_95_times_in_100() -> None:
    rng = np.random.default_rng(1)
    covered = 0
    for _ in range(1000):
        a = rng.normal(0.91, 0.02, size=5)  # e.g. a final accuracy over 5 seeds
        b = rng.normal(0.89, 0.05, size=6)  # unequal spreads: what Welch is for
        c = compare(a, b, permutations=200)
        covered += c.low <= 0.02 <= c.high
    assert 0.92 <= covered / 1000 <= 0.98


@pytest.mark.slow
def test_under_no_difference_both_tests_reject_about_5_in_100() -> None:
    rng = np.random.default_rng(2)
    rejections = np.zeros(2)
    for _ in range(1000):
        c = compare(rng.normal(size=5), rng.normal(size=5))
        rejections += [c.p_welch < 0.05, c.p_permutation < 0.05]
    assert np.all(rejections / 1000 <= 0.08) and np.all(rejections / 1000 >= 0.02)


def test_a_real_difference_is_found() -> None:
    c = compare([0.95, 0.96, 0.94, 0.95, 0.97], [0.90, 0.91, 0.89, 0.92, 0.90])
    assert c.difference == pytest.approx(0.05)
    assert c.p_welch < 0.001 and c.p_permutation == pytest.approx(2 / 252)  # exact
    assert c.low > 0


def test_welch_matches_scipy() -> None:
    a, b = [1.0, 2.0, 4.0, 3.5], [0.5, 0.7, 1.9]
    c = compare(a, b)
    assert c.p_welch == pytest.approx(stats.ttest_ind(a, b, equal_var=False).pvalue)
    interval = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    assert (c.low, c.high) == pytest.approx((interval.low, interval.high))


def test_one_run_a_group_has_no_interval_and_bad_input_is_refused() -> None:
    c = compare([1.0], [0.5, 0.6])
    assert c.low is None and c.p_welch is None
    assert c.p_permutation == pytest.approx(
        1 / 3
    )  # the observed labelling is the most extreme of 3
    with pytest.raises(ValueError, match="at least one run"):
        compare([], [1.0])
    with pytest.raises(ValueError, match="NaN"):
        compare([math.nan], [1.0])


def test_time_to_target_and_runs_that_never_reach_it() -> None:
    steps = np.array([10, 20, 30, 40])
    accuracy = np.array([0.5, 0.8, np.nan, 0.95])
    assert time_to_target(steps, accuracy, 0.8, higher_is_better=True) == 20
    assert time_to_target(steps, accuracy, 0.99, higher_is_better=True) == math.inf
    assert time_to_target(steps, np.array([3.0, 1.0, 0.2, 0.1]), 0.5, higher_is_better=False) == 30
    fast, slow = [100.0, 120.0, 110.0, 90.0], [300.0, math.inf, 280.0, math.inf]
    c = compare(fast, slow)
    assert c.difference == -math.inf and c.low is None
    assert c.p_permutation == pytest.approx(2 / 70)  # by rank: every fast run came first
    text = describe(c, "adamw", "sgd", "steps to val_accuracy 0.9")
    assert "0 of 4 runs of adamw and 2 of 4 of sgd never reached it" in text


def test_the_sentence_says_how_much_which_way_and_how_sure() -> None:
    c = compare([0.95, 0.96, 0.94, 0.95, 0.97], [0.93, 0.94, 0.92, 0.95, 0.93])
    text = describe(c, "adamw", "sgd", "val_accuracy at step 600", percent=True)
    assert text.startswith("adamw's val_accuracy at step 600 is 2 ± ")
    assert " points higher than sgd's over 5 and 5 seeds (95% Welch interval; p = " in text
    assert "by Welch's t" in text and "by a permutation test" in text


@pytest.mark.parametrize(("n_a", "n_b"), [(3, 3), (2, 4), (4, 3), (1, 3), (5, 5)])
def test_the_smallest_p_is_what_the_permutation_test_gives_groups_set_wholly_apart(
    n_a: int, n_b: int
) -> None:
    # Unevenly spaced, so that with unequal groups no other split is as far apart.
    a, b = 2.0 ** np.arange(n_a), 1000 + 3.0 ** np.arange(n_b)
    assert compare(a, b).p_permutation == pytest.approx(smallest_p(n_a, n_b))
    never = np.append(b[1:], math.inf)  # by rank, where both ends are as extreme
    by_rank = compare(a, never).p_permutation
    assert by_rank == pytest.approx(smallest_p(n_a, n_b, by_rank=True))
    assert smallest_p(3, 3) == pytest.approx(0.1)  # the issue's: 2 of the 20 splits
    assert smallest_p(10, 10) == 1 / 10_000  # more splits than it tries: 1 in the draws


def test_the_note_on_the_p_values_gives_the_floor_of_these_group_sizes() -> None:
    note = p_values_note(compare([0.9, 0.91, 0.92], [0.8, 0.81, 0.82]))
    assert "Welch's t assumes roughly normal values" in note
    assert note.endswith(
        "counts the 20 ways to split the 6 runs into groups of 3 and 3, "
        "so with 3 and 3 seeds it can give no p below 0.1."
    )
    uneven = p_values_note(compare([0.9, 0.91, 0.92, 0.93], [0.8, 0.81]))
    assert uneven.endswith("with 4 and 2 seeds it can give no p below 0.067.")  # 1 of 15
    drawn = p_values_note(compare(np.arange(10.0), np.arange(10.0) + 5))
    assert "draws 10,000 of the 184,756 ways" in drawn and drawn.endswith("below 0.0001.")
    ranked = p_values_note(compare([1.0, 2.0], [3.0, math.inf]))
    assert ranked.startswith("p: how often chance alone would part the groups this far. The ")
    assert "Welch" not in ranked  # no Welch p without finite values


def test_scipy_is_imported_at_the_first_comparison_not_with_the_pages_or_the_cli() -> None:
    # About a second of start-up for every page that draws charts, and for `runs`.
    assert heavy_modules_after("import core.charts, core.cli", ("scipy.stats",)) == []
    code = "import core.group_comparison as g; g.compare([1.0, 2.0], [3.0, 4.0])"
    assert heavy_modules_after(code, ("scipy.stats",)) == ["scipy.stats"]


def test_the_sentence_writes_numbers_for_people() -> None:
    # Two seeds each, far apart: a margin over 100 points, once written "± 1e+02".
    c = compare([0.9, 0.1], [0.2, 0.4])
    text = describe(c, "adamw", "sgd", "final val_accuracy", percent=True)
    assert "e+" not in text and "e-" not in text
    assert f"is 20 ± {number(c.margin * 100)} points higher" in text and c.margin > 1
    tiny = compare([1.0, 1.1, 1.2, 1.3, 1.4, 1.5], [9.0, 9.1, 9.2, 9.3, 9.4, 9.5])
    text = describe(tiny, "a", "b", "loss")
    assert "p = 4.9 × 10⁻¹⁵ by Welch's t, p = 0.0022 by a permutation" in text
