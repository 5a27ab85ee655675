"""Is A really better than B? Two groups of runs (one config each, over seeds) compared on
one number per run, with the uncertainty that the seeds leave.

    d = mean(A) − mean(B)
    95% interval: d ± t(0.975, ν) · √(s²_A / n_A + s²_B / n_B)      Welch (1947), ν by
                                                                     Welch–Satterthwaite
    p (Welch):        two-sided, of the same t statistic
    p (permutation):  the share of relabellings of the pooled runs into groups of n_A and
                      n_B whose |d| is at least the observed one (every relabelling when
                      there are at most `PERMUTATIONS`, else that many drawn at random)

Time to a target (AlgoPerf's measure): the first step at which a run's metric reaches it;
a run that never reaches it counts as never (`math.inf`), and then the groups are compared
by the permutation test on the rank sum (Mann–Whitney's statistic), which an infinite
time does not break, without an interval of the difference.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.lazy import lazy_module
from core.readable import number
from core.store import Metrics

# Imported at the first comparison, not with the pages and the CLI (about a second).
stats = lazy_module("scipy.stats")

LEVEL = 0.95
PERMUTATIONS = 10_000
P_DIGITS = 2  # a p-value's significant digits: 0.0022, not 0.002165


@dataclass(frozen=True)
class Comparison:
    """Group A against group B on one number per run.

    Attributes:
        a, b: The numbers, one per run.
        difference: mean(a) − mean(b); infinite when a run of one group never reached
            a target.
        low, high: The Welch interval of the difference at `level`; None without one
            (fewer than two runs in a group, or runs that never reached a target).
        p_welch: Welch's two-sided p-value; None without an interval.
        p_permutation: The permutation test's two-sided p-value.
    """

    a: tuple[float, ...]
    b: tuple[float, ...]
    difference: float
    low: float | None
    high: float | None
    p_welch: float | None
    p_permutation: float
    level: float = LEVEL

    @property
    def margin(self) -> float | None:
        """Half the interval's width: the "± m" of the difference."""
        return None if self.low is None or self.high is None else (self.high - self.low) / 2


def compare(
    a: Sequence[float],
    b: Sequence[float],
    *,
    level: float = LEVEL,
    permutations: int = PERMUTATIONS,
    seed: int = 0,
) -> Comparison:
    """A against B (see the module docstring); raises `ValueError` for an empty group or
    a NaN.

    Args:
        a, b: One number per run of each group (a final metric, or a time to target,
            where `math.inf` is a run that never reached it).
        level: The Welch interval's confidence level.
        permutations: The most relabellings the permutation test enumerates; beyond,
            it draws that many at random (see `permutation_p`).
        seed: The seed of those random draws, so that a comparison gives the same p
            each time it is drawn.
    """
    x, y = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if not len(x) or not len(y):
        raise ValueError("each group needs at least one run")
    if np.isnan(x).any() or np.isnan(y).any():
        raise ValueError("a run has no value (NaN)")
    finite = np.isfinite(x).all() and np.isfinite(y).all()
    if finite:
        difference = float(x.mean() - y.mean())
        p_permutation = permutation_p(x, y, _mean_difference, permutations, seed)
    else:
        difference = _infinite_difference(x, y)
        p_permutation = permutation_p(x, y, _rank_sum, permutations, seed)
    low = high = p_welch = None
    if finite and len(x) > 1 and len(y) > 1:
        low, high, p_welch = welch(x, y, level)
    return Comparison(
        a=tuple(map(float, x)),
        b=tuple(map(float, y)),
        difference=difference,
        low=low,
        high=high,
        p_welch=p_welch,
        p_permutation=p_permutation,
        level=level,
    )


def mean_interval(values: Sequence[float], level: float = LEVEL) -> tuple[float, float | None]:
    """The mean of `values` and the half-width of its t-interval at `level` (None for a
    single value): what a group's band and "mean ± m" show."""
    x = np.asarray(values, np.float64)
    if len(x) < 2:
        return float(x.mean()), None
    return float(x.mean()), float(_t_margin(x.std(ddof=1), len(x), level))


def welch(x: np.ndarray, y: np.ndarray, level: float = LEVEL) -> tuple[float, float, float]:
    """The Welch interval of mean(x) − mean(y) at `level`, and the two-sided p-value."""
    difference = x.mean() - y.mean()
    va, vb = x.var(ddof=1) / len(x), y.var(ddof=1) / len(y)
    error = math.sqrt(va + vb)
    if error == 0:  # every run of both groups gave the same number
        p = 1.0 if difference == 0 else 0.0
        return float(difference), float(difference), p
    dof = (va + vb) ** 2 / (va**2 / (len(x) - 1) + vb**2 / (len(y) - 1))
    quantile = stats.t.ppf(0.5 + level / 2, dof)
    p = 2 * stats.t.sf(abs(difference) / error, dof)
    return float(difference - quantile * error), float(difference + quantile * error), float(p)


