"""The critical batch size (McCandlish, Kaplan, Amodei et al., 2018, "An Empirical Model
of Large-Batch Training"): the gradient noise scale predicts the batch size beyond which
doubling the batch no longer halves the steps to a target loss.

Their model (§2.3, Eq. 2.11-2.12), with the learning rate tuned for each batch size B:
the optimizer steps S and the training examples E = B·S that reach a given loss obey

    (S/S_min − 1)(E/E_min − 1) = 1,   that is   S = S_min (1 + B_crit/B),
    B_crit = E_min/S_min,

so that below B_crit doubling B about halves S and beyond it hardly changes it (at
B = B_crit a run takes 2·S_min steps and 2·E_min examples). The simple noise scale
B_simple = tr(Σ)/|G|² (Eq. 2.9: Σ the per-example gradients' covariance, G their mean),
which the lab's instrument measures (`noise_scale_every`), predicts B_crit. How well: the
paper gives both for 8 tasks (Table 1, Fig. 4) and takes B_simple as an order-of-magnitude
estimate of B_crit. Their ratio B_simple/B_crit is 1.3 to 8 for the image classifiers
(MNIST 2.5 at the start of training, 4.5 averaged over it; SVHN 6, 8; CIFAR-10 1.3, 2.2;
ImageNet 4, 2) and 0.05 to 8 over all tasks; B_simple ignores the Hessian that
B_noise = tr(HΣ)/GᵀHG weighs (Eq. 2.8), and the paper expects the two to differ by a
small constant factor (§2.2). Hence `AGREEMENT`: within 10× either way.

Here: SGD on digits with the MLP at batches 8 to 1,438 (the whole training split), each
at the same 6 learning rates a factor 2 apart, the fastest taken, as the paper tunes (App.
A.2: a grid of rates at each batch). A grid and not a rule: a linear-scaling rule capped
at the largest stable rate puts a knee in S(B) where the cap begins, whatever the noise,
and the fit would find that knee. A batch whose fastest rate is the grid's smallest or
largest is tuned only as far as the grid reaches, and leaves the verdict inconclusive; at
seeds 0-4 every batch's was inside (at seeds 0 and 4: 0.1 at B = 8, rising to 0.4 or 0.8
from 64 on, as the paper's ε_opt = ε_max/(1 + B_noise/B) does), and a grid twice as fine
(11 rates a factor √2 apart, seed 0) moved B_crit from 45 to 49.

A run's training loss at a step is the mean of its logged batch losses over an epoch's
steps centred on it (one step at the full split): each batch loss is an unbiased sample
of the training loss, so the mean holds 1,438 examples' noise at every batch and,
centred, no lag. S: the first step where it is at or below `TARGET`. B_simple: the median
of the instrument's values while the fastest run at `NOISE_BATCH` falls through the target
(its estimates of |G|² and tr(Σ) from the gradients of each batch and of its two halves,
averaged over steps: their ratio swings 2× from step to step at a large rate). It depends
on the rate, as the paper's temperature (App. C: B_noise ∝ 1/T): with η = 0.2 instead of
its fastest 0.8, batch 128 reads 69 instead of 40 (seed 0).

Measured as `make recipes` runs it (seeds 0-4; 45 s at seed 0): S falls from 239-314 steps at B = 8
to 38-50 at the full split; B_crit = 32-47, B_simple = 18-40, 0.5-0.9× B_crit (the paper's
image classifiers: 1.3-8×); a doubling below B_crit cuts S 1.3-1.6× more than one beyond
it. Held-out seeds 10-14: the same, 5 of 5.

The negative control trains every rung at batch 128: the steps cannot fall along the
ladder. A learning rate not tuned per batch is no control: at η = 0.2 or 0.4 on every
arm the steps still bend (B_crit 20 and 57, against B_simple 69 and 30, seed 0), since a
small batch's noise slows an untuned rate as well; only the grid-edge rule stops a yes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from core.group_comparison import time_to_target
from core.lazy import lazy_module
from core.readable import number
from core.recipes.readings import series, steps_per_epoch
from core.recipes.recipe import (
    Arm,
    Control,
    Judgement,
    Outcome,
    Paper,
    Recipe,
    Results,
    Table,
    digits_mlp,
)
from core.store import Metrics

stats = lazy_module("scipy.stats")  # at the first verdict, not with the pages

TRAIN_SIZE = 1_438  # digits' training split
BATCHES = (8, 16, 32, 64, 128, 256, 512, TRAIN_SIZE)
RATES = (0.05, 0.1, 0.2, 0.4, 0.8, 1.6)
TARGET = 0.2  # the training loss to reach (cross-entropy; ln 10 ≈ 2.3 at the start)
#: A run at batch B trains this many epochs' steps, or `STEPS`, whichever is more: the
#: fastest rate of every batch passes the target well within (S is 240-340 steps at B = 8,
#: under 2 of its 4 epochs; 38-53 at the full split, of its 150).
EPOCHS, STEPS = 4, 150
NOISE_BATCH = 128  # the batch whose runs measure B_simple
#: B_simple "at the target": the median of the values its run logged while its training
#: loss fell from `TARGET`·`BAND` to `TARGET`/`BAND` (the instrument's running averages
#: swing by 2× from step to step at a large rate; B_simple rises as the loss falls).
BAND = math.sqrt(2)
#: The paper's agreement (Table 1): B_simple within a factor 10 of B_crit, either way.
AGREEMENT = 10.0
#: The least bend the model has: the cut of the doubling that ends at B_crit,
#: (1 + 2)/(1 + 1) = 1.5, over that of the one that starts there, (1 + 1)/(1 + 1/2) = 4/3.
SMALLEST_BEND = 9 / 8
LEVEL = 0.95  # of the intervals of B_crit and of the bend


def key(batch: int, rate: float) -> str:
    return f"B = {batch} · η = {rate:g}"


def budget(batch: int) -> int:
    """The steps a run at `batch` trains: `EPOCHS` epochs (of full batches), or `STEPS`."""
    return max(EPOCHS * (TRAIN_SIZE // batch), STEPS)


def centred_mean(values: np.ndarray, width: int) -> np.ndarray:
    """The mean of `values` over `width` entries centred on each (fewer at the ends);
    NaN from the first non-finite value on (a run that blew up)."""
    values = np.asarray(values, np.float64)
    bad = np.flatnonzero(~np.isfinite(values))
    n = len(values) if not len(bad) else int(bad[0])
    sums = np.concatenate([[0.0], np.cumsum(values[:n])])
    ends = np.arange(n)
    low = np.clip(ends - (width - 1) // 2, 0, n)
    high = np.clip(ends + width // 2 + 1, 0, n)
    out = np.full(len(values), math.nan)
    out[:n] = (sums[high] - sums[low]) / (high - low)
    return out


def training_loss(metrics: Metrics) -> tuple[np.ndarray, np.ndarray]:
    """The steps and the run's training loss there: its batch losses averaged over an
    epoch's steps (as the run counted them, whatever batch it trained at) centred on each."""
    steps, losses = series(metrics, "loss")
    width = max(1, round(steps_per_epoch(metrics) or 1))
    return steps, centred_mean(losses, width)


def steps_to_target(metrics: Metrics) -> float:
    """The first step at which the run's training loss is at or below `TARGET`; +∞ if it
    never is."""
    return time_to_target(*training_loss(metrics), TARGET, higher_is_better=False)


def noise_scale_at_target(metrics: Metrics) -> float:
    """The median B_simple the run logged while its training loss fell from
    `TARGET`·`BAND` to `TARGET`/`BAND` (to its end if it never got that low); NaN if it
    never reached the band or logged none there."""
    steps, loss = training_loss(metrics)
    start = time_to_target(steps, loss, TARGET * BAND, higher_is_better=False)
    end = time_to_target(steps, loss, TARGET / BAND, higher_is_better=False)
    logged, values = series(metrics, "noise_scale")
    inside = values[(logged >= start) & (logged <= end)]
    return float(np.median(inside)) if len(inside) else math.nan


def measured(
    batches: Sequence[float], steps: Sequence[float] | np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The batches whose steps were measured (finite: the target reached), and log S."""
    b, s = np.asarray(batches, np.float64), np.asarray(steps, np.float64)
    keep = np.isfinite(s) & (s > 0)
    return b[keep], np.log(s[keep])


@dataclass(frozen=True)
class Fit:
    """S = S_min (1 + B_crit/B), least squares in log S (each batch's steps weigh alike,
    whether hundreds or thousands).

    For a given B_crit the best log S_min is the mean of log S − log(1 + B_crit/B), so
    the fit is a search over B_crit alone (a fine log grid), and its interval the profile
    one: the B_crit whose residual sum of squares is at most RSS_min·(1 + F/(n − 2)), F
    the `LEVEL` quantile of F(1, n − 2) (one parameter profiled; Bates & Watts 1988).

    Attributes:
        s_min, b_crit: The fitted values; B_crit 0 where the steps do not fall with the
            batch, +∞ (and S_min 0) where they fall as 1/B throughout: no bend within
            the batches (the grid's ends, a thousandfold beyond them, stand for both).
        low, high: The interval of B_crit, from 0 or to +∞ where it reaches those ends.
        noise: How far one batch's log S strays from a curve through them all: the
            residuals' standard deviation (n − 2 degrees of freedom) about this curve or
            about a straight line in log S against log B (a power law, bending nowhere),
            whichever fits better (the other's residuals hold its misfit too).
        n: The batches fitted.
    """

    s_min: float
    b_crit: float
    low: float
    high: float
    noise: float
    n: int


def fit(batches: Sequence[float], steps: Sequence[float] | np.ndarray) -> Fit | None:
    """The fit of S = S_min (1 + B_crit/B) to `steps` at `batches` (finite steps only);
    None with fewer than 3 of them, too few for an interval."""
    b, log_s = measured(batches, steps)
    n = len(b)
    if n < 3:
        return None
    # From 1,000× below the smallest batch to 1,000× above the largest: beyond, the model
    # is S flat or S ∝ 1/B to within 0.1% over the batches.
    grid = np.geomspace(b.min() / 1e3, b.max() * 1e3, 4_001)
    shapes = np.log1p(grid[:, None] / b[None, :])  # log(1 + B_crit/B), [grid, batch]
    log_s_min = (log_s[None, :] - shapes).mean(axis=1)
    rss = ((log_s[None, :] - shapes - log_s_min[:, None]) ** 2).sum(axis=1)
    best = int(np.argmin(rss))
    threshold = rss[best] * (1 + stats.f.ppf(LEVEL, 1, n - 2) / (n - 2))
    inside = np.flatnonzero(rss <= threshold * (1 + 1e-12))  # a perfect fit: its point
    ends = {0: 0.0, len(grid) - 1: math.inf}  # the grid's ends stand for the limits
    low, high = (ends.get(int(i), float(grid[i])) for i in (inside[0], inside[-1]))
    b_crit = ends.get(best, float(grid[best]))
    limits = {0.0: float(np.exp(log_s.mean())), math.inf: 0.0}  # S flat; S ∝ 1/B
    s_min = limits.get(b_crit, float(np.exp(log_s_min[best])))
    log_b = np.log(b)
    straight = np.polyval(np.polyfit(log_b, log_s, 1), log_b)
    noise = math.sqrt(min(rss[best], ((log_s - straight) ** 2).sum()) / (n - 2))
    return Fit(s_min, b_crit, low, high, noise, n)


@dataclass(frozen=True)
class Bend:
    """How many times more a doubling of the batch cuts the steps below B_crit than
    beyond it: the step-halving shape.

    A doubling's cut is S(B)/S(2B). Its average over the measured batches on one side of
    B_crit (all at or below it; all at or above) is (S(first)/S(last))^(1/d), d the
    doublings from the first to the last (the pairs between telescope). The model's cut
    runs from 2 far below B_crit to 1 far beyond, so `ratio` = below ÷ beyond is 1
    without a bend and up to 2 with the model's; its adjacent doublings, the one ending
    at B_crit and the one starting there, cut 1.5 and 4/3: a ratio of `SMALLEST_BEND`.
    The interval treats each batch's log S as off by the fit's noise σ, independently:
    log2 ratio = Σ wᵢ log Sᵢ has the standard error σ‖w‖, times the `LEVEL` quantile of
    t(n − 2).

    Attributes:
        below, beyond: The average cuts (NaN where fewer than two batches lie there).
        ratio, low, high: below ÷ beyond and its interval (NaN without both).
    """

    below: float
    beyond: float
    ratio: float
    low: float
    high: float


def bend(batches: Sequence[float], steps: Sequence[float] | np.ndarray, line: Fit) -> Bend:
    """The step-halving shape of `steps` (finite ones) at `batches` about `line`'s B_crit."""
    b, log_s = measured(batches, steps)
    weights = np.zeros(len(b))  # log2(below ÷ beyond) = Σ wᵢ log Sᵢ
    cuts = []
    for sign, side in ((1.0, b <= line.b_crit), (-1.0, b >= line.b_crit)):
        ends = np.flatnonzero(side)
        if len(ends) < 2:
            cuts.append(math.nan)
            continue
        first, last = ends[0], ends[-1]
        w = 1 / (math.log(2) * math.log2(b[last] / b[first]))  # log2 of the cut, per log S
        cuts.append(float(2 ** (w * (log_s[first] - log_s[last]))))
        weights[first] += sign * w
        weights[last] -= sign * w
    below, beyond = cuts
    ratio = below / beyond
    if math.isnan(ratio):
        return Bend(below, beyond, math.nan, math.nan, math.nan)
    t = stats.t.ppf(0.5 + LEVEL / 2, line.n - 2)
    margin = float(t * line.noise * np.linalg.norm(weights))  # in log2 of the ratio
    return Bend(below, beyond, ratio, ratio / 2**margin, ratio * 2**margin)


class CriticalBatch(Recipe):
    name = "critical_batch"
    title = "The noise scale predicts the critical batch size"
    paper = Paper(
        "McCandlish, Kaplan, Amodei & the OpenAI Dota Team",
        2018,
        "arXiv",
        "An Empirical Model of Large-Batch Training",
    )
    claim = (
        "With the learning rate tuned per batch size, doubling the batch halves the steps to "
        "a target loss up to a critical batch size, which the gradient noise scale B_simple "
        "predicts to within an order of magnitude."
    )
    measure = (
        f"SGD at batches {', '.join(map(str, BATCHES))}, each at rates "
        f"{', '.join(f'{r:g}' for r in RATES)}; S(B): the fewest steps any rate takes to a "
        f"training loss of {TARGET:g} (batch losses averaged over an epoch, centred). A "
        "least-squares fit of log S = log S_min + log(1 + B_crit/B) gives B_crit, with its "
        f"{LEVEL:.0%} profile interval; B_simple is the noise-scale instrument's median at "
        f"batch {NOISE_BATCH}'s fastest rate while its training loss falls from "
        f"{number(TARGET * BAND, 2)} to {number(TARGET / BAND, 2)}. The bend: how many times "
        "more a "
        "doubling of B cuts S below B_crit than beyond it, on average (1 "
        f"without a bend; the model's least, between adjacent doublings, {SMALLEST_BEND:g}), "
        f"with its {LEVEL:.0%} interval from the steps' noise. Reproduced when B_crit's "
        f"interval lies within B_simple/{AGREEMENT:g} to B_simple·{AGREEMENT:g} (the paper's "
        "Table 1), the bend's above 1, and every batch's best rate inside the grid; not when "
        "B_crit's lies wholly outside that range or the bend's wholly below "
        f"{SMALLEST_BEND:g}; else inconclusive."
    )
    charts: ClassVar[tuple[str, ...]] = ("loss", "noise_scale")
    control = Control(
        {"batch_size": NOISE_BATCH},
        f"Every arm at batch {NOISE_BATCH}: the rungs of the ladder differ by no batch, so "
        "the steps to the target cannot fall along it.",
    )
    runtime_s = 45.0

    def arms(self) -> tuple[Arm, ...]:
        return tuple(
            Arm(
                key(batch, rate),
                digits_mlp(
                    optimizer="sgd",
                    hyperparameters={"learning_rate": rate},
                    batch_size=batch,
                    max_steps=budget(batch),
                    # As many epochs as steps: `max_steps` ends the run at any batch (the
                    # control's too).
                    epochs=budget(batch),
                    val_every=budget(batch),  # once, at the end: the verdict needs none
                    # The instrument is part of the telemetry: on for one batch only.
                    telemetry=batch == NOISE_BATCH,
                    noise_scale_every=1 if batch == NOISE_BATCH else 0,
                ),
            )
            for batch in BATCHES
            for rate in RATES
        )

    def steps_grid(self, results: Results) -> np.ndarray:
        """Steps to the target by [batch, rate]: NaN where the run has not ended, +∞
        where it never reached the target."""
        grid = np.full((len(BATCHES), len(RATES)), math.nan)
        for i, batch in enumerate(BATCHES):
            for j, rate in enumerate(RATES):
                runs = results.get(key(batch, rate), ())
                if runs:
                    grid[i, j] = steps_to_target(runs[0].metrics)
        return grid

    def tables(self, results: Results) -> dict[str, Table]:
        return {
            f"Steps to a training loss of {TARGET:g}": Table(
                self.steps_grid(results), BATCHES, RATES, "batch B", "learning rate η", "steps"
            )
        }

    def judge(self, results: Results) -> Judgement:
        steps, chosen = fastest(self.steps_grid(results))
        numbers = {f"S at B = {batch}": float(s) for batch, s in zip(BATCHES, steps, strict=True)}
        edges = sum(j in (0, len(RATES) - 1) for j in chosen if j is not None)
        numbers["batches whose best rate is on the grid's edge"] = float(edges)
        j = chosen[BATCHES.index(NOISE_BATCH)]
        b_simple = (
            math.nan
            if j is None
            else noise_scale_at_target(results[key(NOISE_BATCH, RATES[j])][0].metrics)
        )
        numbers["B_simple at the target"] = b_simple
        line = fit(BATCHES, steps)
        if line is None or math.isnan(b_simple):
            missing = "B_simple was" if line is not None else "S at 3 batches or more were"
            return Judgement("inconclusive", numbers, f"Nothing to judge: {missing} not measured.")
        shape = bend(BATCHES, steps, line)
        ratio = b_simple / line.b_crit if line.b_crit else math.inf
        numbers |= {
            "B_crit (fit)": line.b_crit,
            f"B_crit {LEVEL:.0%} interval low": line.low,
            f"B_crit {LEVEL:.0%} interval high": line.high,
            "S_min (fit)": line.s_min,
            "noise (log S)": line.noise,
            "B_simple ÷ B_crit": ratio,
            "cut per doubling below B_crit": shape.below,
            "cut per doubling beyond B_crit": shape.beyond,
            "bend (below ÷ beyond)": shape.ratio,
            f"bend {LEVEL:.0%} interval low": shape.low,
            f"bend {LEVEL:.0%} interval high": shape.high,
        }
        return Judgement(
            outcome(line, b_simple, shape, edges), numbers, sentence(steps, line, b_simple, shape)
        )


def fastest(grid: np.ndarray) -> tuple[np.ndarray, list[int | None]]:
    """Each batch's fewest steps over the rates of `grid` (as `steps_grid`) that have
    ended, and the index of the rate that took them: NaN and None while none has, +∞ and
    None when none reached the target."""
    steps = np.full(len(grid), math.nan)
    chosen: list[int | None] = [None] * len(grid)
    for i, row in enumerate(grid):
        if not np.isnan(row).all():
            steps[i] = np.nanmin(row)
            chosen[i] = int(np.nanargmin(row)) if math.isfinite(steps[i]) else None
    return steps, chosen


def outcome(line: Fit, b_simple: float, shape: Bend, edges: int) -> Outcome:
    """No when B_crit's interval lies wholly outside a factor `AGREEMENT` of B_simple, or
    the bend's wholly below `SMALLEST_BEND` (doubling the batch does about as much below
    B_crit as beyond); yes when B_crit's lies wholly within, the bend's wholly above 1
    (a doubling below cuts clearly more) and every batch's best rate lies inside the grid
    (its S tuned, not the grid's edge's); else inconclusive."""
    low, high = b_simple / AGREEMENT, b_simple * AGREEMENT
    if line.high < low or line.low > high or shape.high < SMALLEST_BEND:
        return "no"
    agrees = low <= line.low <= line.high <= high
    return "yes" if agrees and shape.low > 1 and not edges else "inconclusive"


def sentence(steps: np.ndarray, line: Fit, b_simple: float, shape: Bend) -> str:
    """The verdict's sentence: the steps, the fit, B_simple against it, and the bend."""
    ends = (f"{s:.0f} steps" if math.isfinite(s) else "not reached" for s in steps[[0, -1]])
    text = (
        f"S is {next(ends)} at B = {BATCHES[0]} and {next(ends)} at {BATCHES[-1]}; the "
        f"fit gives B_crit = {number(line.b_crit, 3)} ({LEVEL:.0%} interval "
        f"{number(line.low, 3)} to {number(line.high, 3)}), S_min = {number(line.s_min, 3)}. "
        f"B_simple = {number(b_simple, 3)} at the target"
    )
    if 0 < line.b_crit < math.inf:
        text += f", {number(b_simple / line.b_crit, 3)}× B_crit"
    if math.isnan(shape.ratio):
        return f"{text}. No bend to measure: fewer than two batches lie on one side of B_crit."
    return (
        f"{text}. A doubling cuts S by {shape.below:.2f}× below B_crit, {shape.beyond:.2f}× "
        f"beyond: a bend of {number(shape.ratio, 3)} ({LEVEL:.0%} interval "
        f"{number(shape.low, 3)} to {number(shape.high, 3)})."
    )


RECIPE = CriticalBatch()