def paired_interval(differences: Sequence[float], level: float = LEVEL) -> tuple[float, float]:
    """The t interval at `level` of the mean of per-pair differences (run k of A against
    run k of B, the two sharing a seed): mean ± t(ν = n − 1) · s / √n; the mean twice when
    every difference is the same, as when A's runs and B's are the same runs."""
    d = np.asarray(differences, np.float64)
    if len(d) < 2:
        raise ValueError("a paired interval needs at least two pairs")
    error = d.std(ddof=1) / math.sqrt(len(d))
    if error == 0:
        return float(d.mean()), float(d.mean())
    quantile = stats.t.ppf(0.5 + level / 2, len(d) - 1)
    return float(d.mean() - quantile * error), float(d.mean() + quantile * error)


def permutation_p(
    x: np.ndarray,
    y: np.ndarray,
    statistic: Callable[[np.ndarray, np.ndarray], float],
    permutations: int = PERMUTATIONS,
    seed: int = 0,
) -> float:
    """The share of relabellings of x ∪ y whose |statistic| is at least the observed one
    (the observed labelling included, so never 0).

    Args:
        x, y: The two groups' numbers.
        statistic: Of a relabelling: `statistic(pooled, chosen)` with `pooled` x then y
            and `chosen` the indices into it of the runs labelled x (the observed
            labelling is `arange(len(x))`).
        permutations: When x ∪ y has at most this many labellings, every one is
            counted; else the observed one and `permutations - 1` drawn at random.
        seed: The seed of the random draws.
    """
    pooled = np.concatenate([x, y])
    n = len(x)
    observed = abs(statistic(pooled, np.arange(n)))
    tolerance = 1e-12 * max(1.0, observed)
    if math.comb(len(pooled), n) <= permutations:
        labels = (np.array(c) for c in itertools.combinations(range(len(pooled)), n))
        values = [abs(statistic(pooled, chosen)) for chosen in labels]
        return float(np.mean(np.array(values) >= observed - tolerance))
    rng = np.random.default_rng(seed)
    drawn = (rng.permutation(len(pooled))[:n] for _ in range(permutations - 1))
    hits = 1 + sum(abs(statistic(pooled, chosen)) >= observed - tolerance for chosen in drawn)
    return hits / permutations


def _mean_difference(pooled: np.ndarray, chosen: np.ndarray) -> float:
    """mean of the `chosen` indices − mean of the rest."""
    mask = np.zeros(len(pooled), bool)
    mask[chosen] = True
    return float(pooled[mask].mean() - pooled[~mask].mean())


def _rank_sum(pooled: np.ndarray, chosen: np.ndarray) -> float:
    """The chosen runs' rank sum, centred on its mean under no difference (ties, infinite
    times among them, share their ranks)."""
    ranks = stats.rankdata(pooled)
    n = len(chosen)
    return float(ranks[chosen].sum() - n * (len(pooled) + 1) / 2)


def _infinite_difference(x: np.ndarray, y: np.ndarray) -> float:
    """mean(x) − mean(y) when a group holds an infinite time: ±inf, or NaN when both do."""
    with np.errstate(invalid="ignore"):
        return float(x.mean() - y.mean())


def time_to_target(
    steps: np.ndarray, values: np.ndarray, target: float, *, higher_is_better: bool
) -> float:
    """The first step at which `values` reaches `target` (≥ it when higher is better, ≤
    it else); `math.inf` if it never does."""
    reached = values >= target if higher_is_better else values <= target
    hits = np.flatnonzero(reached & np.isfinite(values))
    return float(steps[hits[0]]) if len(hits) else math.inf


def describe(comparison: Comparison, a: str, b: str, what: str, *, percent: bool = False) -> str:
    """The comparison in words, e.g. "adamw's val_accuracy at step 600 is 2.1 ± 0.8 points
    higher than sgd's over 5 and 5 seeds (95% Welch interval; p = 0.003 by Welch's t,
    0.008 by permutation)".

    Args:
        comparison: What `compare` found.
        a, b: The groups' names, as the sentence shows them ("adamw").
        what: The number compared, as the sentence names it ("val_accuracy at step
            600", "steps to val_accuracy ≥ 0.9").
        percent: Show the difference as points of a share (×100, "2.1 points"): for
            an accuracy.
    """
    c = comparison
    runs = f"over {len(c.a)} and {len(c.b)} seeds"
    permutation = f"p = {number(c.p_permutation, P_DIGITS)} by a permutation test"
    if not math.isfinite(c.difference):
        never_a = sum(math.isinf(v) for v in c.a)
        never_b = sum(math.isinf(v) for v in c.b)
        return (
            f"{what}: {never_a} of {len(c.a)} runs of {a} and {never_b} of {len(c.b)} of {b} "
            f"never reached it; compared by rank, {permutation}."
        )
    scale, unit = (100.0, " points") if percent else (1.0, "")
    size = abs(c.difference) * scale
    direction = "higher" if c.difference > 0 else "lower" if c.difference < 0 else "different"
    margin = "" if c.margin is None else f" ± {number(c.margin * scale)}"
    interval = "" if c.margin is None else f"{c.level:.0%} Welch interval; "
    welch_p = "" if c.p_welch is None else f"p = {number(c.p_welch, P_DIGITS)} by Welch's t, "
    tests = f"{interval}{welch_p}{permutation}"
    return f"{a}'s {what} is {number(size)}{margin}{unit} {direction} than {b}'s {runs} ({tests})."


def smallest_p(
    n_a: int, n_b: int, *, by_rank: bool = False, permutations: int = PERMUTATIONS
) -> float:
    """The smallest p-value the permutation test can give groups of `n_a` and `n_b` runs:
    the observed split of the pooled runs is one of C(n_a + n_b, n_a), so only more seeds
    lower it. Two splits are as extreme when the statistic is symmetric (equal groups, or
    ranks); 1 in `permutations` when the splits are drawn rather than counted."""
    splits = math.comb(n_a + n_b, n_a)
    if splits > permutations:
        return 1 / permutations
    return (2 if by_rank or n_a == n_b else 1) / splits


def p_values_note(comparison: Comparison) -> str:
    """One line on what the two p-values say, and the floor the seeds put under the
    permutation test's, e.g. "… so with 3 and 3 seeds it can give no p below 0.1"."""
    n_a, n_b = len(comparison.a), len(comparison.b)
    floor = smallest_p(n_a, n_b, by_rank=not math.isfinite(comparison.difference))
    splits = math.comb(n_a + n_b, n_a)
    ways = f"ways to split the {n_a + n_b} runs into groups of {n_a} and {n_b}"
    if splits <= PERMUTATIONS:
        limit = f"counts the {splits:,} {ways}, so with {n_a} and {n_b} seeds it"
    else:
        limit = f"draws {PERMUTATIONS:,} of the {splits:,} {ways}, so it"
    floor_text = number(floor, P_DIGITS)
    test = f"permutation test assumes nothing, but it {limit} can give no p below {floor_text}."
    if comparison.p_welch is None:
        return f"p: how often chance alone would part the groups this far. The {test}"
    return (
        "p: how often chance alone would part the groups this far. Welch's t assumes "
        f"roughly normal values; the {test}"
    )


def value_at(metrics: Metrics, key: str, step: int | None = None) -> float:
    """`key`'s last value logged at or before `step` (None: over the whole run); NaN
    when there is none."""
    if key not in metrics:
        return math.nan
    values = metrics[key]
    logged = ~np.isnan(values)
    if step is not None:
        logged &= metrics.steps <= step
    hits = np.flatnonzero(logged)
    return float(values[hits[-1]]) if len(hits) else math.nan


def higher_is_better(key: str) -> bool:
    """Whether a larger `key` is the better one: accuracies yes; losses and errors no."""
    return "accuracy" in key


def mean_band(
    series: Sequence[Metrics], key: str, level: float = LEVEL
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A group's `key` over the steps that every run logged it at: the steps, the mean and
    the half-width of the t-interval at each (NaN for a group of one)."""
    common: set[int] | None = None
    for metrics in series:
        logged = set(metrics.steps[~np.isnan(metrics[key])].tolist()) if key in metrics else set()
        common = logged if common is None else common & logged
    steps = np.array(sorted(common or ()), np.int64)
    if not len(steps):
        empty = np.empty(0)
        return steps, empty, empty
    table = np.stack([m[key][np.searchsorted(m.steps, steps)] for m in series])
    mean = table.mean(axis=0)
    if len(series) < 2:
        return steps, mean, np.full(len(steps), np.nan)
    return steps, mean, _t_margin(table.std(axis=0, ddof=1), len(series), level)


def _t_margin(std: Any, n: int, level: float) -> Any:
    """Half the width of the t-interval at `level` of a mean of `n` values of standard
    deviation `std` (a number, or an array of them)."""
    return stats.t.ppf(0.5 + level / 2, n - 1) * std / math.sqrt(n)
